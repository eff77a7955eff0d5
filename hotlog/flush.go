package hotlog

import (
	"sync"
	"time"
)

// flusher is the one goroutine that fsyncs the active segment. Appenders that
// need durability (FlushAlways) kick it and wait for the end of a round that
// began after their write; every appender whose bytes were written before a
// round began shares that round's fsync. With FlushInterval the rounds come
// from a timer instead.
type flusher struct {
	kick   chan struct{} // size 1: a pending kick is enough
	stop   chan struct{}
	exited chan struct{}

	mu    sync.Mutex
	round chan struct{} // closed when the round under way ends
}

func (f *flusher) init() {
	f.kick = make(chan struct{}, 1)
	f.stop = make(chan struct{})
	f.exited = make(chan struct{})
	f.round = make(chan struct{})
}

func (f *flusher) poke() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
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

func (l *Log) runFlusher() {
	defer close(l.flush.exited)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	timerSet := false
	for {
		cfg := l.cfg.Load()
		if cfg.FlushPolicy == FlushInterval && !timerSet {
			timer.Reset(cfg.FlushInterval)
			timerSet = true
		}
		select {
		case <-l.flush.kick:
		case <-timer.C:
			timerSet = false
		case <-l.flush.stop:
			timer.Stop()
			return
		}
		l.flushRound()
	}
}

// flushRound fsyncs everything written before it began. It reads the log end
// before the active segment: a roll in between has already fsynced the older
// segment, so syncing the segment active now covers every byte below target.
func (l *Log) flushRound() {
	defer l.flush.endRound()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.failure() != nil {
		return
	}
	target := l.leo.Load()
	seg := l.active.Load()
	if target <= l.flushed.Load() {
		return
	}
	if err := seg.file.Sync(); err != nil {
		l.fail(err)
		return
	}
	l.advanceFlushed(target)
	// Indexes are hints checked on open, so a failed write of them is logged,
	// not fatal.
	if err := seg.index.persist(false); err != nil {
		l.opts.Logger.Warn("hotlog: write offset index", "dir", l.dir, "err", err)
	}
	if err := seg.times.persist(false); err != nil {
		l.opts.Logger.Warn("hotlog: write time index", "dir", l.dir, "err", err)
	}
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

// waitFlushed blocks until every offset below off is fsynced.
func (l *Log) waitFlushed(off int64) error {
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
