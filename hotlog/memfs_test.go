package hotlog

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// memFS is an in-memory file system that can crash: it remembers what was
// fsynced (file contents on File.Sync, directory entries on SyncDir), and
// Crash throws away everything else, as a power cut would. Hooks inject
// failures into chosen calls.
type memFS struct {
	mu sync.Mutex
	// live is the namespace the process sees; durable is what a crash keeps,
	// per directory, as of its last SyncDir.
	live    map[string]*inode
	durable map[string]map[string]*inode
	syncs   int

	// failSync, when set, is asked before each File.Sync; a non-nil error
	// fails it. failWrite, failRemove and failSyncDir do the same for WriteAt,
	// Remove and SyncDir.
	failSync    func(path string) error
	failWrite   func(path string) error
	failRemove  func(path string) error
	failSyncDir func(dir string) error
}

type inode struct {
	data   []byte
	synced []byte
}

func newMemFS() *memFS {
	return &memFS{live: map[string]*inode{}, durable: map[string]map[string]*inode{}}
}

type memFile struct {
	fs   *memFS
	path string
	ino  *inode
	ro   bool
	shut bool
}

func (m *memFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
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
	return &memFile{fs: m, path: name, ino: ino, ro: flag&(os.O_WRONLY|os.O_RDWR) == 0}, nil
}

func (m *memFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	if m.failRemove != nil {
		if err := m.failRemove(name); err != nil {
			return err
		}
	}
	if _, ok := m.live[name]; !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(m.live, name)
	return nil
}

func (m *memFS) Rename(oldpath, newpath string) error {
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

func (m *memFS) ReadDir(dir string) ([]string, error) {
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

func (m *memFS) MkdirAll(dir string, perm os.FileMode) error { return nil }

func (m *memFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = filepath.Clean(dir)
	if m.failSyncDir != nil {
		if err := m.failSyncDir(dir); err != nil {
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
// returns what survives.
func (m *memFS) Crash(torn func(path string, synced, current []byte) []byte) {
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

func (m *memFS) syncCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.syncs
}

// read returns a live file's contents.
func (m *memFS) read(path string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ino, ok := m.live[filepath.Clean(path)]; ok {
		return slices.Clone(ino.data)
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
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

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.shut {
		return 0, os.ErrClosed
	}
	if f.ro {
		return 0, errors.New("memfs: file opened read-only")
	}
	if f.fs.failWrite != nil {
		if err := f.fs.failWrite(f.path); err != nil {
			return 0, err
		}
	}
	if end := int(off) + len(p); end > len(f.ino.data) {
		f.ino.data = append(f.ino.data, make([]byte, end-len(f.ino.data))...)
	}
	copy(f.ino.data[off:], p)
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.shut {
		return os.ErrClosed
	}
	if f.fs.failSync != nil {
		if err := f.fs.failSync(f.path); err != nil {
			return err
		}
	}
	f.fs.syncs++
	f.ino.synced = slices.Clone(f.ino.data)
	return nil
}

func (f *memFile) Truncate(size int64) error {
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

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return int64(len(f.ino.data)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.shut {
		return os.ErrClosed
	}
	f.shut = true
	return nil
}
