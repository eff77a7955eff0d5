package hotlog

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"sort"
	"sync"
)

// offsetEntry maps a batch's offset relative to the segment base to its file
// position.
type offsetEntry struct {
	rel uint32
	pos uint32
}

// timeEntry records the largest timestamp of all batches up to and including
// the batch at rel.
type timeEntry struct {
	maxTs int64
	rel   uint32
}

const (
	offsetEntryWidth = 8
	timeEntryWidth   = 12
)

func putOffsetEntry(b []byte, e offsetEntry) {
	binary.BigEndian.PutUint32(b, e.rel)
	binary.BigEndian.PutUint32(b[4:], e.pos)
}

func getOffsetEntry(b []byte) offsetEntry {
	return offsetEntry{rel: binary.BigEndian.Uint32(b), pos: binary.BigEndian.Uint32(b[4:])}
}

func putTimeEntry(b []byte, e timeEntry) {
	binary.BigEndian.PutUint64(b, uint64(e.maxTs))
	binary.BigEndian.PutUint32(b[8:], e.rel)
}

func getTimeEntry(b []byte) timeEntry {
	return timeEntry{maxTs: int64(binary.BigEndian.Uint64(b)), rel: binary.BigEndian.Uint32(b[8:])}
}

// sparseIndex is an index file of fixed-width entries, kept whole in memory
// and written to disk incrementally. The file is only a hint for recovery, so
// it is persisted lazily (on flush rounds, roll and close) and checked on open.
// The file is open only while it is written: an idle partition holds no
// descriptor for it, and a write every IndexIntervalBytes of log (at most
// once per flush round) costs an open and a close beside the log's fsync.
type sparseIndex[E any] struct {
	fs    FS
	path  string
	width int
	put   func([]byte, E)
	get   func([]byte) E

	mu      sync.RWMutex // guards entries
	entries []E

	// persistMu serialises writes of the file; persisted counts the entries
	// known to be in it.
	persistMu sync.Mutex
	persisted int
}

// withFile opens the index file for a write, creating it if needed, and
// closes it after fn. Caller holds persistMu.
func (x *sparseIndex[E]) withFile(fn func(File) error) error {
	f, err := x.fs.OpenFile(x.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	err = fn(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func newOffsetIndex(fsys FS, path string) *sparseIndex[offsetEntry] {
	return &sparseIndex[offsetEntry]{fs: fsys, path: path, width: offsetEntryWidth, put: putOffsetEntry, get: getOffsetEntry}
}

func newTimeIndex(fsys FS, path string) *sparseIndex[timeEntry] {
	return &sparseIndex[timeEntry]{fs: fsys, path: path, width: timeEntryWidth, put: putTimeEntry, get: getTimeEntry}
}

// load reads the file's whole entries; a missing file is an empty index. A
// trailing partial entry (a torn write) is ignored.
func (x *sparseIndex[E]) load() error {
	f, err := x.fs.OpenFile(x.path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return err
	}
	n := int(size) / x.width
	buf := make([]byte, n*x.width)
	if n > 0 {
		if _, err := f.ReadAt(buf, 0); err != nil {
			return err
		}
	}
	entries := make([]E, n)
	for i := range entries {
		entries[i] = x.get(buf[i*x.width:])
	}
	x.mu.Lock()
	x.entries = entries
	x.mu.Unlock()
	x.persistMu.Lock()
	x.persisted = n
	x.persistMu.Unlock()
	return nil
}

func (x *sparseIndex[E]) add(e E) {
	x.mu.Lock()
	x.entries = append(x.entries, e)
	x.mu.Unlock()
}

func (x *sparseIndex[E]) len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.entries)
}

func (x *sparseIndex[E]) at(i int) E {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.entries[i]
}

// search returns the last entry for which before reports true, given that
// before is true for a prefix of the entries and false after it.
func (x *sparseIndex[E]) search(before func(E) bool) (E, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	i := sort.Search(len(x.entries), func(i int) bool { return !before(x.entries[i]) })
	if i == 0 {
		var zero E
		return zero, false
	}
	return x.entries[i-1], true
}

// truncate keeps the first n entries, in memory and in the file.
func (x *sparseIndex[E]) truncate(n int) error {
	x.persistMu.Lock()
	defer x.persistMu.Unlock()
	x.mu.Lock()
	if n < len(x.entries) {
		x.entries = x.entries[:n]
	}
	x.mu.Unlock()
	if x.persisted <= n {
		return nil
	}
	x.persisted = n
	return x.withFile(func(f File) error { return f.Truncate(int64(n * x.width)) })
}

// reset replaces every entry, in memory and in the file (after a rebuild).
func (x *sparseIndex[E]) reset(entries []E) error {
	if err := x.truncate(0); err != nil {
		return err
	}
	x.mu.Lock()
	x.entries = entries
	x.mu.Unlock()
	return nil
}

// unwritten is how many entries are not yet in the file.
func (x *sparseIndex[E]) unwritten() int {
	x.persistMu.Lock()
	defer x.persistMu.Unlock()
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.entries) - x.persisted
}

// persist writes entries not yet in the file, and fsyncs it when sync is set.
func (x *sparseIndex[E]) persist(sync bool) error {
	x.persistMu.Lock()
	defer x.persistMu.Unlock()
	x.mu.RLock()
	pending := x.entries[x.persisted:len(x.entries):len(x.entries)]
	x.mu.RUnlock()
	if len(pending) == 0 && !sync {
		return nil
	}
	return x.withFile(func(f File) error {
		if len(pending) > 0 {
			buf := make([]byte, len(pending)*x.width)
			for i, e := range pending {
				x.put(buf[i*x.width:], e)
			}
			if _, err := f.WriteAt(buf, int64(x.persisted*x.width)); err != nil {
				return err
			}
			x.persisted += len(pending)
		}
		if sync {
			return f.Sync()
		}
		return nil
	})
}
