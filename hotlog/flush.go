package hotlog

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// flusher fsyncs the active segment. Appenders that need durability
// (FlushAlways) kick it and wait for the end of a round that began after
// their write; every appender whose bytes were written before a round began
// shares that round's fsync. With FlushInterval a write arms a timer that
// kicks it one interval later.
//
// Its goroutine runs only while there is work: a kick starts one if none
// runs, and it ends once a round finds no kick pending. A broker holds
// thousands of idle logs, and an idle one costs no goroutine (a stack of
// several KiB) and no timer.
type flusher struct {
	run    func()        // one round: Log.flushRound
	exited chan struct{} // closed once the log is closed and no round runs

	mu      sync.Mutex
	round   chan struct{} // closed when the round under way ends
	pending bool          // a kick came since the last round began
	running bool          // a goroutine runs rounds
	timer   *time.Timer   // FlushInterval: armed by a write, kicks when it fires
	armed   bool          // the timer is set and has not fired
	stopped bool          // the log is closing: no more rounds
	wg      sync.WaitGroup
}

func (f *flusher) init(run func()) {
	f.run = run
	f.exited = make(chan struct{})
	f.round = make(chan struct{})
}

// poke asks for a round, starting the goroutine when none runs.
func (f *flusher) poke() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	f.pending = true
	if !f.running {
		f.running = true
		f.wg.Add(1)
		go f.loop()
	}
}

// loop runs rounds while kicks are pending, then ends.
func (f *flusher) loop() {
	defer f.wg.Done()
	for {
		f.mu.Lock()
		if !f.pending || f.stopped {
			f.running = false
			f.mu.Unlock()
			return
		}
		f.pending = false
		f.mu.Unlock()
		f.run()
	}
}

// wroteUnder arms the interval timer after a write under FlushInterval,
// unless it is armed: the write is fsynced at most interval later.
func (f *flusher) wroteUnder(interval time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.armed || f.stopped {
		return
	}
	f.armed = true
	if f.timer == nil {
		f.timer = time.AfterFunc(interval, f.fire)
	} else {
		f.timer.Reset(interval)
	}
}

func (f *flusher) fire() {
	f.mu.Lock()
	f.armed = false
	f.mu.Unlock()
	f.poke()
}

// stop ends the rounds: it waits for the one under way, and waiters see
// exited closed.
func (f *flusher) stop() {
	f.mu.Lock()
	f.stopped = true
	if f.timer != nil {
		f.timer.Stop()
	}
	f.mu.Unlock()
	f.wg.Wait()
	close(f.exited)
}

func (f *flusher) currentRound() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.round
}

func (f *flusher) endRound() {
	f.mu.Lock()
	close(f.round)
	f.round = make(chan struct{})
	f.mu.Unlock()
}

// flushRound fsyncs everything written before it began: the segments
// sealed since the last round, the directory that now lists their
// successors, then (unless the policy is FlushNever, whose rounds come only
// from rolls) the active segment. It reads the log end, then the active
// segment, then the sealed list: a roll lists the segment it seals before
// it switches the active one, so whatever segment held offsets below the
// target is either the active one read here or on the list.
func (l *Log) flushRound() {
	defer l.flush.endRound()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.writableLocked() != nil { // Close syncs under syncMu, then closes the files
		return
	}
	target := l.leo.Load()
	seg := l.active.Load()
	if err := l.syncSealedLocked(); err != nil {
		l.fail(err)
		return
	}
	if l.cfg.Load().FlushPolicy == FlushNever || target <= l.flushed.Load() {
		return
	}
	if err := seg.file.sync(false); err != nil {
		l.fail(err)
		return
	}
	l.advanceFlushed(target)
	// Indexes are hints checked on open: recovery keeps the entries that
	// agree with the log and scans on from the last one. So the active
	// segment's entries are written once indexLag of them wait, not on
	// every round: a round per small batch opened and closed both index
	// files each time, which with many partitions written at once cost the
	// broker more CPU than the appends. What they leave unwritten costs a
	// recovery at most indexLag * IndexIntervalBytes more of scan. A failed
	// write is logged, not fatal. Sealed segments' indexes are written
	// whole and fsynced with them (segment.sync).
	if seg.index.unwritten() < indexLag {
		return
	}
	if err := seg.index.persist(false); err != nil {
		l.opts.Logger.Warn("hotlog: write offset index", "dir", l.dir, "err", err)
	}
	if err := seg.times.persist(false); err != nil {
		l.opts.Logger.Warn("hotlog: write time index", "dir", l.dir, "err", err)
	}
}

// indexLag is how many index entries of the active segment a flush round
// leaves unwritten before it writes them.
const indexLag = 32

// syncSealedLocked fsyncs the segments sealed since the last round (log and
// indexes) and the directory listing their successors, marks them synced
// and moves the durable offset past them. Caller holds syncMu.
func (l *Log) syncSealedLocked() error {
	segs := l.unsynced.take()
	if len(segs) == 0 {
		return nil
	}
	for _, s := range segs {
		if err := s.sync(); err != nil {
			return fmt.Errorf("seal %s: %w", s.path, err)
		}
	}
	if err := l.opts.FS.SyncDir(l.dir); err != nil {
		return fmt.Errorf("seal: sync directory: %w", err)
	}
	for _, s := range segs {
		s.synced.Store(true)
	}
	l.advanceFlushed(segs[len(segs)-1].next.Load())
	l.changed.broadcast()
	return nil
}

// waitSynced blocks until seg, sealed by a roll, is fsynced.
func (l *Log) waitSynced(seg *segment) error {
	for !seg.synced.Load() {
		if err := l.failure(); err != nil {
			return err
		}
		round := l.flush.currentRound()
		if seg.synced.Load() {
			return nil
		}
		l.flush.poke()
		select {
		case <-round:
		case <-l.flush.exited:
			if seg.synced.Load() {
				return nil
			}
			return ErrClosed
		}
	}
	return nil
}

// unsyncedSegments lists the segments sealed by rolls and not yet fsynced,
// oldest first.
type unsyncedSegments struct {
	mu   sync.Mutex
	segs []*segment
}

func (u *unsyncedSegments) add(s *segment) {
	u.mu.Lock()
	u.segs = append(u.segs, s)
	u.mu.Unlock()
}

func (u *unsyncedSegments) take() []*segment {
	u.mu.Lock()
	defer u.mu.Unlock()
	segs := u.segs
	u.segs = nil
	return segs
}

// retain drops the listed segments that are no longer sealed segments of
// the log (truncation, retention and reset remove or reopen them). Caller
// holds syncMu, so no round is syncing them meanwhile.
func (u *unsyncedSegments) retain(segments []*segment) {
	u.mu.Lock()
	defer u.mu.Unlock()
	kept := u.segs[:0]
	for _, s := range u.segs {
		if s.sealed.Load() && slices.Contains(segments, s) {
			kept = append(kept, s)
		}
	}
	u.segs = kept
}

// advanceFlushed raises the durable offset to at least off and tells
// Options.OnDurable.
func (l *Log) advanceFlushed(off int64) {
	for {
		cur := l.flushed.Load()
		if off <= cur {
			return
		}
		if l.flushed.CompareAndSwap(cur, off) {
			break
		}
	}
	if l.opts.OnDurable != nil {
		l.opts.OnDurable(off)
	}
}

// Flush fsyncs, now and on the caller's goroutine, everything written
// before it began, as a round of the interval timer does (under FlushNever,
// only the segments sealed since the last round). It returns the log's
// failure, if it has one.
func (l *Log) Flush() error {
	l.flushRound()
	return l.writableLocked()
}

// waitFlushed blocks until every offset below off is fsynced.
func (l *Log) waitFlushed(off int64) error {
	if l.opts.FlushInline {
		if l.flushed.Load() < off {
			l.flushRound()
		}
		if l.flushed.Load() >= off {
			return nil
		}
		if err := l.failure(); err != nil {
			return err
		}
		return ErrClosed
	}
	for {
		if l.flushed.Load() >= off {
			return nil
		}
		if err := l.failure(); err != nil {
			return err
		}
		round := l.flush.currentRound()
		if l.flushed.Load() >= off {
			return nil
		}
		l.flush.poke()
		select {
		case <-round:
		case <-l.flush.exited:
			if l.flushed.Load() >= off {
				return nil
			}
			return ErrClosed
		}
	}
}
