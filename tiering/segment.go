package tiering

// A cold segment object is one sealed segment, self-describing:
//
//	[0, logLen)                the segment's log bytes, unchanged
//	[logLen, logLen+n*16)      footer: n index entries, each
//	                           rel uint32 | pos uint32 | maxTs int64
//	next producersLen bytes    the producer snapshot (version 2 on)
//	last trailer bytes         trailer (below)
//
// Index entries name the batch at the start of the log and then one every
// coldIndexInterval bytes or so: its offset relative to the base, its
// position, and the largest timestamp of all batches up to and including it
// (so the values never decrease and a binary search finds where a time
// lookup can start). A reader fetches the trailer and footer with two ranged
// reads, then reads batches by position.
//
// The producer snapshot is the state of the partition's idempotent
// producers as of the segment's end, as the broker encodes it (the tiering
// code only carries and checks it): a leader whose local log starts where
// the cold tier ends, or a restored topic, loads it so that a producer's
// retry of a batch the cold tier holds is still recognised. Its length may
// be 0: the uploader had none.
//
// Trailer, big-endian, version 2 (76 bytes):
//
//	magic [8] "STRATSEG" | version u16 | flags u16 | base i64 | last i64 |
//	logLen i64 | entries u32 | minTs i64 | maxTs i64 | logCRC u32 |
//	footerCRC u32 | producersLen u32 | producersCRC u32 | trailerCRC u32
//
// Version 1 (68 bytes, written before producer snapshots) lacks
// producersLen and producersCRC and has no snapshot; it is still read, and
// answers ErrNoProducerSnapshot. A reader tells the versions apart by the
// magic and version where a version 2 trailer would start, falling back to
// version 1 when they are not there.
//
// All CRCs are CRC-32C. logCRC covers the log bytes, footerCRC the footer,
// producersCRC the producer snapshot, trailerCRC the trailer bytes before
// it.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"

	"github.com/strata-log/strata/internal/corrupt"
	"github.com/strata-log/strata/record"
)

const (
	trailerSizeV1     = 68
	trailerSizeV2     = 76
	maxTrailerSize    = trailerSizeV2
	footerEntrySize   = 16
	segmentVersion    = 2
	coldIndexInterval = 64 << 10
	// MaxProducerSnapshot bounds the producer snapshot an object carries,
	// so that a damaged trailer (with a matching CRC) cannot make a reader
	// allocate without limit. A broker's snapshot is far smaller: it
	// remembers a bounded number of producers.
	MaxProducerSnapshot = 64 << 20
)

var (
	segmentMagic = [8]byte{'S', 'T', 'R', 'A', 'T', 'S', 'E', 'G'}
	castagnoli   = crc32.MakeTable(crc32.Castagnoli)
)

// ErrCorrupt marks data from the object store that fails its checks: a bad
// CRC, length or magic, or batches that do not follow on. It is never
// returned as data. Marked as corruption (corrupt.Is).
var ErrCorrupt = corrupt.Mark(errors.New("tiering: corrupt object"))

// ErrNoProducerSnapshot: the cold segment object carries no producer
// snapshot (it was written before objects had one, or its uploader had
// none).
var ErrNoProducerSnapshot = errors.New("tiering: cold segment has no producer snapshot")

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// Trailer is the fixed end of a cold segment object.
type Trailer struct {
	// Version is the object's layout: segmentVersion for objects written
	// now, 1 for objects written before producer snapshots.
	Version    uint16
	BaseOffset int64
	LastOffset int64
	LogLen     int64
	Entries    uint32
	MinTs      int64
	MaxTs      int64
	LogCRC     uint32
	FooterCRC  uint32
	// ProducersLen and ProducersCRC describe the producer snapshot, which
	// follows the footer; a length of 0 means there is none (and always
	// under version 1).
	ProducersLen uint32
	ProducersCRC uint32
}

// FooterLen is the size of the footer the trailer describes.
func (t Trailer) FooterLen() int64 { return int64(t.Entries) * footerEntrySize }

// ProducersPos is where the producer snapshot starts.
func (t Trailer) ProducersPos() int64 { return t.LogLen + t.FooterLen() }

// Size is the size of the trailer itself, which depends on the version.
func (t Trailer) Size() int64 {
	if t.Version == 1 {
		return trailerSizeV1
	}
	return trailerSizeV2
}

// ObjectSize is the size of the whole object.
func (t Trailer) ObjectSize() int64 {
	return t.LogLen + t.FooterLen() + int64(t.ProducersLen) + t.Size()
}

// encode writes a version 2 trailer: objects are only ever written in the
// current layout.
func (t Trailer) encode() []byte {
	b := make([]byte, 0, trailerSizeV2)
	b = append(b, segmentMagic[:]...)
	b = binary.BigEndian.AppendUint16(b, segmentVersion)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(t.BaseOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(t.LastOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(t.LogLen))
	b = binary.BigEndian.AppendUint32(b, t.Entries)
	b = binary.BigEndian.AppendUint64(b, uint64(t.MinTs))
	b = binary.BigEndian.AppendUint64(b, uint64(t.MaxTs))
	b = binary.BigEndian.AppendUint32(b, t.LogCRC)
	b = binary.BigEndian.AppendUint32(b, t.FooterCRC)
	b = binary.BigEndian.AppendUint32(b, t.ProducersLen)
	b = binary.BigEndian.AppendUint32(b, t.ProducersCRC)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// DecodeTrailer checks and decodes the trailer at the end of tail, the
// last bytes of an object of objectSize bytes: at least trailerSizeV1 of
// them, and maxTrailerSize (when the object is that large) for a reader
// that does not know the object's version yet.
func DecodeTrailer(tail []byte, objectSize int64) (Trailer, error) {
	var v2err error
	if len(tail) >= trailerSizeV2 {
		b := tail[len(tail)-trailerSizeV2:]
		if [8]byte(b[:8]) == segmentMagic && binary.BigEndian.Uint16(b[8:]) == 2 {
			t, err := decodeTrailerV2(b, objectSize)
			if err == nil {
				return t, nil
			}
			// A version 1 object whose footer happens to end in what
			// looks like a version 2 trailer is read as version 1 below;
			// if it is not one either, this is the error to report.
			v2err = err
		}
	}
	t, err := decodeTrailerV1(tail, objectSize)
	if err != nil && v2err != nil {
		return Trailer{}, v2err
	}
	return t, err
}

func decodeTrailerV2(b []byte, objectSize int64) (Trailer, error) {
	if sum, want := crc32.Checksum(b[:trailerSizeV2-4], castagnoli), binary.BigEndian.Uint32(b[trailerSizeV2-4:]); sum != want {
		return Trailer{}, corruptf("trailer crc %#08x, stored %#08x", sum, want)
	}
	t := decodeTrailerFields(b)
	t.Version = 2
	t.ProducersLen = binary.BigEndian.Uint32(b[64:])
	t.ProducersCRC = binary.BigEndian.Uint32(b[68:])
	if t.ProducersLen > MaxProducerSnapshot {
		return Trailer{}, corruptf("producer snapshot of %d bytes, the limit is %d", t.ProducersLen, MaxProducerSnapshot)
	}
	return t, checkTrailer(t, objectSize)
}

func decodeTrailerV1(tail []byte, objectSize int64) (Trailer, error) {
	if len(tail) < trailerSizeV1 {
		return Trailer{}, corruptf("trailer of %d bytes, want at least %d", len(tail), trailerSizeV1)
	}
	b := tail[len(tail)-trailerSizeV1:]
	if [8]byte(b[:8]) != segmentMagic {
		return Trailer{}, corruptf("bad segment magic %q", b[:8])
	}
	if sum, want := crc32.Checksum(b[:trailerSizeV1-4], castagnoli), binary.BigEndian.Uint32(b[trailerSizeV1-4:]); sum != want {
		return Trailer{}, corruptf("trailer crc %#08x, stored %#08x", sum, want)
	}
	if v := binary.BigEndian.Uint16(b[8:]); v != 1 {
		return Trailer{}, corruptf("unknown segment version %d", v)
	}
	t := decodeTrailerFields(b)
	t.Version = 1
	return t, checkTrailer(t, objectSize)
}

// decodeTrailerFields reads the fields both versions share, at the same
// places.
func decodeTrailerFields(b []byte) Trailer {
	return Trailer{
		BaseOffset: int64(binary.BigEndian.Uint64(b[12:])),
		LastOffset: int64(binary.BigEndian.Uint64(b[20:])),
		LogLen:     int64(binary.BigEndian.Uint64(b[28:])),
		Entries:    binary.BigEndian.Uint32(b[36:]),
		MinTs:      int64(binary.BigEndian.Uint64(b[40:])),
		MaxTs:      int64(binary.BigEndian.Uint64(b[48:])),
		LogCRC:     binary.BigEndian.Uint32(b[56:]),
		FooterCRC:  binary.BigEndian.Uint32(b[60:]),
	}
}

func checkTrailer(t Trailer, objectSize int64) error {
	switch {
	case t.BaseOffset < 0 || t.LastOffset < t.BaseOffset:
		return corruptf("offsets %d..%d", t.BaseOffset, t.LastOffset)
	case t.LogLen < record.HeaderSize || t.LogLen > objectSize || t.Entries == 0:
		return corruptf("log of %d bytes with %d index entries", t.LogLen, t.Entries)
	case t.ObjectSize() != objectSize:
		return corruptf("trailer describes %d bytes, the object has %d", t.ObjectSize(), objectSize)
	}
	return nil
}

// CheckProducerSnapshot checks the producer snapshot bytes read from where
// the trailer says they are against its length and CRC.
func CheckProducerSnapshot(b []byte, t Trailer) error {
	if t.ProducersLen == 0 {
		return ErrNoProducerSnapshot
	}
	if int64(len(b)) != int64(t.ProducersLen) {
		return corruptf("producer snapshot of %d bytes, the trailer says %d", len(b), t.ProducersLen)
	}
	if sum := crc32.Checksum(b, castagnoli); sum != t.ProducersCRC {
		return corruptf("producer snapshot crc %#08x, stored %#08x", sum, t.ProducersCRC)
	}
	return nil
}

// IndexEntry locates one batch of a cold segment.
type IndexEntry struct {
	Rel   uint32 // offset relative to the segment base
	Pos   uint32 // position in the log bytes
	MaxTs int64  // largest timestamp up to and including this batch
}

// Footer is a cold segment's index.
type Footer struct {
	Base    int64
	Entries []IndexEntry
}

func encodeFooter(entries []IndexEntry) []byte {
	b := make([]byte, 0, len(entries)*footerEntrySize)
	for _, e := range entries {
		b = binary.BigEndian.AppendUint32(b, e.Rel)
		b = binary.BigEndian.AppendUint32(b, e.Pos)
		b = binary.BigEndian.AppendUint64(b, uint64(e.MaxTs))
	}
	return b
}

// DecodeFooter checks the footer bytes against the trailer and decodes them.
func DecodeFooter(b []byte, t Trailer) (*Footer, error) {
	if int64(len(b)) != t.FooterLen() {
		return nil, corruptf("footer of %d bytes, the trailer says %d", len(b), t.FooterLen())
	}
	if sum := crc32.Checksum(b, castagnoli); sum != t.FooterCRC {
		return nil, corruptf("footer crc %#08x, stored %#08x", sum, t.FooterCRC)
	}
	f := &Footer{Base: t.BaseOffset, Entries: make([]IndexEntry, t.Entries)}
	for i := range f.Entries {
		e := IndexEntry{
			Rel:   binary.BigEndian.Uint32(b[i*footerEntrySize:]),
			Pos:   binary.BigEndian.Uint32(b[i*footerEntrySize+4:]),
			MaxTs: int64(binary.BigEndian.Uint64(b[i*footerEntrySize+8:])),
		}
		if i == 0 && (e.Rel != 0 || e.Pos != 0) {
			return nil, corruptf("first index entry %+v does not name the first batch", e)
		}
		if i > 0 {
			p := f.Entries[i-1]
			if e.Rel <= p.Rel || e.Pos <= p.Pos || e.MaxTs < p.MaxTs {
				return nil, corruptf("index entry %d %+v out of order after %+v", i, e, p)
			}
		}
		if int64(e.Pos) >= t.LogLen || t.BaseOffset+int64(e.Rel) > t.LastOffset {
			return nil, corruptf("index entry %d %+v outside the segment", i, e)
		}
		f.Entries[i] = e
	}
	return f, nil
}

// PositionFor returns the position of the last indexed batch at or before
// offset: where a scan for offset starts.
func (f *Footer) PositionFor(offset int64) int64 {
	rel := offset - f.Base
	i := sort.Search(len(f.Entries), func(i int) bool { return int64(f.Entries[i].Rel) > rel })
	return int64(f.Entries[max(i-1, 0)].Pos)
}

// PositionForTime returns the position of the last indexed batch whose
// running maximum timestamp is below ts: every batch before it is older than
// ts, so a scan for the first record at or after ts starts there.
func (f *Footer) PositionForTime(ts int64) int64 {
	i := sort.Search(len(f.Entries), func(i int) bool { return f.Entries[i].MaxTs >= ts })
	return int64(f.Entries[max(i-1, 0)].Pos)
}

// EncodeSegment writes the cold object of the local segment whose log bytes
// are src[0:size] to w, checking every batch on the way (length, CRC, and
// that offsets follow on from base, the segment's base offset): a damaged
// local segment is refused, not uploaded. Batches that end below from are
// left out (the cold tier has them already); from must fall on a batch
// boundary. producers is the producer snapshot as of the segment's end, or
// nil for none. It returns the trailer written.
func EncodeSegment(w io.Writer, src io.ReaderAt, size, base, from int64, producers []byte) (Trailer, error) {
	if len(producers) > MaxProducerSnapshot {
		return Trailer{}, fmt.Errorf("tiering: producer snapshot of %d bytes is over the limit of %d", len(producers), MaxProducerSnapshot)
	}
	t := Trailer{Version: segmentVersion, BaseOffset: max(base, from), MinTs: -1, MaxTs: -1}
	logCRC := crc32.New(castagnoli)
	out := io.MultiWriter(w, logCRC)
	in := bufio.NewReaderSize(io.NewSectionReader(src, 0, size), 1<<20)
	var entries []IndexEntry
	var batch []byte
	next, lastIndexed := base, int64(-coldIndexInterval)
	for pos := int64(0); pos < size; {
		head, err := in.Peek(record.LengthOffset)
		if err != nil {
			return Trailer{}, fmt.Errorf("tiering: local segment %d: %d bytes at position %d are not a batch: %w", base, size-pos, pos, err)
		}
		n, err := record.PeekSize(head)
		if err != nil || pos+int64(n) > size {
			return Trailer{}, fmt.Errorf("tiering: local segment %d: bad batch length at position %d: %v", base, pos, err)
		}
		if cap(batch) < n {
			batch = make([]byte, n)
		}
		batch = batch[:n]
		if _, err := io.ReadFull(in, batch); err != nil {
			return Trailer{}, fmt.Errorf("tiering: read local segment %d at %d: %w", base, pos, err)
		}
		b, _, err := record.Next(batch)
		if err != nil {
			return Trailer{}, fmt.Errorf("tiering: local segment %d, position %d: %w", base, pos, err)
		}
		if b.BaseOffset() != next {
			return Trailer{}, fmt.Errorf("tiering: local segment %d: batch at position %d has offset %d, want %d", base, pos, b.BaseOffset(), next)
		}
		next = b.NextOffset()
		pos += int64(n)
		if next <= from {
			continue
		}
		if b.BaseOffset() < from {
			return Trailer{}, fmt.Errorf("tiering: local segment %d: offset %d is inside the batch %d..%d, not at a boundary", base, from, b.BaseOffset(), b.LastOffset())
		}
		at := t.LogLen
		lo, hi := batchTimes(b)
		if t.MinTs < 0 || lo < t.MinTs {
			t.MinTs = lo
		}
		t.MaxTs = max(t.MaxTs, hi)
		if at-lastIndexed >= coldIndexInterval {
			entries = append(entries, IndexEntry{Rel: uint32(b.BaseOffset() - t.BaseOffset), Pos: uint32(at), MaxTs: t.MaxTs})
			lastIndexed = at
		}
		if _, err := out.Write(batch); err != nil {
			return Trailer{}, fmt.Errorf("tiering: write segment object: %w", err)
		}
		t.LogLen += int64(n)
	}
	if len(entries) == 0 {
		return Trailer{}, fmt.Errorf("tiering: local segment %d has nothing at or after %d", base, from)
	}
	t.LastOffset = next - 1
	t.Entries = uint32(len(entries))
	t.LogCRC = logCRC.Sum32()
	footer := encodeFooter(entries)
	t.FooterCRC = crc32.Checksum(footer, castagnoli)
	if _, err := w.Write(footer); err != nil {
		return Trailer{}, fmt.Errorf("tiering: write segment object: %w", err)
	}
	t.ProducersLen = uint32(len(producers))
	if len(producers) > 0 {
		t.ProducersCRC = crc32.Checksum(producers, castagnoli)
		if _, err := w.Write(producers); err != nil {
			return Trailer{}, fmt.Errorf("tiering: write segment object: %w", err)
		}
	}
	if _, err := w.Write(t.encode()); err != nil {
		return Trailer{}, fmt.Errorf("tiering: write segment object: %w", err)
	}
	return t, nil
}

// batchTimes is the smallest and largest record time a batch may hold, as
// far as its header tells.
func batchTimes(b record.Batch) (lo, hi int64) {
	if b.TimestampType() == record.LogAppendTime {
		return b.MaxTimestamp(), b.MaxTimestamp()
	}
	return min(b.FirstTimestamp(), b.MaxTimestamp()), b.MaxTimestamp()
}
