package hotlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/strata-log/strata/record"
)

// Rewriting sealed segments (the cleaner's output) is crash-safe by a swap
// marker, committed like a checkpoint:
//
//  1. each new segment is written beside the old one as <base>.log.cleaned,
//     <base>.index.cleaned and <base>.timeindex.cleaned, every file fsynced,
//     then the directory;
//  2. the marker cleaner.swap, listing the bases, is written atomically
//     (temporary file, fsync, rename, directory fsync): its rename is the
//     commit point;
//  3. each .cleaned file is renamed over its old name, the directory is
//     fsynced, and the marker removed (and the directory fsynced again).
//
// Open looks for the marker before anything else: present, it finishes
// step 3 (a .cleaned file still there is renamed; one already renamed is
// not there), so the new set wins; absent, every .cleaned file is removed,
// so the old set stays. Either way a crash at any step leaves one whole set,
// never a mix and never neither.
const (
	swapFile      = "cleaner.swap"
	cleanedSuffix = ".cleaned"
)

var swapMagic = [4]byte{'S', 'C', 'S', 'W'}

// ErrSegmentsChanged: the segments a rewrite was asked to replace are no
// longer the log's (retention or truncation removed them meanwhile); the
// new files were discarded and nothing changed.
var ErrSegmentsChanged = errors.New("hotlog: segments changed during the rewrite")

// Batches yields a segment's batches in offset order. A batch is valid
// only until the next one is asked for: copy what you keep.
type Batches = iter.Seq2[record.Batch, error]

// RewriteFunc rewrites one segment: it reads the old batches and emits
// the new ones, which must be valid batches in offset order within the
// old segment's range and ending where it ended (the cleaner covers every
// offset the old batches did, with empty batches where it dropped whole
// ones).
type RewriteFunc func(seg SegmentInfo, batches Batches, emit func(record.Batch) error) error

// RewriteResult says what a rewrite replaced.
type RewriteResult struct {
	Segments           int
	BytesIn, BytesOut  int64
	BatchesIn, Batches int
}

// RewriteSegments replaces the sealed segments that begin at bases with
// what rewrite makes of them, through the swap described above. The
// segments must be sealed and fsynced (SegmentInfo.Sealed); the active one
// is never rewritten. Appends and reads go on while the new files are
// written; the swap itself holds readers off only for its renames, and a
// read already in flight on an old segment finishes on it first. A
// failure before the commit point removes the new files and changes
// nothing; one after it fails the log (sticky), whose next open finishes
// the swap.
func (l *Log) RewriteSegments(bases []int64, rewrite RewriteFunc) (RewriteResult, error) {
	var res RewriteResult
	old, err := l.sealedSegments(bases)
	if err != nil {
		return res, err
	}
	staged := make([]*segment, 0, len(old))
	discard := func() {
		for _, s := range staged {
			s.removeStaged(l.opts.FS)
		}
	}
	for _, s := range old {
		st, in, err := l.stage(s, rewrite)
		if st != nil {
			staged = append(staged, st)
		}
		res.BatchesIn += in
		if err != nil {
			discard()
			return res, fmt.Errorf("hotlog: rewrite segment %d: %w", s.base, err)
		}
		res.Segments++
		res.BytesIn += s.size.Load()
		res.BytesOut += st.size.Load()
	}
	if err := l.opts.FS.SyncDir(l.dir); err != nil {
		discard()
		return res, fmt.Errorf("hotlog: rewrite: %w", err)
	}
	return res, l.commitRewrite(old, staged, discard)
}

// sealedSegments returns the log's segments at bases, each sealed and
// fsynced.
func (l *Log) sealedSegments(bases []int64) ([]*segment, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed {
		return nil, ErrClosed
	}
	var out []*segment
	for _, base := range bases {
		i := slices.IndexFunc(l.mu.segments, func(s *segment) bool { return s.base == base })
		if i < 0 {
			return nil, fmt.Errorf("%w: no segment begins at %d", ErrSegmentsChanged, base)
		}
		s := l.mu.segments[i]
		if i == len(l.mu.segments)-1 || !s.durable() {
			return nil, fmt.Errorf("hotlog: segment %d is not sealed and fsynced: only those are rewritten", base)
		}
		out = append(out, s)
	}
	return out, nil
}

// stage writes the rewrite of s as .cleaned files, fsynced, and returns a
// segment describing them (its paths the .cleaned ones) and how many
// batches it read.
func (l *Log) stage(s *segment, rewrite RewriteFunc) (*segment, int, error) {
	fsys := l.opts.FS
	f, err := fsys.OpenFile(s.path+cleanedSuffix, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, 0, err
	}
	st := &segment{
		base:       s.base,
		path:       s.path + cleanedSuffix,
		index:      newOffsetIndex(fsys, s.index.path+cleanedSuffix),
		times:      newTimeIndex(fsys, s.times.path+cleanedSuffix),
		indexedPos: -1,
	}
	st.next.Store(s.base)
	st.maxTs.Store(noTimestamp)
	st.minTs.Store(noTimestamp)

	var pos int64
	emit := func(b record.Batch) error {
		if err := b.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidBatch, err)
		}
		// Batches may leave gaps, as a compacted log's do (the cleaner
		// fills its own, but a segment copied from a leader may have
		// them), never overlap or go back.
		if b.BaseOffset() < st.next.Load() {
			return fmt.Errorf("emitted batch begins at %d, below %d where the one before ends", b.BaseOffset(), st.next.Load())
		}
		if b.LastOffset() >= s.next.Load() {
			return fmt.Errorf("emitted batch ends at %d, past the segment's last offset %d", b.LastOffset(), s.lastOffset())
		}
		if _, err := f.WriteAt(b, pos); err != nil {
			return err
		}
		st.track(b, pos, l.opts.IndexIntervalBytes)
		pos += int64(len(b))
		return nil
	}
	read := 0
	err = rewrite(s.info(), s.batches(&read), emit)
	// The end must stay: open takes a segment ending short of the next
	// one's base, past the recovery point, for lost writes and removes
	// what follows it.
	if err == nil && st.next.Load() != s.next.Load() {
		err = fmt.Errorf("rewrite ends at offset %d, the segment at %d: a rewrite keeps the segment's last offset", st.next.Load(), s.next.Load())
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = st.persistIndexes()
	}
	return st, read, err
}

// batches yields the segment's batches, read in chunks and validated,
// counting them in *read.
func (s *segment) batches(read *int) Batches {
	return func(yield func(record.Batch, error) bool) {
		stopped := false
		_, damage, err := s.scan(0, s.size.Load(), s.base, func(b record.Batch, _ int64) {
			if !stopped {
				*read++
				stopped = !yield(b, nil)
			}
		})
		if stopped {
			return
		}
		if err == nil && damage != nil {
			err = fmt.Errorf("%w: sealed segment %s: %w", ErrCorrupt, s.path, damage)
		}
		if err != nil {
			yield(nil, err)
		}
	}
}

// SegmentBatches yields the batches of the sealed segment that begins at
// base, read in chunks, each validated (CRC included); a batch is valid
// only until the next is asked for. It is how the cleaner reads what it
// maps and rewrites.
func (l *Log) SegmentBatches(base int64) Batches {
	return func(yield func(record.Batch, error) bool) {
		segs, err := l.sealedSegments([]int64{base})
		if err != nil {
			yield(nil, err)
			return
		}
		var read int
		segs[0].batches(&read)(yield)
	}
}

// removeStaged deletes a staged segment's .cleaned files.
func (s *segment) removeStaged(fsys FS) {
	for _, p := range []string{s.path, s.index.path, s.times.path} {
		fsys.Remove(p)
	}
}

// commitRewrite swaps the staged segments in for the old ones: the marker,
// the renames, the segments in memory, the marker's removal.
func (l *Log) commitRewrite(old, staged []*segment, discard func()) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		discard()
		return err
	}
	l.mu.RLock()
	for _, s := range old {
		if !slices.Contains(l.mu.segments, s) {
			l.mu.RUnlock()
			discard()
			return fmt.Errorf("%w: segment %d", ErrSegmentsChanged, s.base)
		}
	}
	l.mu.RUnlock()
	bases := make([]int64, len(old))
	for i, s := range old {
		bases[i] = s.base
	}
	fsys := l.opts.FS
	if err := WriteFileAtomic(fsys, l.dir, swapFile, encodeSwap(bases)); err != nil {
		// The marker may or may not have reached the disk: only a reopen
		// can tell which set is the log's now.
		l.fail(err)
		return l.failure()
	}

	// Past the commit point. Readers are held off while names change, so
	// none opens a new file through an old segment's index.
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	fresh := make([]*segment, len(staged))
	for i, st := range staged {
		s, err := l.adoptStaged(old[i], st)
		if err != nil {
			l.fail(err)
			return l.failure()
		}
		fresh[i] = s
	}
	if err := fsys.SyncDir(l.dir); err != nil {
		l.fail(err)
		return l.failure()
	}
	for i, s := range old {
		j := slices.Index(l.mu.segments, s)
		l.mu.segments[j] = fresh[i]
		s.close()
	}
	if err := fsys.Remove(filepath.Join(l.dir, swapFile)); err != nil {
		l.fail(err)
		return l.failure()
	}
	if err := fsys.SyncDir(l.dir); err != nil {
		l.fail(err)
		return l.failure()
	}
	return nil
}

// adoptStaged renames a staged segment's files over the old one's and
// returns the segment that reads them, with the state staging built.
func (l *Log) adoptStaged(old, st *segment) (*segment, error) {
	fsys := l.opts.FS
	for _, p := range [][2]string{{st.path, old.path}, {st.index.path, old.index.path}, {st.times.path, old.times.path}} {
		if err := fsys.Rename(p[0], p[1]); err != nil {
			return nil, err
		}
	}
	f, err := fsys.OpenFile(old.path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	s := newSegment(fsys, l.opts.Files, l.dir, old.base, f)
	s.index.adopt(st.index)
	s.times.adopt(st.times)
	s.size.Store(st.size.Load())
	s.next.Store(st.next.Load())
	s.maxTs.Store(st.maxTs.Load())
	s.minTs.Store(st.minTs.Load())
	s.indexedPos = st.indexedPos
	s.created = old.created
	s.sealed.Store(true)
	s.synced.Store(true)
	return s, nil
}

// adopt takes the entries of a staged index whose file was renamed to x's
// path: all of them are in it.
func (x *sparseIndex[E]) adopt(from *sparseIndex[E]) {
	from.mu.RLock()
	entries := from.entries
	from.mu.RUnlock()
	x.mu.Lock()
	x.entries = entries
	x.mu.Unlock()
	x.persistMu.Lock()
	x.persisted = len(entries)
	x.persistMu.Unlock()
}

// encodeSwap is the marker's content: the bases whose .cleaned files
// replace the old ones.
func encodeSwap(bases []int64) []byte {
	b := make([]byte, 0, 14+8*len(bases))
	b = append(b, swapMagic[:]...)
	b = binary.BigEndian.AppendUint16(b, checkpointVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(bases)))
	for _, base := range bases {
		b = binary.BigEndian.AppendUint64(b, uint64(base))
	}
	return sealCheckpoint(b)
}

func decodeSwap(data []byte) ([]int64, error) {
	body, err := openCheckpoint(swapFile, data, swapMagic)
	if err != nil {
		return nil, err
	}
	if len(body) < 4 || uint64(len(body)-4) != uint64(binary.BigEndian.Uint32(body))*8 {
		return nil, fmt.Errorf("%w: %s: body of %d bytes does not match its count", ErrCorrupt, swapFile, len(body))
	}
	n := int(binary.BigEndian.Uint32(body))
	bases := make([]int64, n)
	for i := range bases {
		bases[i] = int64(binary.BigEndian.Uint64(body[4+8*i:]))
		if bases[i] < 0 {
			return nil, fmt.Errorf("%w: %s: negative base %d", ErrCorrupt, swapFile, bases[i])
		}
	}
	return bases, nil
}

// recoverSwap is open's first step: it finishes a committed swap or
// discards an uncommitted one, and reports what it did.
func (l *Log) recoverSwap() error {
	fsys, dir := l.opts.FS, l.dir
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	data, committed, err := readFile(fsys, filepath.Join(dir, swapFile))
	if err != nil {
		return err
	}
	if !committed {
		changed := false
		for _, name := range names {
			if strings.HasSuffix(name, cleanedSuffix) {
				if err := fsys.Remove(filepath.Join(dir, name)); err != nil {
					return err
				}
				l.recovery.RemovedFiles = append(l.recovery.RemovedFiles, name)
				changed = true
			}
		}
		if changed {
			return fsys.SyncDir(dir)
		}
		return nil
	}
	bases, err := decodeSwap(data)
	if err != nil {
		return err
	}
	for _, base := range bases {
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			name := filepath.Join(dir, segmentName(base, suffix))
			err := fsys.Rename(name+cleanedSuffix, name)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	if err := fsys.SyncDir(dir); err != nil {
		return err
	}
	if err := fsys.Remove(filepath.Join(dir, swapFile)); err != nil {
		return err
	}
	l.recovery.CompletedRewrite = bases
	return fsys.SyncDir(dir)
}
