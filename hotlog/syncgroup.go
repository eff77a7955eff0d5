package hotlog

import (
	"errors"
	"sync"
	"sync/atomic"
)

// SyncGroup lets the fsyncs of many logs share one sync of the file system
// that holds them.
//
// An fsync costs about the same for 2 KiB as for 2 MiB: most of it is the
// journal commit and the device's cache flush, and the file system runs
// those one file at a time. Measured on the ext4 disk of the benchmark
// machine (docs/BENCHMARKS.md), 1,000 files with 2 KiB each take 117 ms to
// fsync in parallel, one file with the same 2 MiB 2.7 ms, and one syncfs(2)
// of all 1,000 files 19 ms. A broker whose producers write to a thousand
// partitions at once under flush.policy always pays the first figure on
// every round of requests.
//
// So a log's fsync (through its FileCache) is its own while fewer than
// after of them run at once: one partition, or a few, waits only for its
// own file and never for the rest of the file system. Past that, a caller
// joins the next file-system sync, which starts once the one under way (if
// any) ends, so it covers every write completed before the caller joined.
// Callers that join while one runs share the next.
//
// Errors. A file-system sync reports a writeback error of any file on it
// once per open descriptor (Linux 5.8 and later), and Linux marks a page
// whose writeback failed clean, so a later sync does not see it again.
// Hence a group that sees one failure stops sharing for good: the callers
// of that round, and every fsync after it, sync their own files, whose
// descriptors report their own errors. A successful file-system sync is
// trusted only while none has failed since the group opened.
type SyncGroup struct {
	syncAll func() error
	covers  func(path string) bool
	close   func() error // DiskSyncGroup's directory; nil for none
	after   int

	mu      sync.Mutex
	own     int        // per-file fsyncs under way
	next    *syncRound // the round new callers join; nil until one does
	running bool       // a goroutine runs rounds
	off     bool       // a file-system sync failed: every fsync is per file from now on

	rounds atomic.Int64 // file-system syncs that succeeded
	shared atomic.Int64 // fsyncs answered by one of them
}

type syncRound struct {
	callers int // joined so far
	done    chan struct{}
	err     error
}

// errGroupOff answers the callers of a round that never ran because an
// earlier one failed.
var errGroupOff = errors.New("hotlog: shared sync turned off after a failure")

// NewSyncGroup returns a group whose file-system sync is syncAll. A file
// joins it only if covers says syncAll makes it durable (nil: every file).
// after is how many per-file fsyncs may run at once before callers share a
// file-system sync; below 1 means 1.
func NewSyncGroup(syncAll func() error, covers func(path string) bool, after int) *SyncGroup {
	if covers == nil {
		covers = func(string) bool { return true }
	}
	return &SyncGroup{syncAll: syncAll, covers: covers, after: max(after, 1)}
}

// SyncGroupStats counts what a group did.
type SyncGroupStats struct {
	Rounds int64 // file-system syncs that succeeded
	Shared int64 // fsyncs a file-system sync answered
	Off    bool  // a file-system sync failed; fsyncs are per file
}

// Stats returns the group's counters.
func (g *SyncGroup) Stats() SyncGroupStats {
	g.mu.Lock()
	off := g.off
	g.mu.Unlock()
	return SyncGroupStats{Rounds: g.rounds.Load(), Shared: g.shared.Load(), Off: off}
}

// Close releases what the group holds open. Call it after the logs that
// use it are closed; a nil group is fine.
func (g *SyncGroup) Close() error {
	if g == nil || g.close == nil {
		return nil
	}
	return g.close()
}

// sync makes every write to f completed before the call durable, with f's
// own fsync or a file-system sync shared with other callers. A nil group
// is f's own fsync.
func (g *SyncGroup) sync(f File) error {
	if g == nil {
		return f.Sync()
	}
	g.mu.Lock()
	if g.off || g.own < g.after {
		g.own++
		g.mu.Unlock()
		err := f.Sync()
		g.mu.Lock()
		g.own--
		g.mu.Unlock()
		return err
	}
	r := g.next
	if r == nil {
		r = &syncRound{done: make(chan struct{})}
		g.next = r
	}
	r.callers++
	if !g.running {
		g.running = true
		go g.run()
	}
	g.mu.Unlock()
	<-r.done
	if r.err != nil {
		return f.Sync() // the group is off: this file's descriptor reports its own error
	}
	g.shared.Add(1)
	return nil
}

// run runs rounds while callers wait for one, then ends.
func (g *SyncGroup) run() {
	for {
		g.mu.Lock()
		r := g.next
		g.next = nil
		if r == nil {
			g.running = false
			g.mu.Unlock()
			return
		}
		off := g.off
		g.mu.Unlock()
		// The round starts after each of its callers joined: their writes are
		// in the page cache this sync writes out.
		err := errGroupOff
		if !off {
			err = g.syncAll()
		}
		g.mu.Lock()
		if err != nil {
			g.off = true
		} else {
			g.rounds.Add(1)
		}
		g.mu.Unlock()
		r.err = err
		close(r.done)
	}
}
