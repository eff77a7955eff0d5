package tiering

import (
	"fmt"
	"hash/crc32"
	"io"

	"github.com/strata-log/strata/record"
)

// objectWriter streams checked batches into a cold segment object in the
// layout EncodeSegment writes (log bytes, footer, producer snapshot,
// trailer), for objects built from batches rather than from a local
// segment: the cold cleaner's. Batches must come in offset order; a
// compacted range may leave gaps between them, so the object's base and
// last offsets are its first batch's base and its last batch's last.
type objectWriter struct {
	w           io.Writer
	crc         hashWriter
	t           Trailer
	entries     []IndexEntry
	lastIndexed int64
	next        int64 // offset after the last batch written, -1 before one
}

type hashWriter interface {
	io.Writer
	Sum32() uint32
}

func newObjectWriter(w io.Writer) *objectWriter {
	return &objectWriter{
		w:           w,
		crc:         crc32.New(castagnoli),
		t:           Trailer{Version: segmentVersion, MinTs: -1, MaxTs: -1},
		lastIndexed: -coldIndexInterval,
		next:        -1,
	}
}

// add appends one batch, which must have passed record.Next's checks.
func (o *objectWriter) add(b record.Batch) error {
	if o.next >= 0 && b.BaseOffset() < o.next {
		return fmt.Errorf("tiering: batch at offset %d after offset %d: batches must grow", b.BaseOffset(), o.next-1)
	}
	if o.next < 0 {
		o.t.BaseOffset = b.BaseOffset()
	}
	if b.LastOffset()-o.t.BaseOffset > int64(^uint32(0)) || o.t.LogLen+int64(len(b)) > int64(^uint32(0)) {
		return fmt.Errorf("tiering: batch at offset %d does not fit one object's index", b.BaseOffset())
	}
	lo, hi := batchTimes(b)
	if o.t.MinTs < 0 || lo < o.t.MinTs {
		o.t.MinTs = lo
	}
	o.t.MaxTs = max(o.t.MaxTs, hi)
	if o.t.LogLen-o.lastIndexed >= coldIndexInterval {
		o.entries = append(o.entries, IndexEntry{Rel: uint32(b.BaseOffset() - o.t.BaseOffset), Pos: uint32(o.t.LogLen), MaxTs: o.t.MaxTs})
		o.lastIndexed = o.t.LogLen
	}
	if _, err := o.w.Write(b); err != nil {
		return fmt.Errorf("tiering: write segment object: %w", err)
	}
	o.crc.Write(b)
	o.t.LogLen += int64(len(b))
	o.next = b.NextOffset()
	return nil
}

// logLen is the log bytes written so far.
func (o *objectWriter) logLen() int64 { return o.t.LogLen }

// finish writes the footer, the producer snapshot (nil for none) and the
// trailer, and returns the trailer.
func (o *objectWriter) finish(producers []byte) (Trailer, error) {
	if o.next < 0 {
		return Trailer{}, fmt.Errorf("tiering: a segment object needs at least one batch")
	}
	if len(producers) > MaxProducerSnapshot {
		return Trailer{}, fmt.Errorf("tiering: producer snapshot of %d bytes is over the limit of %d", len(producers), MaxProducerSnapshot)
	}
	t := o.t
	t.LastOffset = o.next - 1
	t.Entries = uint32(len(o.entries))
	t.LogCRC = o.crc.Sum32()
	footer := encodeFooter(o.entries)
	t.FooterCRC = crc32.Checksum(footer, castagnoli)
	t.ProducersLen = uint32(len(producers))
	if len(producers) > 0 {
		t.ProducersCRC = crc32.Checksum(producers, castagnoli)
	}
	for _, part := range [][]byte{footer, producers, t.encode()} {
		if _, err := o.w.Write(part); err != nil {
			return Trailer{}, fmt.Errorf("tiering: write segment object: %w", err)
		}
	}
	return t, nil
}
