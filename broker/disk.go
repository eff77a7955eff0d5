package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/strata-log/strata/config"
)

// ErrLowDiskSpace refuses to start a broker whose data dir has less free
// space than storage.min_free_bytes. The error wrapping it names the dir,
// the free bytes and the setting.
var ErrLowDiskSpace = errors.New("broker: not enough free disk space to start")

// WithFreeSpace makes the broker read its data dir's free space with free
// instead of statfs, at start and before each produce: a seam for tests of
// a disk running short, which no test can make a real disk do on cue.
func WithFreeSpace(free func(dir string) (int64, error)) Option {
	return func(b *Broker) { b.freeSpace = free }
}

// freeBytes is the space available to this process on the file system
// holding dir.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// checkStartSpace refuses to start on a data dir with less free space than
// storage.min_free_bytes (0 disables the check): a broker started on a full
// disk can hang opening its Raft state rather than serve or exit, and would
// refuse every produce anyway. free is freeBytes, or a fake in tests. A
// file system whose free space cannot be read is let through, as produce
// lets it through (the warning says so).
func checkStartSpace(dir string, min config.ByteSize, free func(string) (int64, error), logger *slog.Logger) error {
	if min <= 0 {
		return nil
	}
	n, err := free(dir)
	if err != nil {
		logger.Warn("cannot read the data dir's free space; starting without the storage.min_free_bytes check", "dir", dir, "err", err)
		return nil
	}
	if n >= int64(min) {
		return nil
	}
	return fmt.Errorf("%w: data dir %s has %d bytes (%s) free, below storage.min_free_bytes (%s); free some space there, or lower storage.min_free_bytes (0 disables the check)",
		ErrLowDiskSpace, dir, n, config.FormatBytes(n), min)
}

// checkDiskSpace refuses produce with STORAGE_FULL while the data dir's
// file system has less free space than storage.min_free_bytes: better a
// clear, retriable refusal than appends that fail half-written on a full
// disk. Reads and metadata do not check. A file system whose free space
// cannot be read is let through.
func (b *Broker) checkDiskSpace() error {
	min := int64(b.cfg.Storage.MinFreeBytes)
	if min <= 0 {
		return nil
	}
	free, err := b.freeSpace(b.cfg.DataDir)
	if err != nil || free >= min {
		return nil
	}
	return storageFull(free, min)
}

// storageFull is the refusal of a write for want of space: free bytes are
// left on the data dir's file system, min are required.
func storageFull(free, min int64) *Error {
	e := refuse(ReasonStorageFull, nil, "the data dir's file system has %d bytes (%s) free, below storage.min_free_bytes (%s); writes resume once space is freed there",
		free, config.FormatBytes(free), config.FormatBytes(min)).
		with("free_bytes", itoa(free)).with("min_free_bytes", itoa(min))
	e.RetryAfter = time.Second
	return e
}
