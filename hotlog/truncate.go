package hotlog

import (
	"fmt"
	"sort"
)

// TruncateTo removes every record at or after offset, for a follower whose
// suffix diverged from its new leader. When offset falls inside a batch, that
// whole batch goes too, so the new log end may be below offset; it is
// returned. Segments past the cut are deleted newest first, so a crash midway
// leaves a valid prefix. An offset past the log end changes nothing; one at
// the log end removes only leader epochs begun there with no records yet
// (BeginEpoch), which the new leader's history does not have.
func (l *Log) TruncateTo(offset int64) (int64, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	// Held until the high watermark and recovery point have come down, so
	// a concurrent Checkpoint cannot write them back up.
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return 0, err
	}
	leo := l.leo.Load()
	if offset > leo {
		return leo, nil
	}
	if offset == leo {
		if l.epochs.truncateFrom(leo) {
			if err := l.writeEpochsLocked(); err != nil {
				l.fail(err)
				return 0, l.failure()
			}
		}
		return leo, nil
	}
	if start := l.logStart.Load(); offset < start {
		return 0, &RangeError{Offset: offset, LogStart: start, LogEnd: leo}
	}
	// The checkpoint goes first, with the high watermark and recovery point
	// no higher than the cut: a checkpoint left above it would, after a
	// restart, count whatever is appended at those offsets later (a new
	// leader's records) as committed or fsynced before it is. A crash after
	// this write and before the cut leaves a suffix the follower protocol
	// cuts again.
	st := l.currentState()
	st.highWatermark = min(st.highWatermark, offset)
	st.recoveryPoint = min(st.recoveryPoint, offset)
	if err := l.writeState(st); err != nil {
		l.fail(fmt.Errorf("truncate: %w", err))
		return 0, l.failure()
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()

	segs := l.mu.segments
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset }) - 1
	for j := len(segs) - 1; j > i; j-- {
		if err := segs[j].remove(l.opts.FS); err != nil {
			l.fail(fmt.Errorf("truncate: %w", err))
			return 0, l.failure()
		}
		l.mu.segments = segs[:j]
	}
	if err := l.opts.FS.SyncDir(l.dir); err != nil {
		l.fail(fmt.Errorf("truncate: %w", err))
		return 0, l.failure()
	}
	seg := segs[i]
	if err := l.cutSegmentLocked(seg, offset); err != nil {
		l.fail(fmt.Errorf("truncate %s: %w", seg.path, err))
		return 0, l.failure()
	}
	l.active.Store(seg)
	newEnd := seg.next.Load()
	if l.epochs.truncateFrom(newEnd) {
		if err := l.writeEpochsLocked(); err != nil {
			l.fail(err)
			return 0, l.failure()
		}
	}
	l.unsynced.retain(l.mu.segments)
	l.leo.Store(newEnd)
	l.hw.Store(min(l.hw.Load(), newEnd))
	l.flushed.Store(min(l.flushed.Load(), newEnd))
	l.changed.broadcast()
	return newEnd, nil
}

// cutSegmentLocked truncates seg before the batch holding offset and makes it
// the active segment again.
func (l *Log) cutSegmentLocked(seg *segment, offset int64) error {
	size := seg.size.Load()
	f, err := seg.open()
	if err != nil {
		return err
	}
	cut, err := seg.position(f, offset, size)
	seg.done()
	if err != nil {
		return err
	}
	if err := seg.truncate(cut); err != nil {
		return err
	}
	if err := seg.file.sync(false); err != nil {
		return err
	}
	// Keep the index entries of the batches that remain, then rebuild the
	// segment's state from the last of them.
	k := 0
	for k < seg.index.len() && int64(seg.index.at(k).pos) < cut {
		k++
	}
	end, damage, err := seg.rescanFrom(k, cut, l.opts.IndexIntervalBytes)
	if err != nil {
		return err
	}
	if damage != nil || end != cut {
		return fmt.Errorf("%w: rescan stopped at %d before the cut at %d: %v", ErrCorrupt, end, cut, damage)
	}
	if err := seg.index.persist(true); err != nil {
		return err
	}
	if err := seg.times.persist(true); err != nil {
		return err
	}
	seg.sealed.Store(false)
	seg.created = l.opts.Now()
	return nil
}

// DeleteSegmentsBefore is the retention hook: it deletes the sealed segments
// whose records are all below offset (the caller decides what may go, for
// example only what the cold tier has) and moves the log start to the first
// remaining segment. The active segment is never deleted. The new log start
// is checkpointed before any file is removed, so after a crash the open
// finishes the job; if that checkpoint fails, nothing changes. It returns the
// segments it deleted.
//
// Only committed records may go: a cut above the high watermark is refused
// with ErrAboveHighWatermark, and the high watermark never moves here.
// Raising it to the new start would count records as committed that no
// follower acknowledged.
func (l *Log) DeleteSegmentsBefore(offset int64) ([]SegmentInfo, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return nil, err
	}
	if hw := l.hw.Load(); offset > hw {
		return nil, fmt.Errorf("%w: cut at %d, high watermark %d", ErrAboveHighWatermark, offset, hw)
	}
	l.mu.RLock()
	segs := l.mu.segments
	n := 0
	for n < len(segs)-1 && segs[n].durable() && segs[n].lastOffset() < offset {
		n++
	}
	l.mu.RUnlock()
	if n == 0 {
		return nil, nil
	}
	victims := segs[:n]
	newStart := segs[n].base
	if newStart > l.logStart.Load() {
		l.stateMu.Lock()
		st := l.currentState()
		st.logStart = newStart
		if err := l.writeState(st); err != nil {
			l.stateMu.Unlock()
			return nil, err
		}
		l.logStart.Store(newStart)
		l.stateMu.Unlock()
	}

	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	l.mu.segments = segs[n:]
	l.unsynced.retain(l.mu.segments)
	l.mu.Unlock()
	deleted := make([]SegmentInfo, 0, n)
	for _, s := range victims {
		deleted = append(deleted, s.info())
		if err := s.remove(l.opts.FS); err != nil {
			return deleted, fmt.Errorf("hotlog: delete segment %s: %w", s.path, err)
		}
	}
	if err := l.opts.FS.SyncDir(l.dir); err != nil {
		return deleted, fmt.Errorf("hotlog: delete segments: %w", err)
	}
	l.changed.broadcast()
	return deleted, nil
}

// ResetTo empties the log and starts it again at offset: every segment is
// deleted and one empty segment begins at offset, which becomes the log
// start and the log end. A leader uses it when its local log lies wholly
// below what the cold tier already holds (a topic restored from the bucket,
// or a replica far behind), so new appends continue the partition's offsets
// rather than reuse them.
func (l *Log) ResetTo(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("hotlog: reset to negative offset %d", offset)
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	// The new start is checkpointed first: after a crash the next open drops
	// the old segments, all below it, whether or not the new one exists.
	l.logStart.Store(offset)
	l.hw.Store(offset)
	l.epochs.replace(nil)
	if err := l.writeStateLocked(); err != nil {
		l.fail(fmt.Errorf("reset: %w", err))
		return l.failure()
	}
	if err := l.writeEpochsLocked(); err != nil {
		l.fail(fmt.Errorf("reset: %w", err))
		return l.failure()
	}
	old := l.mu.segments
	if n := len(old); n > 0 && old[n-1].base == offset {
		old[n-1].close() // createSegment replaces its files
		old = old[:n-1]
	}
	seg, err := createSegment(l.opts.FS, l.opts.Files, l.dir, offset)
	if err == nil {
		err = l.opts.FS.SyncDir(l.dir)
	}
	if err != nil {
		l.fail(fmt.Errorf("reset: %w", err))
		return l.failure()
	}
	seg.created = l.opts.Now()
	l.mu.segments = []*segment{seg}
	l.unsynced.retain(nil)
	l.active.Store(seg)
	l.leo.Store(offset)
	l.flushed.Store(offset)
	for _, s := range old {
		if err := s.remove(l.opts.FS); err != nil {
			l.opts.Logger.Warn("hotlog: remove segment after reset", "path", s.path, "err", err)
		}
	}
	if err := l.opts.FS.SyncDir(l.dir); err != nil {
		l.fail(fmt.Errorf("reset: %w", err))
		return l.failure()
	}
	l.changed.broadcast()
	return nil
}
