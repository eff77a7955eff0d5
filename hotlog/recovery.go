package hotlog

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/strata-log/strata/record"
)

// RecoveryReport says what opening a log found and repaired.
type RecoveryReport struct {
	// Segments is how many segments the log has after recovery.
	Segments int
	// ActiveBase is the base offset of the active segment.
	ActiveBase int64
	// ScannedFrom is the position in the active segment where the scan for a
	// torn tail began: its last index entry that agreed with the log.
	ScannedFrom int64
	// TruncatedBytes were cut from the end of the active segment because they
	// did not hold whole, valid batches continuing the log; TruncateReason
	// says what was wrong with the first of them.
	TruncatedBytes int64
	TruncateReason string
	// RebuiltIndexes lists the base offsets of segments whose indexes were
	// missing or disagreed with the log and were rebuilt from it, wholly or
	// from the last entry that agreed. After a crash that includes an active
	// segment whose few entries were not yet written (flushRound writes
	// them indexLag at a time).
	RebuiltIndexes []int64
	// RemovedFiles lists leftovers deleted: temporary files, indexes without a
	// log, and segments wholly below the checkpointed log start.
	RemovedFiles []string
	// CompletedRewrite lists the bases of segments whose committed rewrite
	// (see rewrite.go) a crash interrupted and open finished.
	CompletedRewrite []int64
}

// unknownTs marks a segment minimum timestamp that recovery did not see all
// batches for; info computes it on demand.
const unknownTs = math.MinInt64

// open loads the log from disk (see RecoveryReport for what it repairs).
func (l *Log) open() error {
	fsys, dir := l.opts.FS, l.dir
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := l.recoverSwap(); err != nil {
		return err
	}
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	var bases []int64
	for _, name := range names {
		if base, ok := parseSegmentName(name, logSuffix); ok {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	for _, name := range names {
		base, isIndex := parseSegmentName(name, indexSuffix)
		if !isIndex {
			base, isIndex = parseSegmentName(name, timeIndexSuffix)
		}
		_, hasLog := slices.BinarySearch(bases, base)
		if strings.HasSuffix(name, tmpSuffix) || (isIndex && !hasLog) {
			if err := fsys.Remove(filepath.Join(dir, name)); err != nil {
				return err
			}
			l.recovery.RemovedFiles = append(l.recovery.RemovedFiles, name)
		}
	}

	state, stateFound := logState{}, false
	if data, ok, err := readFile(fsys, filepath.Join(dir, stateFile)); err != nil {
		return err
	} else if ok {
		stateFound = true
		if state, err = decodeState(data); err != nil {
			return err
		}
	}
	if data, ok, err := readFile(fsys, filepath.Join(dir, epochFile)); err != nil {
		return err
	} else if ok {
		entries, err := decodeEpochs(data)
		if err != nil {
			return err
		}
		l.epochs.replace(entries)
		l.epochsSaved = encodeEpochs(entries)
	}

	var segs, tail []*segment
	for i := 0; i < len(bases); i++ {
		seg, err := openSegmentFile(fsys, l.opts.Files, dir, bases[i])
		if err != nil {
			return err
		}
		segs = append(segs, seg)
		l.mu.segments = segs // so a failed open closes what it opened
		last := i == len(bases)-1
		if !last && bases[i+1] <= state.recoveryPoint {
			// Wholly below the recovery point: fsynced, so damage is
			// reported, not cut.
			if err := l.loadSealed(seg); err != nil {
				return err
			}
			seg.synced.Store(true)
			continue
		}
		// Past the recovery point a crash may have left any page unwritten:
		// in the active segment, and in a segment a roll sealed but the
		// flusher had not fsynced yet. Each is cut after its last whole
		// batch; after a cut, or a segment ending short of the next, the
		// later segments continue offsets the log no longer has, and go.
		// (Not when the next one starts at or below the checkpointed log
		// start: that gap is a reset's, whose older segments go below.)
		durable, err := l.recoverTail(seg, state.recoveryPoint)
		if err != nil {
			return err
		}
		if durable && !slices.Contains(l.recovery.RebuiltIndexes, seg.base) {
			if !last {
				seg.synced.Store(true)
			}
		} else {
			tail = append(tail, seg)
		}
		if !last && seg.next.Load() != bases[i+1] && bases[i+1] > state.logStart {
			for _, b := range bases[i+1:] {
				for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
					name := segmentName(b, suffix)
					if err := fsys.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
						return err
					}
					if suffix == logSuffix {
						l.recovery.RemovedFiles = append(l.recovery.RemovedFiles, name)
					}
				}
			}
			bases, last = bases[:i+1], true
		}
		if !last {
			seg.sealed.Store(true)
		}
	}

	// Segments wholly below the checkpointed log start are what a crash left
	// of a retention pass or a reset: finish it.
	for len(segs) > 1 && segs[0].lastOffset() < state.logStart {
		if err := segs[0].remove(fsys); err != nil {
			return err
		}
		l.recovery.RemovedFiles = append(l.recovery.RemovedFiles, filepath.Base(segs[0].path))
		segs = segs[1:]
	}
	// Segments may leave gaps between them (a compacted segment whose last
	// batches the cleaner dropped ends below the next one's base), never
	// overlap. A gap after a segment past the recovery point was taken
	// above for lost writes and its successors removed: a cleaner rewrites
	// only segments below the checkpointed recovery point.
	for i := 1; i < len(segs); i++ {
		if end := segs[i-1].next.Load(); end > segs[i].base {
			return fmt.Errorf("%w: segment %d ends at offset %d but the next begins at %d",
				ErrCorrupt, segs[i-1].base, end, segs[i].base)
		}
	}
	created := len(segs) == 0
	if created {
		seg, err := createSegment(fsys, l.opts.Files, dir, state.logStart)
		if err != nil {
			return err
		}
		seg.created = l.opts.Now()
		segs = append(segs, seg)
	}
	l.mu.segments = segs
	active := segs[len(segs)-1]
	l.active.Store(active)
	leo := active.next.Load()
	l.leo.Store(leo)
	l.logStart.Store(min(max(state.logStart, segs[0].base), leo))
	l.hw.Store(min(max(state.highWatermark, l.logStart.Load()), leo))
	// Epochs that begin at or past the log end have no batch here (a
	// leader's BeginEpoch, or a batch a crash lost): they go, as in Kafka.
	// The file keeps them until the next write of the history, which comes
	// before any append (appendLocked): a leader taking its epoch again at
	// once (BeginEpoch) then leaves the file as it was, and the start of an
	// idle log writes nothing. Until then every open drops them again.
	if l.epochs.truncateFrom(leo) {
		l.epochsUnsaved = true
	}

	// Whatever recovery read past the recovery point may have come from the
	// page cache of a process that died: fsync it so the durable offset
	// starts at the log end.
	for _, seg := range tail {
		if !slices.Contains(segs, seg) {
			continue // below the log start: removed above
		}
		if err := seg.file.sync(true); err != nil {
			return err
		}
		if err := seg.persistIndexes(); err != nil && !l.spareOnFullDisk(err, "indexes of segment "+segmentName(seg.base, logSuffix)) {
			return err
		}
		if seg.sealed.Load() {
			seg.synced.Store(true)
		}
	}
	// A clean stop leaves nothing to fsync, no file to remove and a
	// checkpoint that is still current: such a start writes nothing, which
	// for a broker of thousands of logs is most of its start time.
	if len(tail) > 0 || len(l.recovery.RemovedFiles) > 0 || created {
		if err := fsys.SyncDir(dir); err != nil {
			return err
		}
	}
	l.flushed.Store(leo)
	if stateFound && l.currentState() == state {
		l.saved.Store(&state)
	} else if err := l.writeStateLocked(); err != nil && !l.spareOnFullDisk(err, "state checkpoint") {
		return err
	}
	l.recovery.Segments = len(segs)
	l.recovery.ActiveBase = active.base
	if r := l.recovery; r.TruncatedBytes > 0 || len(r.RebuiltIndexes) > 0 || len(r.RemovedFiles) > 0 {
		l.opts.Logger.Warn("hotlog: recovered log", "dir", dir, "truncated_bytes", r.TruncatedBytes,
			"reason", r.TruncateReason, "rebuilt_indexes", r.RebuiltIndexes, "removed", r.RemovedFiles)
	}
	return nil
}

// spareOnFullDisk reports whether err, from rewriting what during
// recovery, is the disk being full, and if so says so. None of those
// rewrites is needed to serve the log, and a log that could not open on a
// full disk would leave the broker unable to serve even its reads. The
// files stay as they were and are still right for the next recovery:
// indexes are hints checked against the log on open (and rebuilt in
// memory now), an older state checkpoint has a lower recovery point (the
// next open scans more), epochs past the log end are cut again; Checkpoint
// and the flusher write them once the disk has room. The log bytes
// themselves are never spared: their fsync must succeed.
func (l *Log) spareOnFullDisk(err error, what string) bool {
	if !errors.Is(err, syscall.ENOSPC) {
		return false
	}
	l.opts.Logger.Warn("hotlog: disk full; keeping the old "+what+" until there is room", "dir", l.dir, "err", err)
	return true
}

// loadSealed loads a sealed segment. Its indexes are rebuilt if they disagree
// with the log; its batches must all be whole and valid, since it was fsynced
// before the next segment was created: damage here is not a torn write, so it
// is reported rather than cut away.
func (l *Log) loadSealed(seg *segment) error {
	size, err := seg.fileSize()
	if err != nil {
		return err
	}
	_, end, damage, err := l.resume(seg, size, math.MaxInt64)
	if err != nil {
		return err
	}
	if damage == nil && end != size {
		damage = fmt.Errorf("%d bytes past the last batch", size-end)
	}
	if damage != nil {
		return fmt.Errorf("%w: sealed segment %s: %w", ErrCorrupt, seg.path, damage)
	}
	if slices.Contains(l.recovery.RebuiltIndexes, seg.base) {
		if err := seg.persistIndexes(); err != nil && !l.spareOnFullDisk(err, "indexes of segment "+segmentName(seg.base, logSuffix)) {
			return err
		}
	}
	seg.sealed.Store(true)
	return nil
}

// recoverTail loads a segment that holds offsets past the recovery point
// (the active one, or one sealed but maybe not fsynced) and truncates it
// after the last whole, valid batch. Below the recovery point everything was
// fsynced, so the scan starts at the last index entry at or below it; above
// it a crash may have left any page unwritten, so every batch there is
// checked.
func (l *Log) recoverTail(seg *segment, recoveryPoint int64) (durable bool, err error) {
	f, err := seg.open()
	if err != nil {
		return false, err
	}
	defer seg.done()
	size, err := f.Size()
	if err != nil {
		seg.file.wrote()
		return false, err
	}
	from, end, damage, err := l.resume(seg, size, recoveryPoint)
	if err != nil {
		seg.file.wrote()
		return false, err
	}
	l.recovery.ScannedFrom = from
	seg.created = l.opts.Now()
	// A segment whose every batch lies below the recovery point, with
	// nothing after them, was fsynced whole before the checkpoint was
	// written: what a clean stop leaves. Open need not fsync it again.
	if damage == nil && end == size && seg.next.Load() <= recoveryPoint {
		return true, nil
	}
	// Its bytes may be only in the page cache of the process that died:
	// counted as an unsynced write, the file stays open (it is held until
	// this returns) until open fsyncs it, so that fsync reports any
	// writeback error on this descriptor.
	seg.file.wrote()
	if damage != nil {
		if err := seg.truncate(end); err != nil {
			return false, err
		}
		l.recovery.TruncatedBytes += size - end
		l.recovery.TruncateReason = damage.Error()
	}
	return false, nil
}

// resume brings a segment's state up to date with its log file of size
// bytes: it keeps the index entries that agree with the log and index a batch
// below scanBelow, then scans and validates every batch from the last of
// them, re-indexing as it goes. It returns where the scan began, the position
// after the last valid batch, and the damage that stopped it short of size,
// if any; err is an I/O failure, after which nothing may be cut.
func (l *Log) resume(seg *segment, size, scanBelow int64) (from, end int64, damage, err error) {
	if err := seg.index.load(); err != nil {
		return 0, 0, nil, err
	}
	if err := seg.times.load(); err != nil {
		return 0, 0, nil, err
	}
	stored := max(seg.index.len(), seg.times.len())
	k, err := seg.trustedEntries(size)
	if err != nil {
		return 0, 0, nil, err
	}
	if k < stored || (k == 0 && size > 0) {
		l.recovery.RebuiltIndexes = append(l.recovery.RebuiltIndexes, seg.base)
	}
	for k > 0 && seg.base+int64(seg.index.at(k-1).rel) >= scanBelow {
		k--
	}
	if k > 0 {
		from = int64(seg.index.at(k - 1).pos)
	}
	end, damage, err = seg.rescanFrom(k, size, l.opts.IndexIntervalBytes)
	return from, end, damage, err
}

// trustedEntries returns how many leading index entries agree with the log
// file: both indexes name the same batches, positions and offsets increase,
// timestamps do not decrease, the first entry is the first batch, every
// position is inside the file, and the last kept entry points at a batch
// header with the offset it names.
func (s *segment) trustedEntries(size int64) (int, error) {
	n := min(s.index.len(), s.times.len())
	k := 0
	for ; k < n; k++ {
		e, t := s.index.at(k), s.times.at(k)
		if e.rel != t.rel || int64(e.pos) >= size {
			break
		}
		// The first entry is the first batch, at position 0; its offset
		// may be past the segment's base in a compacted segment.
		if k == 0 && e.pos != 0 {
			break
		}
		if k > 0 {
			p, pt := s.index.at(k-1), s.times.at(k-1)
			if e.rel <= p.rel || e.pos <= p.pos || t.maxTs < pt.maxTs {
				break
			}
		}
	}
	if k == 0 {
		return 0, nil
	}
	f, err := s.open()
	if err != nil {
		return 0, err
	}
	defer s.done()
	for ; k > 0; k-- {
		e := s.index.at(k - 1)
		if int64(e.pos)+record.HeaderSize > size {
			continue
		}
		h, err := s.readHeader(f, int64(e.pos))
		if err != nil {
			return 0, err
		}
		if h.BaseOffset() == s.base+int64(e.rel) && int64(e.pos)+int64(h.Size()) <= size {
			break
		}
	}
	return k, nil
}

// rescanFrom keeps the first k index entries and rebuilds the segment's state
// by scanning from the batch of the last of them (or from the start) to end.
// The kept time index entry gives the largest timestamp before the scan, so
// the entries the scan adds stay exact. It returns the position after the
// last valid batch and the damage that stopped the scan short of end, if
// any; err is an I/O failure.
func (s *segment) rescanFrom(k int, end int64, interval int) (stop int64, damage, err error) {
	if err := s.index.truncate(k); err != nil {
		return 0, nil, err
	}
	if err := s.times.truncate(k); err != nil {
		return 0, nil, err
	}
	pos, expect := int64(0), s.base
	s.indexedPos = -1
	s.maxTs.Store(noTimestamp)
	s.minTs.Store(noTimestamp)
	if k > 0 {
		e, t := s.index.at(k-1), s.times.at(k-1)
		pos, expect = int64(e.pos), s.base+int64(e.rel)
		s.indexedPos = pos
		s.maxTs.Store(t.maxTs)
		s.minTs.Store(unknownTs)
	}
	s.size.Store(pos)
	s.next.Store(expect)
	return s.scan(pos, end, expect, func(b record.Batch, p int64) { s.track(b, p, interval) })
}

// minTimestamp returns the smallest batch timestamp, walking the batch
// headers once if recovery did not see them all.
func (s *segment) minTimestamp() int64 {
	if v := s.minTs.Load(); v != unknownTs {
		return v
	}
	f, err := s.open()
	if err != nil {
		return noTimestamp
	}
	defer s.done()
	size, lo := s.size.Load(), int64(noTimestamp)
	for pos := int64(0); pos < size; {
		h, err := s.readHeader(f, pos)
		if err != nil {
			return noTimestamp
		}
		if ts := batchMinTimestamp(h); lo == noTimestamp || ts < lo {
			lo = ts
		}
		pos += int64(h.Size())
	}
	s.minTs.CompareAndSwap(unknownTs, lo)
	return s.minTs.Load()
}
