package hotlog

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/record"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"

	// noTimestamp marks a segment without batches, as Kafka's -1 does for a
	// batch without timestamps.
	noTimestamp = -1
)

// segmentName is the file name of a segment part: the base offset in 20
// digits, so that sorting by name sorts by offset.
func segmentName(base int64, suffix string) string {
	return fmt.Sprintf("%020d%s", base, suffix)
}

// parseSegmentName returns the base offset of a file named like segmentName.
func parseSegmentName(name, suffix string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	return base, err == nil && base >= 0
}

// segment is one log file of consecutive batches and its two indexes.
//
// Readers see only the first size bytes, which hold whole batches; the
// appender writes past them and publishes a new size after the write, so a
// reader never sees a partial batch and needs no lock against the appender.
type segment struct {
	base int64
	path string
	// file is the log file, open only while something uses it or the
	// FileCache keeps it: take it with open and give it back with done.
	file  *cachedFile
	index *sparseIndex[offsetEntry]
	times *sparseIndex[timeEntry]

	size  atomic.Int64 // bytes of whole batches
	next  atomic.Int64 // offset after the last batch; base when empty
	maxTs atomic.Int64 // largest batch timestamp; noTimestamp when empty
	minTs atomic.Int64 // smallest batch timestamp; noTimestamp when empty
	// sealed: no more appends (a roll made a newer segment active). synced:
	// and its log and indexes are fsynced, which the flusher does after the
	// roll, off the append path. Only then is it sealed to the outside
	// (SegmentInfo.Sealed): uploadable, deletable by retention.
	sealed atomic.Bool
	synced atomic.Bool

	// Owned by the appender (Log.appendMu).
	indexedPos int64     // position of the last indexed batch, -1 if none
	created    time.Time // first append, or when the log was opened
}

func newSegment(fsys FS, files *FileCache, dir string, base int64, file File) *segment {
	path := filepath.Join(dir, segmentName(base, logSuffix))
	s := &segment{
		base:       base,
		path:       path,
		file:       files.adopt(fsys, path, file),
		index:      newOffsetIndex(fsys, filepath.Join(dir, segmentName(base, indexSuffix))),
		times:      newTimeIndex(fsys, filepath.Join(dir, segmentName(base, timeIndexSuffix))),
		indexedPos: -1,
	}
	s.next.Store(base)
	s.maxTs.Store(noTimestamp)
	s.minTs.Store(noTimestamp)
	return s
}

// createSegment makes an empty segment at base, replacing stale files there.
func createSegment(fsys FS, files *FileCache, dir string, base int64) (*segment, error) {
	f, err := fsys.OpenFile(filepath.Join(dir, segmentName(base, logSuffix)), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	s := newSegment(fsys, files, dir, base, f)
	if err := s.index.reset(nil); err != nil {
		s.close()
		return nil, err
	}
	if err := s.times.reset(nil); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// openSegmentFile opens an existing segment's log file; the caller recovers
// its state.
func openSegmentFile(fsys FS, files *FileCache, dir string, base int64) (*segment, error) {
	f, err := fsys.OpenFile(filepath.Join(dir, segmentName(base, logSuffix)), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return newSegment(fsys, files, dir, base, f), nil
}

// open returns the segment's log file, reopening it if the cache closed it;
// the caller gives it back with done.
func (s *segment) open() (File, error) { return s.file.acquire() }

// done gives back a file taken with open.
func (s *segment) done() { s.file.release() }

func (s *segment) empty() bool { return s.next.Load() == s.base }

// lastOffset is the offset of the last record, or base-1 when empty.
func (s *segment) lastOffset() int64 { return s.next.Load() - 1 }

// fits reports whether a batch of n bytes ending at offset last can go into
// this segment: positions and relative offsets are 32-bit.
func (s *segment) fits(n int, last int64, limit int64) bool {
	return s.size.Load()+int64(n) <= limit && last-s.base <= math.MaxUint32
}

// track records a batch written at pos: indexes, timestamps, next offset and,
// last, the size readers may see.
func (s *segment) track(b record.Batch, pos int64, interval int) {
	ts := batchMaxTimestamp(b)
	if cur := s.maxTs.Load(); ts > cur || cur == noTimestamp {
		s.maxTs.Store(ts)
	}
	if lo := batchMinTimestamp(b); s.minTs.Load() == noTimestamp || lo < s.minTs.Load() {
		s.minTs.Store(lo)
	}
	if s.indexedPos < 0 || pos-s.indexedPos >= int64(interval) {
		rel := uint32(b.BaseOffset() - s.base)
		s.index.add(offsetEntry{rel: rel, pos: uint32(pos)})
		s.times.add(timeEntry{maxTs: s.maxTs.Load(), rel: rel})
		s.indexedPos = pos
	}
	s.next.Store(b.NextOffset())
	s.size.Store(pos + int64(b.Size()))
}

func batchMaxTimestamp(b record.Batch) int64 { return b.MaxTimestamp() }

// batchMinTimestamp is the batch's first timestamp, or its append time when
// the broker stamped one (record timestamps are then replaced by it).
func batchMinTimestamp(b record.Batch) int64 {
	if b.TimestampType() == record.LogAppendTime {
		return b.MaxTimestamp()
	}
	return min(b.FirstTimestamp(), b.MaxTimestamp())
}

// readHeader reads the fixed header of the batch at pos, which must be below
// the published size, from f, the segment's open file.
func (s *segment) readHeader(f File, pos int64) (record.Batch, error) {
	h := make([]byte, record.HeaderSize)
	if _, err := f.ReadAt(h, pos); err != nil {
		return nil, fmt.Errorf("hotlog: read batch header at %s:%d: %w", s.path, pos, err)
	}
	return record.Batch(h), nil
}

// position returns the file position of the batch holding offset, walking
// batch headers forward from the nearest index entry. An offset at or past
// the segment's end gives the end position. f is the segment's open file.
func (s *segment) position(f File, offset int64, size int64) (int64, error) {
	if offset <= s.base {
		return 0, nil
	}
	pos := int64(0)
	rel := offset - s.base
	if e, ok := s.index.search(func(e offsetEntry) bool { return int64(e.rel) <= rel }); ok {
		pos = int64(e.pos)
	}
	for pos < size {
		h, err := s.readHeader(f, pos)
		if err != nil {
			return 0, err
		}
		if h.LastOffset() >= offset {
			return pos, nil
		}
		pos += int64(h.Size())
	}
	return size, nil
}

// scanBufferBytes is how much a scan reads at a time.
const scanBufferBytes = 1 << 20

// scan reads and fully validates the batches from pos to end, calling fn for
// each, and stops at the first batch that is torn, corrupt or starts before
// the one before it ends (expect is the lowest base offset the first batch
// may have). Batches may leave gaps: a compacted log has them. It
// returns the position after the last good batch and the damage that stopped
// it short of end, if any; err is an I/O failure.
func (s *segment) scan(pos, end, expect int64, fn func(b record.Batch, pos int64)) (stop int64, damage, err error) {
	f, err := s.open()
	if err != nil {
		return pos, nil, err
	}
	defer s.done()
	// No more than the bytes to scan: a start recovers thousands of logs
	// whose tail past the last index entry is a few KiB or nothing, and a
	// whole buffer each (allocated and cleared) was most of its CPU.
	buf := make([]byte, max(min(scanBufferBytes, end-pos), 0))
	bufPos, n := pos, 0 // buf[:n] holds the file from bufPos
	for pos < end {
		b, _, err := record.Next(buf[pos-bufPos : n])
		if errors.Is(err, record.ErrShortBuffer) {
			size, perr := record.PeekSize(buf[pos-bufPos : n])
			if bufPos+int64(n) >= end || (perr == nil && pos+int64(size) > end) {
				return pos, fmt.Errorf("torn batch at position %d: only %d bytes left", pos, end-pos), nil
			}
			// Keep the unread bytes, growing buf if one batch needs more,
			// and fill the rest from the file.
			n = copy(buf, buf[pos-bufPos:n])
			bufPos = pos
			if perr == nil && size > len(buf) {
				grown := make([]byte, size)
				copy(grown, buf[:n])
				buf = grown
			}
			m := int(min(int64(len(buf)-n), end-(bufPos+int64(n))))
			if _, err := f.ReadAt(buf[n:n+m], bufPos+int64(n)); err != nil {
				return pos, nil, fmt.Errorf("hotlog: read %s at %d: %w", s.path, bufPos+int64(n), err)
			}
			n += m
			continue
		}
		if err != nil {
			return pos, fmt.Errorf("bad batch at position %d: %w", pos, err), nil
		}
		// A batch may start past the one before (a compacted log's gap:
		// the cleaner dropped whole batches, or the leader a follower
		// copied had), never before it ends.
		if b.BaseOffset() < expect {
			return pos, fmt.Errorf("batch at position %d has base offset %d, below %d where the one before ends", pos, b.BaseOffset(), expect), nil
		}
		if fn != nil {
			fn(b, pos)
		}
		expect = b.NextOffset()
		pos += int64(len(b))
	}
	return pos, nil, nil
}

// sync makes the segment durable: log bytes and both indexes. A log file
// whose every write is already fsynced is not fsynced again.
func (s *segment) sync() error {
	if err := s.file.sync(false); err != nil {
		return err
	}
	return s.persistIndexes()
}

// truncate cuts the log file to size bytes.
func (s *segment) truncate(size int64) error {
	f, err := s.open()
	if err != nil {
		return err
	}
	defer s.done()
	err = f.Truncate(size)
	s.file.wrote() // even if it failed: the file may have changed
	return err
}

// fileSize is the size of the log file on disk.
func (s *segment) fileSize() (int64, error) {
	f, err := s.open()
	if err != nil {
		return 0, err
	}
	defer s.done()
	return f.Size()
}

// persistIndexes writes and fsyncs both indexes.
func (s *segment) persistIndexes() error {
	if err := s.index.persist(true); err != nil {
		return err
	}
	return s.times.persist(true)
}

// durable reports whether the segment is sealed and fsynced.
func (s *segment) durable() bool { return s.sealed.Load() && s.synced.Load() }

// close closes the segment's log file for good (the index files are open
// only while written).
func (s *segment) close() error { return s.file.close() }

// remove deletes the segment's files; the caller fsyncs the directory.
func (s *segment) remove(fsys FS) error {
	s.close()
	var first error
	for _, p := range []string{s.path, s.index.path, s.times.path} {
		if err := fsys.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) && first == nil {
			first = err
		}
	}
	return first
}

// SegmentInfo describes one segment, for the tiering uploader and describe.
type SegmentInfo struct {
	BaseOffset    int64
	LastOffset    int64 // BaseOffset-1 when empty
	MinTimestamp  int64 // -1 when empty
	MaxTimestamp  int64 // -1 when empty
	Size          int64
	Sealed        bool   // sealed segments are fsynced and never change again
	Path          string // the .log file
	IndexPath     string
	TimeIndexPath string
}

func (s *segment) info() SegmentInfo {
	return SegmentInfo{
		BaseOffset:    s.base,
		LastOffset:    s.lastOffset(),
		MinTimestamp:  s.minTimestamp(),
		MaxTimestamp:  s.maxTs.Load(),
		Size:          s.size.Load(),
		Sealed:        s.durable(),
		Path:          s.path,
		IndexPath:     s.index.path,
		TimeIndexPath: s.times.path,
	}
}

// SegmentReader reads one segment's log bytes.
type SegmentReader interface {
	io.ReaderAt
	io.Closer
}

// OpenSegment opens the segment that begins at base for reading, through
// the log's file system, for a copy of it (an upload to the cold tier). The
// reader stays valid if retention deletes the segment meanwhile.
func (l *Log) OpenSegment(base int64) (SegmentReader, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed {
		return nil, ErrClosed
	}
	for _, s := range l.mu.segments {
		if s.base == base {
			f, err := l.opts.FS.OpenFile(s.path, os.O_RDONLY, 0)
			if err != nil {
				return nil, fmt.Errorf("hotlog: open segment %d: %w", base, err)
			}
			return f, nil
		}
	}
	return nil, fmt.Errorf("hotlog: no segment begins at %d", base)
}
