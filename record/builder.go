package record

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// BatchOptions are the header fields a Builder writes. The zero value means
// producer id 0, epoch 0, sequence 0: start from DefaultBatchOptions for a
// batch from a producer without idempotence.
type BatchOptions struct {
	Compression Compression
	// BaseOffset is usually 0: the leader assigns offsets on append
	// (Batch.SetBaseOffset).
	BaseOffset    int64
	LeaderEpoch   int32
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// TimestampType LogAppendTime sets the attribute bit; record timestamps
	// are still encoded as given, but readers report the batch's
	// maxTimestamp for every record.
	TimestampType TimestampType
}

// DefaultBatchOptions returns options for a batch without a producer
// identity (-1 for id, epoch and sequence), uncompressed, CreateTime.
func DefaultBatchOptions() BatchOptions {
	return BatchOptions{
		Compression:   CompressionNone,
		ProducerID:    NoProducerID,
		ProducerEpoch: -1,
		BaseSequence:  -1,
	}
}

// Builder accumulates records and encodes them as one batch. Records are
// encoded as they are added into a buffer that Reset keeps, so a reused
// Builder does not allocate per record. A Builder is not safe for
// concurrent use. Create it with NewBuilder.
type Builder struct {
	opts    BatchOptions
	records []byte // encoded records, uncompressed
	n       int
	firstTs int64
	maxTs   int64
	// lastDelta is the offset delta of the last record added, or the
	// larger lastOffsetDelta a compacted batch keeps (SetLastOffsetDelta).
	lastDelta int32
	err       error // first Add failure; reported by Build, cleared by Reset
}

// NewBuilder returns an empty Builder writing the given header options.
func NewBuilder(opts BatchOptions) *Builder { return &Builder{opts: opts} }

// Reset empties the Builder for a new batch with new options, keeping its
// buffer.
func (b *Builder) Reset(opts BatchOptions) {
	*b = Builder{opts: opts, records: b.records[:0]}
}

// Len is the number of records added.
func (b *Builder) Len() int { return b.n }

// EstimatedSize is the size of the batch encoded so far, header included,
// before compression: what size-based batching compares against a limit.
func (b *Builder) EstimatedSize() int { return HeaderSize + len(b.records) }

// Add appends a record. r.Offset is ignored: offset deltas follow the order
// of Add. Timestamps are encoded as given (deltas from the first record's
// may be negative). The first record's timestamp becomes the batch's base
// timestamp, the largest its maxTimestamp.
//
// A record that cannot be encoded (a field over MaxBatchSize, more than
// MaxInt32 records) makes the Builder fail: Build reports it.
func (b *Builder) Add(r Record) {
	if b.n == math.MaxInt32 {
		b.fail(fmt.Errorf("%w: more than %d records", ErrBatchTooLarge, math.MaxInt32))
		return
	}
	b.add(int32(b.n), r)
}

// AddAt appends a record at offset delta delta (its offset less the
// batch's base offset), for a compacted batch that keeps the offsets of
// the records it retains and drops the others: deltas must increase
// strictly from one AddAt to the next, or Build fails. A batch is built
// with Add or with AddAt, not both.
func (b *Builder) AddAt(delta int32, r Record) {
	if b.n > 0 && delta <= b.lastDelta || delta < 0 {
		b.fail(fmt.Errorf("record: offset delta %d after %d: deltas must increase", delta, b.lastDelta))
		return
	}
	b.add(delta, r)
}

// SetLastOffsetDelta keeps a batch's original lastOffsetDelta when
// compaction dropped its last records: the batch still covers its whole
// offset range, so a producer's sequence numbers and the offsets after it
// stay where they were. It must be at least the last record's delta.
func (b *Builder) SetLastOffsetDelta(delta int32) {
	if delta < b.lastDelta {
		b.fail(fmt.Errorf("record: lastOffsetDelta %d below the last record's delta %d", delta, b.lastDelta))
		return
	}
	b.lastDelta = delta
}

// fail records the Builder's first error.
func (b *Builder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// add encodes a record with offset delta delta.
func (b *Builder) add(delta int32, r Record) {
	if b.err != nil {
		return
	}
	if b.n == 0 {
		b.firstTs, b.maxTs = r.Timestamp, r.Timestamp
	} else if r.Timestamp > b.maxTs {
		b.maxTs = r.Timestamp
	}
	// Wrapping arithmetic: decoding adds the delta back with the same
	// wrap, so any pair of int64 timestamps round-trips.
	tsDelta := r.Timestamp - b.firstTs

	size := 1 + varintSize(tsDelta) + varintSize(int64(delta)) +
		bytesSize(r.Key) + bytesSize(r.Value) + varintSize(int64(len(r.Headers)))
	for _, h := range r.Headers {
		size += varintSize(int64(len(h.Key))) + len(h.Key) + bytesSize(h.Value)
	}
	if size > MaxBatchSize {
		b.fail(fmt.Errorf("%w: record %d encodes to %d bytes, limit %d", ErrBatchTooLarge, b.n, size, MaxBatchSize))
		return
	}

	buf := slices.Grow(b.records, varintSize(int64(size))+size)
	buf = appendVarint(buf, int64(size))
	buf = append(buf, 0) // attributes
	buf = appendVarint(buf, tsDelta)
	buf = appendVarint(buf, int64(delta))
	buf = appendBytes(buf, r.Key)
	buf = appendBytes(buf, r.Value)
	buf = appendVarint(buf, int64(len(r.Headers)))
	for _, h := range r.Headers {
		buf = appendVarint(buf, int64(len(h.Key)))
		buf = append(buf, h.Key...)
		buf = appendBytes(buf, h.Value)
	}
	b.records = buf
	b.n++
	b.lastDelta = delta
}

// Build encodes the batch into a fresh slice owned by the caller.
func (b *Builder) Build() (Batch, error) {
	batch, _, err := b.AppendTo(make([]byte, 0, b.EstimatedSize()))
	return batch, err
}

// AppendTo encodes the batch onto the end of dst, so a caller can reuse one
// buffer across batches. It returns the batch (a view into the grown dst,
// capacity clipped) and the grown dst. On error dst comes back with its
// original length.
func (b *Builder) AppendTo(dst []byte) (Batch, []byte, error) {
	if b.err != nil {
		return nil, dst, b.err
	}
	if b.n == 0 {
		return nil, dst, ErrNoRecords
	}
	var attrs uint16
	switch b.opts.TimestampType {
	case CreateTime:
	case LogAppendTime:
		attrs |= attrLogAppendTime
	default:
		return nil, dst, fmt.Errorf("record: unknown timestamp type %d", b.opts.TimestampType)
	}
	attrs |= uint16(b.opts.Compression) & attrCompressionMask

	start := len(dst)
	// Every header byte is written below, so growing without zeroing is
	// enough.
	dst = slices.Grow(dst, HeaderSize+len(b.records))[:start+HeaderSize]
	dst, err := appendCompressed(dst, b.opts.Compression, b.records)
	if err != nil {
		return nil, dst[:start], err
	}
	size := len(dst) - start
	if size > MaxBatchSize {
		return nil, dst[:start], fmt.Errorf("%w: %d bytes, limit %d", ErrBatchTooLarge, size, MaxBatchSize)
	}

	h := dst[start:]
	binary.BigEndian.PutUint64(h[offBaseOffset:], uint64(b.opts.BaseOffset))
	binary.BigEndian.PutUint32(h[offBatchLength:], uint32(size-LengthOffset))
	binary.BigEndian.PutUint32(h[offLeaderEpoch:], uint32(b.opts.LeaderEpoch))
	h[offMagic] = Magic
	binary.BigEndian.PutUint16(h[offAttributes:], attrs)
	binary.BigEndian.PutUint32(h[offLastOffsetDelta:], uint32(b.lastDelta))
	binary.BigEndian.PutUint64(h[offFirstTimestamp:], uint64(b.firstTs))
	binary.BigEndian.PutUint64(h[offMaxTimestamp:], uint64(b.maxTs))
	binary.BigEndian.PutUint64(h[offProducerID:], uint64(b.opts.ProducerID))
	binary.BigEndian.PutUint16(h[offProducerEpoch:], uint16(b.opts.ProducerEpoch))
	binary.BigEndian.PutUint32(h[offBaseSequence:], uint32(b.opts.BaseSequence))
	binary.BigEndian.PutUint32(h[offRecordCount:], uint32(b.n))
	batch := Batch(h[:size:size])
	batch.updateCRC() // last: it covers the fields above
	return batch, dst, nil
}

// Encode builds one batch from records.
func Encode(opts BatchOptions, records ...Record) (Batch, error) {
	b := NewBuilder(opts)
	for _, r := range records {
		b.Add(r)
	}
	return b.Build()
}

// bytesSize is the encoded size of a nullable byte field.
func bytesSize(p []byte) int {
	if p == nil {
		return 1 // varint -1
	}
	return varintSize(int64(len(p))) + len(p)
}

// appendBytes appends a nullable byte field: length (-1 for nil), bytes.
func appendBytes(buf, p []byte) []byte {
	if p == nil {
		return appendVarint(buf, -1)
	}
	buf = appendVarint(buf, int64(len(p)))
	return append(buf, p...)
}

// EmptyBatch is the header of a batch whose records compaction removed
// all of: Kafka's log cleaner keeps it when it is an idempotent producer's
// last batch, so that the producer's last sequence survives and a retried
// send is still recognised as a duplicate. It holds no records, covers
// offsets [opts.BaseOffset, opts.BaseOffset+lastOffsetDelta], is
// uncompressed, and carries timestamp ts as both base and max timestamp.
func EmptyBatch(opts BatchOptions, lastOffsetDelta int32, ts int64) (Batch, error) {
	if lastOffsetDelta < 0 {
		return nil, fmt.Errorf("record: lastOffsetDelta %d of an empty batch", lastOffsetDelta)
	}
	var attrs uint16
	switch opts.TimestampType {
	case CreateTime:
	case LogAppendTime:
		attrs |= attrLogAppendTime
	default:
		return nil, fmt.Errorf("record: unknown timestamp type %d", opts.TimestampType)
	}
	h := make(Batch, HeaderSize)
	binary.BigEndian.PutUint64(h[offBaseOffset:], uint64(opts.BaseOffset))
	binary.BigEndian.PutUint32(h[offBatchLength:], uint32(HeaderSize-LengthOffset))
	binary.BigEndian.PutUint32(h[offLeaderEpoch:], uint32(opts.LeaderEpoch))
	h[offMagic] = Magic
	binary.BigEndian.PutUint16(h[offAttributes:], attrs)
	binary.BigEndian.PutUint32(h[offLastOffsetDelta:], uint32(lastOffsetDelta))
	binary.BigEndian.PutUint64(h[offFirstTimestamp:], uint64(ts))
	binary.BigEndian.PutUint64(h[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint64(h[offProducerID:], uint64(opts.ProducerID))
	binary.BigEndian.PutUint16(h[offProducerEpoch:], uint16(opts.ProducerEpoch))
	binary.BigEndian.PutUint32(h[offBaseSequence:], uint32(opts.BaseSequence))
	binary.BigEndian.PutUint32(h[offRecordCount:], 0)
	h.updateCRC()
	return h, nil
}
