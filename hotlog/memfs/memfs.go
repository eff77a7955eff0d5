// Package memfs is an in-memory file system that can crash, for tests of
// code that must survive one: the hot log's recovery, and whole brokers run
// in one process by a simulation.
//
// It remembers what was made durable (a file's contents on File.Sync, a
// directory's entries on SyncDir). Crash throws away everything else, as a
// power cut would; Fork copies everything written, durable or not, as a
// process that dies (kill -9) leaves its page cache behind. Hooks inject
// failures into chosen calls.
//
// *FS is a hotlog.FS as it is: OpenFile returns Handle, the same type as
// hotlog.File, while this package imports nothing of the project, so
// hotlog's own tests can use it.
package memfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// FS is the file system. Its methods are safe for concurrent use; set the
// hooks before the files are in use.
type FS struct {
	mu sync.Mutex
	// live is the namespace the process sees; durable is what a crash keeps,
	// per directory, as of its last SyncDir.
	live     map[string]*inode
	durable  map[string]map[string]*inode
	syncs    int
	syncAlls int

	// FailSync, when set, is asked before each File.Sync; a non-nil error
	// fails it. FailWrite, FailRemove and FailSyncDir do the same for
	// WriteAt, Remove and SyncDir.
	FailSync    func(path string) error
	FailWrite   func(path string) error
	FailRemove  func(path string) error
	FailSyncDir func(dir string) error
	// FailSyncAll does the same for SyncAll.
	FailSyncAll func() error
}

type inode struct {
	data   []byte
	synced []byte
}

// New returns an empty file system.
func New() *FS {
	return &FS{live: map[string]*inode{}, durable: map[string]map[string]*inode{}}
}

// File is an open file.
type File struct {
	fs   *FS
	path string
	ino  *inode
	ro   bool
	shut bool
}

// Handle is an open *File as the hot log sees it: the unnamed interface
// type that hotlog.File also names, so the two are one type.
type Handle = interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Sync() error
	Truncate(size int64) error
	Size() (int64, error)
}

// OpenFile opens or creates a file; flag is os.OpenFile's.
func (m *FS) OpenFile(name string, flag int, perm os.FileMode) (Handle, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	ino, ok := m.live[name]
	if !ok {
		if flag&os.O_CREATE == 0 {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		ino = &inode{}
		m.live[name] = ino
	}
	if flag&os.O_TRUNC != 0 {
		ino.data = nil
	}
	return &File{fs: m, path: name, ino: ino, ro: flag&(os.O_WRONLY|os.O_RDWR) == 0}, nil
}

// Remove removes a file.
func (m *FS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	if m.FailRemove != nil {
		if err := m.FailRemove(name); err != nil {
			return err
		}
	}
	if _, ok := m.live[name]; !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(m.live, name)
	return nil
}

// Rename renames a file, replacing newpath if it exists.
func (m *FS) Rename(oldpath, newpath string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oldpath, newpath = filepath.Clean(oldpath), filepath.Clean(newpath)
	ino, ok := m.live[oldpath]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldpath, Err: fs.ErrNotExist}
	}
	delete(m.live, oldpath)
	m.live[newpath] = ino
	return nil
}

// ReadDir returns the sorted names of the files directly in dir.
func (m *FS) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = filepath.Clean(dir)
	var names []string
	for p := range m.live {
		if filepath.Dir(p) == dir {
			names = append(names, filepath.Base(p))
		}
	}
	slices.Sort(names)
	return names, nil
}

// MkdirAll does nothing: directories exist implicitly.
func (m *FS) MkdirAll(dir string, perm os.FileMode) error { return nil }

// SyncDir makes dir's current entries durable.
func (m *FS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = filepath.Clean(dir)
	if m.FailSyncDir != nil {
		if err := m.FailSyncDir(dir); err != nil {
			return err
		}
	}
	entries := map[string]*inode{}
	for p, ino := range m.live {
		if filepath.Dir(p) == dir {
			entries[filepath.Base(p)] = ino
		}
	}
	m.durable[dir] = entries
	return nil
}

// Crash keeps only what was made durable. torn, when not nil, may keep part
// of a file's unsynced bytes: it gets the synced and the current contents and
// returns what survives. Files opened before stay usable but see the crashed
// contents.
func (m *FS) Crash(torn func(path string, synced, current []byte) []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	live := map[string]*inode{}
	for dir, entries := range m.durable {
		for name, ino := range entries {
			live[filepath.Join(dir, name)] = ino
		}
	}
	for path, ino := range live {
		keep := slices.Clone(ino.synced)
		if torn != nil {
			keep = torn(path, ino.synced, ino.data)
		}
		ino.data = slices.Clone(keep)
		ino.synced = slices.Clone(keep)
	}
	m.live = live
}

// Fork returns a new file system holding everything written so far, durable
// or not, with what is durable here durable there too: what a process that
// was killed leaves behind. Files open on this one are not open on the fork,
// so a process abandoned with its files open cannot touch what its successor
// sees. Hooks are not copied.
func (m *FS) Fork() *FS {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := New()
	copies := map[*inode]*inode{}
	clone := func(ino *inode) *inode {
		if c, ok := copies[ino]; ok {
			return c
		}
		c := &inode{data: slices.Clone(ino.data), synced: slices.Clone(ino.synced)}
		copies[ino] = c
		return c
	}
	for p, ino := range m.live {
		f.live[p] = clone(ino)
	}
	for dir, entries := range m.durable {
		d := map[string]*inode{}
		for name, ino := range entries {
			d[name] = clone(ino)
		}
		f.durable[dir] = d
	}
	return f
}

// SyncAll makes every file's current contents durable, as syncfs(2) does
// for a file system. Directory entries stay as their last SyncDir left
// them: the model keeps less than a real syncfs, never more.
func (m *FS) SyncAll() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.FailSyncAll != nil {
		if err := m.FailSyncAll(); err != nil {
			return err
		}
	}
	for _, ino := range m.live {
		ino.synced = slices.Clone(ino.data)
	}
	m.syncAlls++
	return nil
}

// SyncAllCount is how many SyncAll calls succeeded.
func (m *FS) SyncAllCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.syncAlls
}

// SyncCount is how many File.Sync calls succeeded.
func (m *FS) SyncCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.syncs
}

// ReadFile returns a live file's contents, or nil.
func (m *FS) ReadFile(path string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ino, ok := m.live[filepath.Clean(path)]; ok {
		return slices.Clone(ino.data)
	}
	return nil
}

// ReadAt implements io.ReaderAt.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.shut {
		return 0, os.ErrClosed
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt implements io.WriterAt, growing the file as needed.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.shut {
		return 0, os.ErrClosed
	}
	if f.ro {
		return 0, errors.New("memfs: file opened read-only")
	}
	if f.fs.FailWrite != nil {
		if err := f.fs.FailWrite(f.path); err != nil {
			return 0, err
		}
	}
	if end := int(off) + len(p); end > len(f.ino.data) {
		f.ino.data = append(f.ino.data, make([]byte, end-len(f.ino.data))...)
	}
	copy(f.ino.data[off:], p)
	return len(p), nil
}

// Sync makes the file's current contents durable.
func (f *File) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.shut {
		return os.ErrClosed
	}
	if f.fs.FailSync != nil {
		if err := f.fs.FailSync(f.path); err != nil {
			return err
		}
	}
	f.fs.syncs++
	f.ino.synced = slices.Clone(f.ino.data)
	return nil
}

// Truncate changes the file's size.
func (f *File) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.shut {
		return os.ErrClosed
	}
	if int(size) <= len(f.ino.data) {
		f.ino.data = f.ino.data[:size]
	} else {
		f.ino.data = append(f.ino.data, make([]byte, int(size)-len(f.ino.data))...)
	}
	return nil
}

// Size is the file's current size.
func (f *File) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return int64(len(f.ino.data)), nil
}

// Close closes the file; closing twice is an error, as with os.File.
func (f *File) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.shut {
		return os.ErrClosed
	}
	f.shut = true
	return nil
}
