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
	err     error // first Add failure; reported by Build, cleared by Reset
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
	if b.err != nil {
		return
	}
	if b.n == math.MaxInt32 {
		b.err = fmt.Errorf("%w: more than %d records", ErrBatchTooLarge, math.MaxInt32)
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

	size := 1 + varintSize(tsDelta) + varintSize(int64(b.n)) +
		bytesSize(r.Key) + bytesSize(r.Value) + varintSize(int64(len(r.Headers)))
	for _, h := range r.Headers {
		size += varintSize(int64(len(h.Key))) + len(h.Key) + bytesSize(h.Value)
	}
	if size > MaxBatchSize {
		b.err = fmt.Errorf("%w: record %d encodes to %d bytes, limit %d", ErrBatchTooLarge, b.n, size, MaxBatchSize)
		return
	}

	buf := slices.Grow(b.records, varintSize(int64(size))+size)
	buf = appendVarint(buf, int64(size))
	buf = append(buf, 0) // attributes
	buf = appendVarint(buf, tsDelta)
	buf = appendVarint(buf, int64(b.n))
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
	binary.BigEndian.PutUint32(h[offLastOffsetDelta:], uint32(b.n-1))
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
