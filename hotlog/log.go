package hotlog

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/record"
)

// Log is one partition's local log. It is safe for concurrent use: appends
// are serialised, reads run beside them.
type Log struct {
	dir  string
	opts Options
	cfg  atomic.Pointer[Config]

	// appendMu serialises everything that writes: appends, rolls, truncation,
	// retention and close.
	appendMu sync.Mutex
	// stateMu serialises writes of the state checkpoint with the changes
	// that lower what it records (truncation, retention, reset, close), so
	// Checkpoint needs neither appendMu nor stops appends.
	stateMu sync.Mutex
	// syncMu is held by the flusher during an fsync round and by anything
	// that closes a segment file, so the flusher never syncs a closed file.
	syncMu sync.Mutex
	mu     struct {
		sync.RWMutex
		segments []*segment // by base offset; the last is active
		closed   bool
	}

	active   atomic.Pointer[segment]
	leo      atomic.Int64
	logStart atomic.Int64
	hw       atomic.Int64
	flushed  atomic.Int64
	failed   atomic.Pointer[error]

	// epochsSaved is the leader-epoch file's content as last read or
	// written, nil when unknown; epochsUnsaved says the history in memory
	// dropped entries the file still has (open). Both under appendMu.
	epochsSaved   []byte
	epochsUnsaved bool
	// saved is the state checkpoint as last written, or nil when unknown
	// (none written yet, or the last write failed): Checkpoint skips a
	// write that would change nothing, which a broker of thousands of idle
	// logs would otherwise pay in fsyncs every few seconds.
	saved atomic.Pointer[logState]

	epochs   epochCache
	changed  notifier
	flush    flusher
	unsynced unsyncedSegments
	recovery RecoveryReport
}

// AppendResult says where a batch went.
type AppendResult struct {
	BaseOffset int64
	LastOffset int64
}

// Open opens the log in dir, creating it if needed, and recovers it: the
// active segment is scanned and a torn or corrupt tail truncated. What was
// repaired is in Recovery().
func Open(dir string, opts Options) (*Log, error) {
	opts.fillDefaults()
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	l := &Log{dir: dir, opts: opts}
	cfg := opts.Config
	l.cfg.Store(&cfg)
	if err := l.open(); err != nil {
		l.mu.RLock()
		for _, s := range l.mu.segments {
			s.close()
		}
		l.mu.RUnlock()
		return nil, fmt.Errorf("hotlog: open %s: %w", dir, err)
	}
	l.flush.init(l.flushRound)
	return l, nil
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// Config returns the settings in force.
func (l *Log) Config() Config { return *l.cfg.Load() }

// Reconfigure swaps the settings; they apply from the next append or roll.
func (l *Log) Reconfigure(c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	l.cfg.Store(&c)
	l.flush.poke() // so a new flush policy or interval takes effect now
	return nil
}

// LogStartOffset is the first offset still in the log.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// LogEndOffset is the offset the next appended record gets (LEO).
func (l *Log) LogEndOffset() int64 { return l.leo.Load() }

// HighWatermark is the offset below which records are committed.
func (l *Log) HighWatermark() int64 { return l.hw.Load() }

// DurableOffset is the offset below which every record is fsynced.
func (l *Log) DurableOffset() int64 { return l.flushed.Load() }

// LatestEpoch is the newest leader epoch in the log, or UndefinedEpoch.
func (l *Log) LatestEpoch() int32 { return l.epochs.latest() }

// Epochs returns the leader-epoch history.
func (l *Log) Epochs() []EpochEntry { return l.epochs.snapshot() }

// EndOffsetForEpoch returns the largest epoch <= epoch in the log and the
// offset where it ended, for a follower deciding where to truncate. See
// epochCache.endOffsetFor for the edge cases, which follow Kafka.
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	return l.epochs.endOffsetFor(epoch, l.leo.Load())
}

// BeginEpoch records that leader epoch epoch starts at the log end, before
// anything is appended in it: a replica that takes the lead does this so
// that its history names its own epoch at once, and a follower asking where
// a newer epoch of its own ended gets the start of the leader's epoch as
// the answer. An epoch not newer than the latest changes nothing.
func (l *Log) BeginEpoch(epoch int32) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if epoch <= l.epochs.latest() {
		return nil
	}
	l.epochs.assign(epoch, l.leo.Load())
	if err := l.writeEpochsLocked(); err != nil {
		l.fail(err)
		return l.failure()
	}
	return nil
}

// Recovery reports what opening the log repaired.
func (l *Log) Recovery() RecoveryReport { return l.recovery }

// SetHighWatermark moves the high watermark, clamped to [log start, LEO].
func (l *Log) SetHighWatermark(hw int64) {
	hw = max(min(hw, l.leo.Load()), l.logStart.Load())
	if l.hw.Swap(hw) != hw {
		l.changed.broadcast()
	}
}

// ActiveBaseOffset is the base offset of the active segment: it moves
// only when the log rolls (or is truncated or reset), so a caller can
// tell cheaply whether segments were sealed since it last looked.
func (l *Log) ActiveBaseOffset() int64 { return l.active.Load().base }

// Segments describes every segment, oldest first; the last is active.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	infos := make([]SegmentInfo, len(l.mu.segments))
	for i, s := range l.mu.segments {
		infos[i] = s.info()
	}
	return infos
}

// Sealed reports whether the log has a sealed segment (one before the
// active one). It takes no copy: loops that visit every log on a timer ask
// it before Segments, which most idle logs, one active segment each, then
// never need.
func (l *Log) Sealed() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.mu.segments) > 1
}

// Size is the bytes of all segments.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.mu.segments {
		n += s.size.Load()
	}
	return n
}

func (l *Log) fail(err error) {
	wrapped := fmt.Errorf("%w: %w", ErrLogFailed, err)
	if l.failed.CompareAndSwap(nil, &wrapped) {
		l.opts.Logger.Error("hotlog: log failed; refusing appends until reopened", "dir", l.dir, "err", err)
		l.changed.broadcast()
	}
}

// failure returns the sticky error, or nil.
func (l *Log) failure() error {
	if p := l.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// writableLocked reports why the log cannot take a write, if it cannot.
func (l *Log) writableLocked() error {
	l.mu.RLock()
	closed := l.mu.closed
	l.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	return l.failure()
}

// checkBatch validates a batch from a producer before any lock is taken.
func (l *Log) checkBatch(b record.Batch, crc bool) error {
	if limit := l.cfg.Load().MaxBatchBytes; len(b) > limit {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrBatchTooLarge, len(b), limit)
	}
	check := b.CheckLayout
	if crc {
		check = b.Validate
	}
	if err := check(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidBatch, err)
	}
	return nil
}

// Append is the leader's write: it assigns the batch the next offsets and the
// given leader epoch by rewriting its header in place (the caller's slice is
// modified; the records are not re-encoded), appends it, and returns once the
// flush policy is met.
func (l *Log) Append(b record.Batch, epoch int32) (AppendResult, error) {
	res, err := l.AppendUnflushed(b, epoch)
	if err != nil {
		return res, err
	}
	return res, l.afterAppend(res.LastOffset + 1)
}

// AppendUnflushed is Append without waiting for the flush policy: it returns
// once the batch is written to the file, for producers that asked for no
// acknowledgement of durability. Under FlushAlways the fsync still follows
// at once, in the background.
func (l *Log) AppendUnflushed(b record.Batch, epoch int32) (AppendResult, error) {
	if err := l.checkBatch(b, true); err != nil {
		return AppendResult{}, err
	}
	return l.appendUnflushed(b, epoch)
}

// AppendVerified is AppendUnflushed for a batch whose CRC its caller has
// verified: only the cheap layout checks run. A broker's leader validates a
// produced batch before it takes the replica lock under which it appends,
// and the append should not compute the CRC of a large batch again while
// other producers wait for that lock.
func (l *Log) AppendVerified(b record.Batch, epoch int32) (AppendResult, error) {
	if err := l.checkBatch(b, false); err != nil {
		return AppendResult{}, err
	}
	return l.appendUnflushed(b, epoch)
}

func (l *Log) appendUnflushed(b record.Batch, epoch int32) (AppendResult, error) {
	if epoch < 0 {
		return AppendResult{}, fmt.Errorf("%w: leader epoch %d is negative", ErrStaleEpoch, epoch)
	}
	l.appendMu.Lock()
	if err := l.writableLocked(); err != nil {
		l.appendMu.Unlock()
		return AppendResult{}, err
	}
	b.SetBaseOffset(l.leo.Load())
	b.SetLeaderEpoch(epoch)
	err := l.appendLocked(b)
	res := AppendResult{BaseOffset: b.BaseOffset(), LastOffset: b.LastOffset()}
	l.appendMu.Unlock()
	if err != nil {
		return AppendResult{}, err
	}
	if l.cfg.Load().FlushPolicy == FlushAlways && !l.opts.FlushInline {
		l.flush.poke()
	}
	return res, nil
}

// AppendReplica is the follower's write: data holds one or more batches whose
// offsets the leader assigned. The first must start exactly at the log end
// and each must follow the one before, or nothing is written. It returns the
// first and last offset written, once the flush policy is met.
func (l *Log) AppendReplica(data []byte) (AppendResult, error) {
	return l.appendReplica(data, noGaps)
}

// AppendReplicaFrom is AppendReplica for data the leader read from its log
// at offset from on: every batch it holds at or after from, in order, so
// an offset missing between from and a batch, or between two batches, is
// one the leader's log lacks too (a compacted log's gap), and the batches
// are written where the leader has them. That holds only if from is at or
// below this log's end: a chunk the leader read from further on (sent
// before this follower truncated) is ErrOffsetGap, as is any gap in
// AppendReplica. A batch starting before the log end is ErrOffsetOverlap.
func (l *Log) AppendReplicaFrom(data []byte, from int64) (AppendResult, error) {
	if from < 0 {
		return AppendResult{}, fmt.Errorf("%w: read from offset %d", ErrInvalidBatch, from)
	}
	return l.appendReplica(data, from)
}

// noGaps is appendReplica's from when no gap is allowed.
const noGaps = -1

func (l *Log) appendReplica(data []byte, from int64) (AppendResult, error) {
	l.appendMu.Lock()
	if err := l.writableLocked(); err != nil {
		l.appendMu.Unlock()
		return AppendResult{}, err
	}
	// Check everything before writing anything: bad input changes nothing.
	expect, epoch := l.leo.Load(), l.epochs.latest()
	res := AppendResult{BaseOffset: expect, LastOffset: expect - 1}
	// Gaps are the leader's only when it read from at or below our end.
	gaps := from != noGaps && from <= expect
	for rest := data; len(rest) > 0; {
		b, next, err := record.Next(rest)
		if err != nil {
			l.appendMu.Unlock()
			return AppendResult{}, fmt.Errorf("%w: %w", ErrInvalidBatch, err)
		}
		if len(rest) == len(data) {
			res.BaseOffset = b.BaseOffset() // past the log end after a gap
		}
		switch {
		case b.BaseOffset() > expect && !gaps:
			l.appendMu.Unlock()
			return AppendResult{}, fmt.Errorf("%w: batch starts at %d, log end is %d", ErrOffsetGap, b.BaseOffset(), expect)
		case b.BaseOffset() < expect:
			l.appendMu.Unlock()
			return AppendResult{}, fmt.Errorf("%w: batch starts at %d, log end is %d", ErrOffsetOverlap, b.BaseOffset(), expect)
		case b.LeaderEpoch() < 0:
			l.appendMu.Unlock()
			return AppendResult{}, fmt.Errorf("%w: batch at %d has no leader epoch", ErrInvalidBatch, b.BaseOffset())
		case b.LeaderEpoch() < epoch:
			l.appendMu.Unlock()
			return AppendResult{}, fmt.Errorf("%w: batch at %d has epoch %d, the log has reached %d", ErrStaleEpoch, b.BaseOffset(), b.LeaderEpoch(), epoch)
		}
		expect, epoch, rest = b.NextOffset(), b.LeaderEpoch(), next
	}
	for rest := data; len(rest) > 0; {
		b, next, _ := record.NextVerified(rest) // checked above
		if err := l.appendLocked(b); err != nil {
			l.appendMu.Unlock()
			return AppendResult{}, err
		}
		res.LastOffset, rest = b.LastOffset(), next
	}
	l.appendMu.Unlock()
	if res.LastOffset < res.BaseOffset {
		return res, nil
	}
	return res, l.afterAppend(res.LastOffset + 1)
}

// appendLocked writes one valid batch with assigned offsets at the log end.
func (l *Log) appendLocked(b record.Batch) error {
	cfg := l.cfg.Load()
	seg := l.active.Load()
	if !seg.empty() && (!seg.fits(len(b), b.LastOffset(), cfg.SegmentBytes) || l.agedLocked(seg, cfg)) {
		if err := l.rollLocked(); err != nil {
			return err
		}
		seg = l.active.Load()
	}
	// Opened before anything changes: a segment file the cache closed and
	// that cannot be reopened (out of descriptors) refuses this append but
	// does not fail the log, as nothing was written.
	f, err := seg.open()
	if err != nil {
		return err
	}
	defer seg.done()
	changed, stale := l.epochs.assign(b.LeaderEpoch(), b.BaseOffset())
	if stale {
		return fmt.Errorf("%w: batch epoch %d, latest %d", ErrStaleEpoch, b.LeaderEpoch(), l.epochs.latest())
	}
	if changed || l.epochsUnsaved {
		// The epoch history is written before the data it describes, so a
		// crash never leaves batches of an epoch the checkpoint lacks (nor
		// an entry open dropped that these batches would fall under).
		if err := l.writeEpochsLocked(); err != nil {
			l.fail(err)
			return l.failure()
		}
	}
	pos := seg.size.Load()
	_, err = f.WriteAt(b, pos)
	seg.file.wrote() // a failed write may have written some of it, too
	if err != nil {
		l.fail(fmt.Errorf("write %s at %d: %w", seg.path, pos, err))
		return l.failure()
	}
	if seg.empty() {
		seg.created = l.opts.Now()
	}
	seg.track(b, pos, l.opts.IndexIntervalBytes)
	l.leo.Store(b.NextOffset())
	l.changed.broadcast()
	if cfg.FlushPolicy == FlushInterval && !l.opts.FlushInline {
		l.flush.wroteUnder(cfg.FlushInterval)
	}
	return nil
}

// WaitDurable returns once every offset below end is as durable as the
// flush policy asks: under FlushAlways, once fsynced; under the other
// policies at once. AppendUnflushed followed by WaitDurable is Append, split
// so that a caller can release its own lock before the fsync and let
// concurrent appenders share it.
func (l *Log) WaitDurable(end int64) error { return l.afterAppend(end) }

func (l *Log) afterAppend(next int64) error {
	if l.cfg.Load().FlushPolicy == FlushAlways {
		return l.waitFlushed(next)
	}
	return nil
}

func (l *Log) agedLocked(seg *segment, cfg *Config) bool {
	return cfg.SegmentAge > 0 && l.opts.Now().Sub(seg.created) >= cfg.SegmentAge
}

// RollDue reports when RollIfAged will roll the active segment: when it
// reaches Config.SegmentAge, if it holds records. false says no roll is
// due until an append (an empty segment, or no SegmentAge): a caller that
// keeps a deadline per log asks again after the next append.
func (l *Log) RollDue() (time.Time, bool) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	seg, cfg := l.active.Load(), l.cfg.Load()
	if seg.empty() || cfg.SegmentAge <= 0 {
		return time.Time{}, false
	}
	return seg.created.Add(cfg.SegmentAge), true
}

// Roll seals the active segment and starts a new one, unless it is empty.
func (l *Log) Roll() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if l.active.Load().empty() {
		return nil
	}
	return l.rollAndSyncLocked()
}

// RollIfAged rolls a non-empty active segment older than Config.SegmentAge,
// so an idle partition's tail is sealed (and can be uploaded) without waiting
// for the next append. It reports whether it rolled.
func (l *Log) RollIfAged() (bool, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return false, err
	}
	seg := l.active.Load()
	if seg.empty() || !l.agedLocked(seg, l.cfg.Load()) {
		return false, nil
	}
	return true, l.rollAndSyncLocked()
}

// rollLocked seals the active segment and makes a new empty one at the log
// end. It does not fsync: the flusher does, off the append path, before it
// counts any offset past the sealed segment as durable (flushRound). The
// recovery point moves with the next checkpoint; until then a crash scans
// from the older one, across the segments after it (open).
func (l *Log) rollLocked() error {
	old := l.active.Load()
	seg, err := createSegment(l.opts.FS, l.opts.Files, l.dir, old.next.Load())
	if err != nil {
		l.fail(fmt.Errorf("create segment: %w", err))
		return l.failure()
	}
	seg.created = l.opts.Now()
	old.sealed.Store(true)
	// Listed before the new segment becomes active: a flush round that sees
	// the new active segment also sees the old one waiting for its fsync.
	l.unsynced.add(old)
	l.mu.Lock()
	l.mu.segments = append(l.mu.segments, seg)
	l.mu.Unlock()
	l.active.Store(seg)
	if l.opts.SyncRollsInline || l.opts.FlushInline {
		l.syncMu.Lock()
		err := l.syncSealedLocked()
		l.syncMu.Unlock()
		if err != nil {
			l.fail(err)
			return l.failure()
		}
		return nil
	}
	l.flush.poke()
	return nil
}

// rollAndSyncLocked rolls and waits for the sealed segment's fsync: for the
// explicit rolls (Roll, RollIfAged), whose callers want a segment they can
// upload at once. Appends wait meanwhile, as they are off the hot path.
func (l *Log) rollAndSyncLocked() error {
	old := l.active.Load()
	if err := l.rollLocked(); err != nil {
		return err
	}
	return l.waitSynced(old)
}

// ReadResult holds whole batches read from the log.
type ReadResult struct {
	// Data is a run of whole batches. The first may start before the offset
	// asked for (it is the batch holding it); readers skip those records.
	Data []byte
	// NextOffset is where the next read continues: the offset after the last
	// batch returned, or the offset asked for when Data is empty.
	NextOffset int64
}

// Read returns whole batches starting with the one that holds offset, at most
// maxBytes of them (but always the first whole batch, however large, so a
// reader can make progress), none of whose records are at or past upTo (the
// high watermark, for consumers) or the log end. It reads from a single
// segment; call again from NextOffset for more. An offset below the log start
// or above the log end is a *RangeError; at the end (or at upTo) the result is
// empty.
func (l *Log) Read(offset int64, maxBytes int, upTo int64) (ReadResult, error) {
	return l.ReadWith(nil, offset, maxBytes, upTo)
}

// ReadWith is Read with the bytes read into buffers from alloc, which
// returns one of n bytes (nil alloc: make), so that a caller can lend one
// it reuses once it is done with the result. Data is a slice of the last
// buffer alloc returned; alloc is called only when there is data to read.
func (l *Log) ReadWith(alloc func(n int) []byte, offset int64, maxBytes int, upTo int64) (ReadResult, error) {
	if alloc == nil {
		alloc = func(n int) []byte { return make([]byte, n) }
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed {
		return ReadResult{}, ErrClosed
	}
	start, leo := l.logStart.Load(), l.leo.Load()
	if offset < start || offset > leo {
		return ReadResult{}, &RangeError{Offset: offset, LogStart: start, LogEnd: leo}
	}
	res := ReadResult{NextOffset: offset}
	end := min(upTo, leo)
	if offset >= end {
		return res, nil
	}
	seg, f, pos, size, err := l.batchHoldingLocked(offset)
	if err != nil || f == nil {
		return res, err
	}
	defer seg.done()
	buf := alloc(int(min(int64(max(maxBytes, record.HeaderSize)), size-pos)))
	if _, err := f.ReadAt(buf, pos); err != nil {
		return res, fmt.Errorf("hotlog: read %s at %d: %w", seg.path, pos, err)
	}
	used := 0
	for {
		n, err := record.PeekSize(buf[used:])
		if err != nil {
			if used == 0 {
				// Below the log end a whole batch starts here: a header
				// that does not parse is damage, not the end of the data.
				return res, fmt.Errorf("%w: %s at %d (offset %d): %w", ErrCorrupt, seg.path, pos, offset, err)
			}
			break
		}
		if used+n > len(buf) {
			if used > 0 {
				break
			}
			// The first batch is larger than maxBytes: return it whole.
			buf = alloc(n)
			if _, err := f.ReadAt(buf, pos); err != nil {
				return res, fmt.Errorf("hotlog: read %s at %d: %w", seg.path, pos, err)
			}
		}
		b := record.Batch(buf[used : used+n])
		if b.LastOffset() >= end {
			break
		}
		used += n
		res.NextOffset = b.NextOffset()
		if used == len(buf) {
			break
		}
	}
	res.Data = buf[:used]
	return res, nil
}

// batchHoldingLocked finds the first batch holding an offset at or after
// offset: the batch holding offset itself or, in a compacted log, where
// offset fell in a gap the cleaner left (records, whole batches, a
// segment's tail or a whole segment removed), the next batch holding a
// higher one, in a later segment if need be. It returns that batch's
// segment, open (the caller calls done), the batch's position and the
// segment's size; f is nil when no batch holds a later offset.
func (l *Log) batchHoldingLocked(offset int64) (seg *segment, f File, pos, size int64, err error) {
	segs := l.mu.segments
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset })
	for i = max(i-1, 0); i < len(segs); i++ {
		seg = segs[i]
		size = seg.size.Load() // loaded after leo, so it covers every offset below leo
		// Held until the read is done: the cache closes no file in use.
		if f, err = seg.open(); err != nil {
			return nil, nil, 0, 0, err
		}
		if pos, err = seg.position(f, offset, size); err != nil {
			seg.done()
			return nil, nil, 0, 0, err
		}
		if pos < size {
			return seg, f, pos, size, nil
		}
		seg.done()
	}
	return nil, nil, 0, 0, nil
}

// segmentLocked returns the segment holding offset: the last whose base is
// not above it.
func (l *Log) segmentLocked(offset int64) *segment {
	segs := l.mu.segments
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset })
	return segs[max(i-1, 0)]
}

// Changed returns a channel that is closed the next time the log end, the
// high watermark or the log's state (closed, failed, truncated) changes. Take
// it before checking the condition you wait for, then wait on it.
func (l *Log) Changed() <-chan struct{} { return l.changed.wait() }

// AfterChange calls f once, at the log's next change (what closes the
// channel Changed returns), on the goroutine that makes the change, which
// may hold the log's locks: f must not block or call the log. It lets a
// watcher of thousands of idle logs wait without a goroutine for each.
// stop drops f if it has not been called yet; calling it after is
// harmless.
func (l *Log) AfterChange(f func()) (stop func()) { return l.changed.afterNext(f) }

// WaitForHighWatermark blocks until the high watermark passes offset, for a
// consumer's long poll.
func (l *Log) WaitForHighWatermark(ctx context.Context, offset int64) error {
	return l.waitUntil(ctx, func() bool { return l.hw.Load() > offset })
}

// WaitForLogEnd blocks until the log end passes offset, for replication.
func (l *Log) WaitForLogEnd(ctx context.Context, offset int64) error {
	return l.waitUntil(ctx, func() bool { return l.leo.Load() > offset })
}

func (l *Log) waitUntil(ctx context.Context, done func() bool) error {
	for {
		ch := l.changed.wait()
		if done() {
			return nil
		}
		l.mu.RLock()
		closed := l.mu.closed
		l.mu.RUnlock()
		if closed {
			return ErrClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Checkpoint durably records the log start offset, the high watermark and
// the recovery point (the durable offset), so a restart resumes with them and
// scans only what was written after. Close checkpoints too; the owner of the
// log calls it every few seconds. Appends go on meanwhile.
func (l *Log) Checkpoint() error {
	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if saved := l.saved.Load(); saved != nil && *saved == l.currentState() {
		return nil
	}
	return l.writeStateLocked()
}

// NeedsCheckpoint reports whether Checkpoint would write: the log start,
// high watermark or recovery point moved since the state was last saved.
func (l *Log) NeedsCheckpoint() bool {
	saved := l.saved.Load()
	return saved == nil || *saved != l.currentState()
}

func (l *Log) writeStateLocked() error {
	return l.writeState(l.currentState())
}

// currentState is what the state checkpoint would record now.
func (l *Log) currentState() logState {
	return logState{
		logStart:      l.logStart.Load(),
		highWatermark: l.hw.Load(),
		recoveryPoint: l.flushed.Load(),
	}
}

func (l *Log) writeState(s logState) error {
	l.saved.Store(nil)
	if err := WriteFileAtomic(l.opts.FS, l.dir, stateFile, encodeState(s)); err != nil {
		return err
	}
	l.saved.Store(&s)
	return nil
}

// writeEpochsLocked writes the leader-epoch history, unless the file
// already holds exactly it. Caller holds appendMu (or is open).
func (l *Log) writeEpochsLocked() error {
	data := encodeEpochs(l.epochs.snapshot())
	if l.epochsSaved != nil && bytes.Equal(data, l.epochsSaved) {
		l.epochsUnsaved = false
		return nil
	}
	l.epochsSaved = nil
	if err := WriteFileAtomic(l.opts.FS, l.dir, epochFile, data); err != nil {
		return err
	}
	l.epochsSaved, l.epochsUnsaved = data, false
	return nil
}

// Close fsyncs the active segment, writes the checkpoints and closes every
// file. Appenders still waiting for a flush get ErrClosed. Closing twice is
// harmless.
func (l *Log) Close() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	closed := l.mu.closed
	l.mu.RUnlock()
	if closed {
		return nil
	}
	l.flush.stop()

	l.stateMu.Lock()
	defer l.stateMu.Unlock()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	var err error
	if l.failure() == nil {
		if err = l.syncSealedLocked(); err == nil {
			if err = l.active.Load().sync(); err == nil {
				l.advanceFlushed(l.leo.Load())
				// An idle log's checkpoint is already what it would
				// write: a broker stopping thousands of them skips the
				// fsyncs.
				if saved := l.saved.Load(); saved == nil || *saved != l.currentState() {
					err = l.writeStateLocked()
				}
			}
		}
	}
	l.mu.Lock()
	l.mu.closed = true
	for _, s := range l.mu.segments {
		if cerr := s.close(); err == nil {
			err = cerr
		}
	}
	l.mu.Unlock()
	l.changed.broadcast()
	if err != nil {
		return fmt.Errorf("hotlog: close %s: %w", l.dir, err)
	}
	return nil
}
