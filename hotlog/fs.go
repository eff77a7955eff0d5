package hotlog

import (
	"io"
	"os"
)

// File is what the log needs of an open file. It is an alias of an unnamed
// interface so that another package can name the identical type without
// importing hotlog: memfs.FS, which hotlog's own tests use, is an FS as it is.
type File = interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Sync() error
	Truncate(size int64) error
	Size() (int64, error)
}

// FS is the file system seam: the log reaches the disk only through it, so a
// test can substitute one that fails a chosen fsync or simulates a crash.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	Rename(oldpath, newpath string) error
	// ReadDir returns the names of the entries of dir.
	ReadDir(dir string) ([]string, error)
	MkdirAll(dir string, perm os.FileMode) error
	// SyncDir fsyncs a directory so that creates, renames and removes in it
	// survive a crash.
	SyncDir(dir string) error
}

// DiskFS is the operating system's file system.
type DiskFS struct{}

type diskFile struct{ *os.File }

func (f diskFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// OpenFile opens a file with os.OpenFile.
func (DiskFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return diskFile{f}, nil
}

// Remove removes a file.
func (DiskFS) Remove(name string) error { return os.Remove(name) }

// Rename renames a file.
func (DiskFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// ReadDir lists the names in dir.
func (DiskFS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

// MkdirAll creates dir and its parents.
func (DiskFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

// SyncDir fsyncs dir.
func (DiskFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
