package broker

import (
	"log/slog"
	"syscall"
	"time"

	"github.com/strata-log/strata/config"
)

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

// checkStartSpace warns when the broker starts on a data dir with less
// free space than storage.min_free_bytes (0 disables the check). It starts
// all the same: it serves reads and metadata, and refuses produce with
// STORAGE_FULL until space is freed (checkDiskSpace). Raft can commit on
// the full disk in the room raft.db keeps (cluster/room.go), and what else
// start-up writes (checkpoints, indexes) either fits in what is left or is
// let fail and written later. free is freeBytes, or a fake in tests.
func checkStartSpace(dir string, min config.ByteSize, free func(string) (int64, error), logger *slog.Logger) (full bool) {
	if min <= 0 {
		return false
	}
	n, err := free(dir)
	if err != nil {
		logger.Warn("cannot read the data dir's free space; produce goes on without the storage.min_free_bytes check", "dir", dir, "err", err)
		return false
	}
	if n >= int64(min) {
		return false
	}
	logger.Warn("the data dir's file system is short of space: serving reads and metadata, refusing produce with STORAGE_FULL until space is freed there",
		"dir", dir, "free_bytes", n, "free", config.FormatBytes(n), "storage.min_free_bytes", min.String())
	return true
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
