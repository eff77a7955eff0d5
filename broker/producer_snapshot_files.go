package broker

// Producer snapshot files: "<20-digit offset>.producers" in a partition's
// log dir, each the state of the partition's idempotent producers after
// every batch below its offset (format in producer_snapshot.go).
//
// Every replica writes one for each sealed segment, as of the segment's
// end (the next segment's base offset): the state it recorded when its
// appends reached that base (producerState.appendedLocked), or else
// computed from the snapshot before it plus the headers of the segment's
// batches. Both are the same: the state after each batch depends on the
// state before it and the batch alone, so the file depends on the log
// alone and not on when batches were appended. See snapshotSealed, which
// the broker's housekeeping runs (writeProducerSnapshots), and ensureAt,
// which the uploader and local retention call for the offsets they need. A leader whose local log
// was reset to the cold tier's end gets one from the cold tier (see
// producer_cold.go).
//
// A snapshot is used only while the log holds the history it describes:
//   - those above the log end are deleted when the log is opened and
//     whenever it has been truncated (producerState.reset), since the
//     batches they describe are gone and others may take their offsets;
//   - one whose offset's preceding batch is in the local log must find that
//     batch ending exactly there under the leader epoch it recorded, or it
//     is stale (written before a truncation and a newer leader's appends)
//     and deleted;
//   - below the log start only the newest at or below it is kept: the state
//     at the start, or the closest one below it when none was written there
//     (retention removed a segment before its successor's snapshot was
//     written), which a rebuild then continues from the log start on. What
//     is computed so, without the whole history, is marked partial, and a
//     leader of a tiered topic asks the cold tier for better.
//
// The hot log ignores these files (it opens only .log files and their
// indexes, and removes leftover .tmp files, including a snapshot's
// half-written temporary file).

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/record"
)

const (
	snapshotSuffix = ".producers"
	// replayReadBytes is how much of the log a replay reads at once.
	replayReadBytes = 1 << 20
)

func snapshotName(offset int64) string { return fmt.Sprintf("%020d%s", offset, snapshotSuffix) }

// parseSnapshotName returns the offset of a file named like snapshotName.
func parseSnapshotName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, snapshotSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	off, err := strconv.ParseInt(digits, 10, 64)
	return off, err == nil && off >= 0
}

// errSnapshotStale: the log does not hold the history a snapshot
// describes (it was truncated while the snapshot was computed, or the
// snapshot came from elsewhere).
var errSnapshotStale = errors.New("broker: the log does not back the producer snapshot")

// producerSnapshots are the snapshot files of one partition's log.
//
// Lock order: producerState.mu, then producerSnapshots.mu, then the log's.
type producerSnapshots struct {
	log    *hotlog.Log
	dir    string
	logger *slog.Logger
	// state is the partition's producer state, which keeps the state at
	// the segment bases its appends crossed (nil in some tests).
	state *producerState
	// seen is the log end at the last snapshotSealed that succeeded, for
	// the broker's loop to pass over logs that did not grow.
	seen atomic.Int64
	mu   struct {
		sync.Mutex
		// offsets of the files present, ascending. Every file is written
		// and removed through this type, so it is the truth; a file it
		// does not list (the directory could not be read) is never used.
		offsets  []int64
		failures int // of snapshotSealed in a row, to log a few of them
	}
}

// openProducerSnapshots lists the snapshot files of l's directory and
// deletes those above the log end (what a crash after a truncation, or the
// recovery of a torn tail, left).
func openProducerSnapshots(l *hotlog.Log, logger *slog.Logger) *producerSnapshots {
	ps := &producerSnapshots{log: l, dir: l.Dir(), logger: logger}
	names, err := l.SideFiles(snapshotSuffix)
	if err != nil {
		logger.Warn("cannot list producer snapshots; starting without them", "dir", ps.dir, "err", err)
		return ps
	}
	for _, name := range names {
		if off, ok := parseSnapshotName(name); ok {
			ps.mu.offsets = append(ps.mu.offsets, off)
		}
	}
	slices.Sort(ps.mu.offsets)
	if err := ps.prune(); err != nil {
		logger.Warn("pruning producer snapshots failed", "dir", ps.dir, "err", err)
	}
	return ps
}

func (ps *producerSnapshots) path(offset int64) string {
	return filepath.Join(ps.dir, snapshotName(offset))
}

// prune deletes the snapshots the log no longer backs: above its end, and
// below its start all but the newest at or below it.
func (ps *producerSnapshots) prune() error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.pruneLocked()
}

func (ps *producerSnapshots) pruneLocked() error {
	start, end := ps.log.LogStartOffset(), ps.log.LogEndOffset()
	keepBelow := -1 // index of the newest at or below the start
	for i, off := range ps.mu.offsets {
		if off <= start {
			keepBelow = i
		}
	}
	var kept []int64
	var names []string
	for i, off := range ps.mu.offsets {
		if off > end || (off < start && i != keepBelow) {
			names = append(names, snapshotName(off))
			continue
		}
		kept = append(kept, off)
	}
	if len(names) == 0 {
		return nil
	}
	if err := ps.log.RemoveSideFiles(names...); err != nil {
		return fmt.Errorf("broker: remove producer snapshots: %w", err) // all stay listed: tried again next time
	}
	ps.mu.offsets = kept
	return nil
}

// dropLocked deletes one snapshot.
func (ps *producerSnapshots) dropLocked(offset int64) error {
	if i, ok := slices.BinarySearch(ps.mu.offsets, offset); ok {
		if err := ps.log.RemoveSideFiles(snapshotName(offset)); err != nil {
			return fmt.Errorf("broker: remove producer snapshot: %w", err)
		}
		ps.mu.offsets = slices.Delete(ps.mu.offsets, i, i+1)
	}
	return nil
}

// lastEpochAt returns the leader epoch of the batch of l that ends at
// offset-1; ok is false when no batch of the local log ends there (offset
// is inside a batch, or past the log end).
func lastEpochAt(l *hotlog.Log, offset int64) (epoch int32, ok bool, err error) {
	if offset <= 0 {
		return -1, offset == 0, nil
	}
	rr, err := l.Read(offset-1, record.HeaderSize, offset)
	if err != nil {
		return 0, false, err
	}
	b, _, err := record.Next(rr.Data)
	if err != nil || b.NextOffset() != offset {
		return 0, false, nil
	}
	return b.LeaderEpoch(), true, nil
}

// baseLocked returns the newest snapshot at or below x that the log backs
// (see the top of this file), or nil, deleting on the way those that are
// damaged or stale.
func (ps *producerSnapshots) baseLocked(x int64) (*producerSnapshot, error) {
	start := ps.log.LogStartOffset()
	for i := len(ps.mu.offsets) - 1; i >= 0; i-- {
		off := ps.mu.offsets[i]
		if off > x {
			continue
		}
		snap, err := ps.readLocked(off)
		if err != nil {
			return nil, err
		}
		if snap != nil && off > start {
			epoch, ok, err := lastEpochAt(ps.log, off)
			if err != nil {
				return nil, fmt.Errorf("broker: checking producer snapshot %s: %w", ps.path(off), err)
			}
			if !ok || epoch != snap.lastEpoch {
				ps.logger.Info("deleting a producer snapshot the log no longer matches", "path", ps.path(off), "snapshot_epoch", snap.lastEpoch, "log_epoch", epoch, "batch_ends_there", ok)
				snap = nil
			}
		}
		if snap != nil {
			return snap, nil
		}
		if err := ps.dropLocked(off); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// readLocked reads and decodes the snapshot at off; a damaged one gives
// nil (and a warning) rather than an error, so the caller falls back to an
// older one and the file is written again.
func (ps *producerSnapshots) readLocked(off int64) (*producerSnapshot, error) {
	data, ok, err := ps.log.ReadSideFile(snapshotName(off))
	if err != nil {
		return nil, fmt.Errorf("broker: read producer snapshot: %w", err)
	}
	if !ok {
		return nil, nil
	}
	snap, err := decodeProducerSnapshot(data)
	if err == nil && snap.offset != off {
		err = snapshotCorrupt("file of offset %d holds the state at %d", off, snap.offset)
	}
	if err != nil {
		ps.logger.Warn("deleting a damaged producer snapshot", "path", ps.path(off), "err", err)
		return nil, nil
	}
	return snap, nil
}

// buildInto replaces the state of s, whose lock the caller holds, with the
// state after every batch of the log below x: the newest snapshot the log
// backs at or below x, then the headers of the batches from there (or from
// the log start, if that is later) to x. exact is false when the history
// below the log start is not wholly in the result (the snapshot is below
// the log start or partial itself, or there is none and the log does not
// start at 0): producers that last wrote before the start may then be
// missing, never wrongly remembered. lastEpoch is the leader epoch of the
// batch ending at x-1, or -1.
func (ps *producerSnapshots) buildInto(s *producerState, x int64) (exact bool, lastEpoch int32, err error) {
	ps.mu.Lock()
	base, err := ps.baseLocked(x)
	ps.mu.Unlock()
	if err != nil {
		return false, 0, err
	}
	start := ps.log.LogStartOffset()
	clear(s.mu.producers)
	s.mu.lru.Init()
	from, lastEpoch := start, int32(-1)
	if base != nil {
		s.loadLocked(base)
		from = max(base.offset, start)
		exact = base.offset >= start && !base.partial
		if base.offset == x {
			lastEpoch = base.lastEpoch
		}
	} else {
		exact = start == 0
	}
	if from > x {
		// The log start passed x while we looked: x is gone.
		return false, 0, &hotlog.RangeError{Offset: x, LogStart: start, LogEnd: ps.log.LogEndOffset()}
	}
	// One buffer for the whole replay: each read's batches are done with
	// before the next read.
	var buf []byte
	reuse := func(n int) []byte {
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		return buf[:n]
	}
	for off := from; off < x; {
		rr, err := ps.log.ReadWith(reuse, off, replayReadBytes, x)
		if err != nil {
			// Including a range error: retention moved the start past off,
			// and the state would miss what it removed.
			return false, 0, fmt.Errorf("broker: replaying producer state from %s at offset %d: %w", ps.dir, off, err)
		}
		if len(rr.Data) == 0 {
			return false, 0, fmt.Errorf("broker: replaying producer state from %s: no batch ends at offset %d", ps.dir, x)
		}
		for data := rr.Data; len(data) > 0; {
			b, rest, err := record.Next(data)
			if err != nil {
				return false, 0, fmt.Errorf("broker: replaying producer state from %s near offset %d: %w", ps.dir, off, err)
			}
			if b.NextOffset() > off { // Read starts with the batch holding off
				s.recordLocked(b)
			}
			lastEpoch, data = b.LeaderEpoch(), rest
		}
		off = rr.NextOffset
	}
	s.mu.next = x
	return exact, lastEpoch, nil
}

// ensureAt returns the encoded snapshot at x, an offset where a batch of
// the log ends (a sealed segment's end), writing it first if there is none:
// computed from the one before it and the batches between.
func (ps *producerSnapshots) ensureAt(x int64) ([]byte, error) {
	ps.mu.Lock()
	if _, ok := slices.BinarySearch(ps.mu.offsets, x); ok {
		snap, err := ps.baseLocked(x) // checks it, deleting it if stale
		if err != nil {
			ps.mu.Unlock()
			return nil, err
		}
		if snap != nil && snap.offset == x {
			ps.mu.Unlock()
			return encodeProducerSnapshot(snap), nil
		}
	}
	ps.mu.Unlock()

	// The state the partition recorded as of x, when it had it: the same
	// snapshot as the one computed below, without reading the segment.
	if ps.state != nil {
		if snap := ps.state.takeCaptured(x); snap != nil {
			data := encodeProducerSnapshot(snap)
			err := ps.write(snap, data)
			if err == nil {
				return data, nil
			}
			if !errors.Is(err, errSnapshotStale) {
				return nil, err
			}
		}
	}

	s := newProducerState()
	s.mu.Lock()
	exact, lastEpoch, err := ps.buildInto(s, x)
	snap := s.snapshotLocked(x, lastEpoch)
	snap.partial = !exact
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	data := encodeProducerSnapshot(snap)
	if err := ps.write(snap, data); err != nil {
		return nil, err
	}
	return data, nil
}

// write stores an encoded snapshot, unless the log no longer holds the
// history it was computed from (it was truncated meanwhile): the batch
// ending just below the snapshot must still be there under the epoch the
// snapshot records. Checking and writing under the lock that reset's
// pruning takes means a truncation's pruning either sees the file or
// happens before the check, which then fails. A snapshot at or below the
// log start (one from the cold tier) has nothing local to be checked
// against.
func (ps *producerSnapshots) write(snap *producerSnapshot, data []byte) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	x := snap.offset
	if x > ps.log.LogStartOffset() {
		epoch, ok, err := lastEpochAt(ps.log, x)
		if err != nil {
			return fmt.Errorf("broker: checking the log before writing a producer snapshot: %w", err)
		}
		if !ok || epoch != snap.lastEpoch {
			return fmt.Errorf("%w: %s has no batch of epoch %d ending at offset %d", errSnapshotStale, ps.dir, snap.lastEpoch, x)
		}
	}
	if err := ps.log.WriteSideFile(snapshotName(x), data); err != nil {
		return err
	}
	if i, ok := slices.BinarySearch(ps.mu.offsets, x); !ok {
		ps.mu.offsets = slices.Insert(ps.mu.offsets, i, x)
	}
	return nil
}

// exactAt reports whether the files give the exact state at the log end:
// the newest snapshot the log backs is at or above the log start and not
// partial, or the log starts at 0.
func (ps *producerSnapshots) exactAt() (bool, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	start := ps.log.LogStartOffset()
	if start == 0 {
		return true, nil
	}
	base, err := ps.baseLocked(ps.log.LogEndOffset())
	return base != nil && base.offset >= start && !base.partial, err
}

// dropPartialAbove deletes the partial snapshots above offset, once a
// better one was written there: the broker's loop computes them again from
// it.
func (ps *producerSnapshots) dropPartialAbove(offset int64) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, off := range slices.Clone(ps.mu.offsets) {
		if off <= offset {
			continue
		}
		snap, err := ps.readLocked(off)
		if err != nil {
			return err
		}
		if snap == nil || snap.partial {
			if err := ps.dropLocked(off); err != nil {
				return err
			}
		}
	}
	return nil
}

// snapshotSealed writes the snapshots that the sealed segments above the
// newest one lack, oldest first (each from the one before), and prunes
// those the log no longer backs.
func (ps *producerSnapshots) snapshotSealed() error {
	var ends []int64
	for _, seg := range ps.sealedSegments() {
		if seg.Sealed && seg.LastOffset >= seg.BaseOffset {
			ends = append(ends, seg.LastOffset+1)
		}
	}
	ps.mu.Lock()
	err := ps.pruneLocked()
	newest := int64(-1)
	if n := len(ps.mu.offsets); n > 0 {
		newest = ps.mu.offsets[n-1]
	}
	ps.mu.Unlock()
	if err != nil {
		return err
	}
	for _, x := range ends {
		if x <= newest {
			continue
		}
		if _, err := ps.ensureAt(x); err != nil {
			return err
		}
	}
	return nil
}

// sealedSegments describes the log's segments when one is sealed, else
// nil: most replicas the housekeeping visits have only their active
// segment.
func (ps *producerSnapshots) sealedSegments() []hotlog.SegmentInfo {
	if !ps.log.Sealed() {
		return nil
	}
	return ps.log.Segments()
}

// writeProducerSnapshots writes the producer snapshots a partition's sealed
// segments lack, when its log grew since the last time that succeeded or
// sweep says to look anyway (an idle segment is sealed by age, without an
// append). The broker's housekeeping calls it. Nothing depends on how soon:
// the uploader and local retention write the snapshots they need first.
// It reports false when the write failed and is worth retrying.
func (p *partition) writeProducerSnapshots(sweep bool, logger *slog.Logger) bool {
	ps := p.producers.snaps.Load()
	if ps == nil {
		return true
	}
	leo := p.log.LogEndOffset()
	if !sweep && ps.seen.Load() == leo {
		return true
	}
	if p.log.ActiveBaseOffset() == leo {
		// The last segment may have been sealed by age, with no append
		// since to capture the state at its end.
		p.mu.Lock()
		p.producers.captureIdleLocked()
		p.mu.Unlock()
	}
	err := ps.snapshotSealed()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if err == nil || errors.Is(err, hotlog.ErrClosed) {
		ps.mu.failures = 0
		ps.seen.Store(leo)
		return true
	}
	ps.mu.failures++
	if ps.mu.failures == 1 || ps.mu.failures%100 == 0 {
		logger.Warn("writing producer snapshots failed; will retry", "partition", p.name(), "failures", ps.mu.failures, "err", err)
	}
	return false
}
