package hotlog

import (
	"container/list"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// FileCache bounds how many segment log files are open at once across every
// log that shares it (a broker passes one to all its partitions), so that an
// idle partition holds no file descriptors: a segment's log file is opened
// when something reads or writes it and closed, least recently used first,
// once more than the bound are open.
//
// A file is closed only when it is
//
//   - unreferenced: every read, write, fsync and truncation holds a
//     reference for as long as it uses the file, so nothing is closed under
//     a reader; a read after an eviction opens the file again;
//   - clean: every write to it is covered by a successful fsync. A file with
//     unsynced writes is never evicted, so a close never drops a write the
//     flush policy has yet to fsync, and an fsync error is reported on the
//     descriptor the write went through. Under FlushNever (or a long
//     FlushInterval) the active segment of a partition that is written stays
//     open until its segment is sealed and fsynced: the bound is then
//     exceeded by those files, never by idle ones.
//
// Index files and checkpoints are not cached: they are opened for each write
// and closed after it, and sealed segments' indexes are read once, on open.
type FileCache struct {
	limit int
	mu    struct {
		sync.Mutex
		open int       // files open through the cache, evictable or not
		idle list.List // of *cachedFile: open, unreferenced and clean; least recently used first
	}
	opens     atomic.Int64
	evictions atomic.Int64
	// group, if set, is where the cached files' fsyncs go (SyncGroup).
	group *SyncGroup
}

// DefaultLogFiles bounds the open segment files of a log opened without a
// FileCache of its own.
const DefaultLogFiles = 16

// NewFileCache returns a cache that keeps at most limit segment files open
// (at least 1) when none is in use.
func NewFileCache(limit int) *FileCache {
	return &FileCache{limit: max(limit, 1)}
}

// ShareSyncs sends the fsyncs of the files this cache opens from now on
// through g, where many at once share one sync of their file system
// (SyncGroup). Call it before the cache is in use.
func (c *FileCache) ShareSyncs(g *SyncGroup) {
	c.group = g
}

// FileCacheStats is a snapshot of a cache's counters.
type FileCacheStats struct {
	Limit     int   // the bound
	Open      int   // segment files open now
	Opens     int64 // files opened, including first opens
	Evictions int64 // files closed to stay within the bound
}

// Stats returns the cache's counters.
func (c *FileCache) Stats() FileCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return FileCacheStats{Limit: c.limit, Open: c.mu.open, Opens: c.opens.Load(), Evictions: c.evictions.Load()}
}

// errFileClosed: the segment was closed or removed; its file cannot be
// opened through it again.
var errFileClosed = errors.New("hotlog: segment file closed")

// cachedFile is one segment log file reached through a FileCache. Its fields
// are guarded by the cache's mutex.
type cachedFile struct {
	cache *FileCache
	fs    FS
	path  string

	f    File // nil while closed
	refs int
	// writes counts completed writes and truncations; synced is the count
	// the last successful fsync covered. The file is dirty while they differ.
	writes, synced uint64
	closed         bool          // by close: never opened again
	elem           *list.Element // in cache.mu.idle, or nil
	// group takes the file's fsyncs (SyncGroup), or nil: the file's own.
	group *SyncGroup
}

// adopt puts a file just opened (or created) under the cache.
func (c *FileCache) adopt(fsys FS, path string, f File) *cachedFile {
	cf := &cachedFile{cache: c, fs: fsys, path: path}
	if c.group != nil && c.group.covers(path) {
		cf.group = c.group
	}
	c.opens.Add(1)
	c.mu.Lock()
	cf.f = f
	c.mu.open++
	cf.idleLocked()
	victims := c.evictLocked()
	c.mu.Unlock()
	closeAll(victims)
	return cf
}

func (cf *cachedFile) dirtyLocked() bool { return cf.writes != cf.synced }

// idleLocked puts the file on the idle list if it may be evicted, at the
// most recently used end.
func (cf *cachedFile) idleLocked() {
	if cf.f != nil && cf.refs == 0 && !cf.dirtyLocked() && !cf.closed && cf.elem == nil {
		cf.elem = cf.cache.mu.idle.PushBack(cf)
	}
}

func (cf *cachedFile) busyLocked() {
	if cf.elem != nil {
		cf.cache.mu.idle.Remove(cf.elem)
		cf.elem = nil
	}
}

// evictLocked takes idle files off the cache, least recently used first,
// until it is within its bound, and returns them for the caller to close
// once the lock is released.
func (c *FileCache) evictLocked() []File {
	var victims []File
	for c.mu.open > c.limit && c.mu.idle.Len() > 0 {
		cf := c.mu.idle.Remove(c.mu.idle.Front()).(*cachedFile)
		cf.elem = nil
		victims = append(victims, cf.f)
		cf.f = nil
		c.mu.open--
		c.evictions.Add(1)
	}
	return victims
}

// closeAll closes evicted files. They are clean and unreferenced, so an
// error loses nothing and has no one to report to.
func closeAll(files []File) {
	for _, f := range files {
		f.Close()
	}
}

// acquire returns the open file, opening it if it was evicted, and holds a
// reference until release.
func (cf *cachedFile) acquire() (File, error) {
	c := cf.cache
	c.mu.Lock()
	if cf.closed {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", errFileClosed, cf.path)
	}
	if cf.f != nil {
		cf.refs++
		cf.busyLocked()
		f := cf.f
		c.mu.Unlock()
		return f, nil
	}
	c.mu.Unlock()

	// Opened without the lock, so a slow open does not stall every log.
	f, err := cf.fs.OpenFile(cf.path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("hotlog: reopen %s: %w", cf.path, err)
	}
	c.opens.Add(1)
	c.mu.Lock()
	switch {
	case cf.closed:
		c.mu.Unlock()
		f.Close()
		return nil, fmt.Errorf("%w: %s", errFileClosed, cf.path)
	case cf.f != nil: // another reader reopened it meanwhile: share theirs
		cf.refs++
		cf.busyLocked()
		mine := f
		f = cf.f
		c.mu.Unlock()
		mine.Close()
		return f, nil
	}
	cf.f = f
	cf.refs++
	c.mu.open++
	victims := c.evictLocked()
	c.mu.Unlock()
	closeAll(victims)
	return f, nil
}

// release drops a reference taken by acquire. The last reference to a
// closed file closes it; to a clean one makes it evictable.
func (cf *cachedFile) release() {
	c := cf.cache
	c.mu.Lock()
	cf.refs--
	var victims []File
	if cf.refs == 0 {
		if cf.closed && cf.f != nil {
			victims = append(victims, cf.f)
			cf.f = nil
			c.mu.open--
		} else {
			cf.idleLocked()
			victims = c.evictLocked()
		}
	}
	c.mu.Unlock()
	closeAll(victims)
}

// wrote records a completed write or truncation; the caller holds a
// reference. The file stays open until an fsync covers it.
func (cf *cachedFile) wrote() {
	cf.cache.mu.Lock()
	cf.writes++
	cf.cache.mu.Unlock()
}

// sync fsyncs the file. Unless force is set, a clean file is left alone:
// every write to it is already durable (and it may be closed). force is
// for recovery, whose reads may have come from the page cache of a process
// that died.
func (cf *cachedFile) sync(force bool) error {
	cf.cache.mu.Lock()
	dirty := cf.dirtyLocked()
	cf.cache.mu.Unlock()
	if !dirty && !force {
		return nil
	}
	f, err := cf.acquire()
	if err != nil {
		return err
	}
	defer cf.release()
	// The fsync covers every write completed before it starts.
	cf.cache.mu.Lock()
	covered := cf.writes
	cf.cache.mu.Unlock()
	if err := cf.group.sync(f); err != nil {
		return err
	}
	cf.cache.mu.Lock()
	cf.synced = max(cf.synced, covered)
	cf.cache.mu.Unlock()
	return nil
}

// close closes the file for good, now if unreferenced, else when the last
// reference goes. The log closes a segment only after fsyncing what it
// must (Log.Close) or when removing it, so a dirty file may be closed here.
func (cf *cachedFile) close() error {
	c := cf.cache
	c.mu.Lock()
	if cf.closed {
		c.mu.Unlock()
		return nil
	}
	cf.closed = true
	cf.busyLocked()
	var f File
	if cf.refs == 0 && cf.f != nil {
		f = cf.f
		cf.f = nil
		c.mu.open--
	}
	c.mu.Unlock()
	if f == nil {
		return nil
	}
	return f.Close()
}
