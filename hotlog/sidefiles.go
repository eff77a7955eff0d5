package hotlog

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// Side files. The owner of a log may keep small files of its own in the
// log's directory (the broker keeps its producer snapshots there), written
// through the log's file system so that they share the log's fate: the
// same disk in production, the same in-memory file system in a
// simulation. Their names must not be the log's own: nothing ending in
// .log, .index, .timeindex, .checkpoint or .cleaned, and not cleaner.swap. Recovery leaves them alone,
// except for leftover temporary files (.tmp), which it removes.

// SideFiles returns the names of the side files whose names end in suffix,
// sorted.
func (l *Log) SideFiles(suffix string) ([]string, error) {
	names, err := l.opts.FS.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("hotlog: list %s: %w", l.dir, err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, suffix) && !strings.HasSuffix(n, tmpSuffix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// ReadSideFile reads a side file whole; ok is false when it does not exist.
func (l *Log) ReadSideFile(name string) (data []byte, ok bool, err error) {
	data, ok, err = readFile(l.opts.FS, filepath.Join(l.dir, name))
	if err != nil {
		return nil, false, fmt.Errorf("hotlog: read %s: %w", name, err)
	}
	return data, ok, nil
}

// WriteSideFile replaces a side file durably: written to a temporary file,
// fsynced, renamed over the old one and the directory fsynced, so a crash
// leaves the old contents or the new, never a mix.
func (l *Log) WriteSideFile(name string, data []byte) error {
	return WriteFileAtomic(l.opts.FS, l.dir, name, data)
}

// RemoveSideFiles removes side files (those already gone are no error),
// then fsyncs the directory once, so they do not come back after a crash.
func (l *Log) RemoveSideFiles(names ...string) error {
	var errs []error
	for _, n := range names {
		if err := l.opts.FS.Remove(filepath.Join(l.dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(names) > 0 {
		errs = append(errs, l.opts.FS.SyncDir(l.dir))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("hotlog: remove side files: %w", err)
	}
	return nil
}
