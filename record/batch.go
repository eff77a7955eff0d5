package record

import (
	"encoding/binary"
	"hash/crc32"
)

// Layout constants. See the package documentation for the full header.
const (
	// HeaderSize is the size of the fixed batch header; records follow it.
	HeaderSize = 61
	// Magic is the only batch format version this package reads and writes.
	Magic = 2
	// LengthOffset is how many bytes of a batch tell its total size:
	// baseOffset and batchLength.
	LengthOffset = 12
	// NoProducerID marks a batch from a producer without idempotence. The
	// same -1 means "none" for the producer epoch and base sequence.
	NoProducerID = -1
	// MaxBatchSize bounds a batch's total size. Kafka's own limit is the
	// int32 length field; Strata refuses anything larger than this so a
	// corrupt length field is reported as corruption instead of making a
	// reader wait for (or allocate) gigabytes. Real batches are far smaller
	// (max.message.bytes defaults to about 1 MiB).
	MaxBatchSize = 256 << 20
	// NoTimestamp is the timestamp of a record that carries none (Kafka's
	// RecordBatch.NO_TIMESTAMP).
	NoTimestamp = -1
)

// Field offsets within the header.
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21 // the CRC covers everything from here on
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57
)

// minBatchLength is the smallest valid batchLength: a header with no records.
const minBatchLength = HeaderSize - LengthOffset

// castagnoli is the CRC-32C table; crc32 uses the CPU's CRC instructions
// (SSE4.2, ARMv8) for it, which is what makes Validate cheap.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Batch is a view over one encoded batch; it owns no memory of its own.
//
// The accessors are plain big-endian loads: they never allocate and check
// nothing, so on a slice shorter than HeaderSize they panic. Call Validate
// first, or take the batch from Next, which validates it.
type Batch []byte

// BaseOffset is the offset of the batch's first record.
func (b Batch) BaseOffset() int64 { return int64(binary.BigEndian.Uint64(b[offBaseOffset:])) }

// SetBaseOffset rewrites the base offset in place. The field lies outside
// the CRC, which is what lets a leader assign offsets without re-hashing.
func (b Batch) SetBaseOffset(off int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(off))
}

// BatchLength is the length field: the bytes after it.
func (b Batch) BatchLength() int32 { return int32(binary.BigEndian.Uint32(b[offBatchLength:])) }

// Size is the batch's total size in bytes according to its length field.
func (b Batch) Size() int { return LengthOffset + int(b.BatchLength()) }

// LeaderEpoch is the partition leader epoch stamped on the batch.
func (b Batch) LeaderEpoch() int32 { return int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])) }

// SetLeaderEpoch rewrites the leader epoch in place; it lies outside the CRC.
func (b Batch) SetLeaderEpoch(e int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(e))
}

// Magic is the format version byte; valid batches have 2.
func (b Batch) Magic() int8 { return int8(b[offMagic]) }

// CRC is the stored CRC-32C of bytes [21:].
func (b Batch) CRC() uint32 { return binary.BigEndian.Uint32(b[offCRC:]) }

// Attributes is the raw attributes field.
func (b Batch) Attributes() int16 { return int16(binary.BigEndian.Uint16(b[offAttributes:])) }

// Compression is the codec of the records section.
func (b Batch) Compression() Compression { return Compression(b.Attributes() & attrCompressionMask) }

// TimestampType says whether record timestamps are CreateTime or
// LogAppendTime.
func (b Batch) TimestampType() TimestampType {
	if b.Attributes()&attrLogAppendTime != 0 {
		return LogAppendTime
	}
	return CreateTime
}

// IsTransactional reports bit 4 of the attributes.
func (b Batch) IsTransactional() bool { return b.Attributes()&attrTransactional != 0 }

// IsControl reports bit 5 of the attributes (transaction markers).
func (b Batch) IsControl() bool { return b.Attributes()&attrControl != 0 }

// LastOffsetDelta is the offset delta of the last record: NumRecords - 1.
func (b Batch) LastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
}

// LastOffset is the offset of the batch's last record.
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }

// NextOffset is the offset that follows the batch.
func (b Batch) NextOffset() int64 { return b.LastOffset() + 1 }

// FirstTimestamp is the base timestamp: the first record's, in ms.
func (b Batch) FirstTimestamp() int64 {
	return int64(binary.BigEndian.Uint64(b[offFirstTimestamp:]))
}

// MaxTimestamp is the largest record timestamp, or the log append time.
func (b Batch) MaxTimestamp() int64 { return int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])) }

// ProducerID is the idempotent producer's id, or NoProducerID.
func (b Batch) ProducerID() int64 { return int64(binary.BigEndian.Uint64(b[offProducerID:])) }

// ProducerEpoch is the producer's epoch, or -1.
func (b Batch) ProducerEpoch() int16 {
	return int16(binary.BigEndian.Uint16(b[offProducerEpoch:]))
}

// BaseSequence is the producer sequence of the first record, or -1.
func (b Batch) BaseSequence() int32 { return int32(binary.BigEndian.Uint32(b[offBaseSequence:])) }

// NumRecords is the record count field.
func (b Batch) NumRecords() int32 { return int32(binary.BigEndian.Uint32(b[offRecordCount:])) }

// SetLogAppendTime marks the batch LogAppendTime with time ts (ms): it sets
// the timestamp-type bit and maxTimestamp, then recomputes the CRC in place.
// Records are not re-encoded: readers give every record the batch's
// maxTimestamp when the bit is set, which is why this is cheap.
func (b Batch) SetLogAppendTime(ts int64) {
	attrs := uint16(b.Attributes()) | attrLogAppendTime
	binary.BigEndian.PutUint16(b[offAttributes:], attrs)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	b.updateCRC()
}

// SetProducer stamps the batch with an idempotent producer's identity and
// the sequence number of its first record, then recomputes the CRC in place.
// A producer fixes these only when it first sends a batch (its sequence
// depends on what went before), after the records were encoded; this is
// cheaper than encoding them again.
func (b Batch) SetProducer(id int64, epoch int16, baseSequence int32) {
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(id))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(baseSequence))
	b.updateCRC()
}

// updateCRC stores the CRC-32C of bytes [21:].
func (b Batch) updateCRC() {
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
}

// Validate checks the batch without decoding its records: the slice holds
// exactly one batch of the size its length field says, the magic is 2, the
// CRC matches, the record count fits lastOffsetDelta (at most
// lastOffsetDelta+1 records: fewer once the batch was compacted) and the
// codec is known. Since the CRC covers every byte after it, a batch that passes was
// written as it is now; ValidateRecords also checks that the records decode.
//
// It does not allocate on success. Errors wrap ErrCorrupt.
func (b Batch) Validate() error { return b.checkHeader(true) }

// CheckLayout is Validate without the CRC, for a batch whose CRC its holder
// verified already: it still proves the batch is one whole batch of the
// size it says, so a log it is written to stays readable.
func (b Batch) CheckLayout() error { return b.checkHeader(false) }

// checkHeader is Validate, with or without the CRC (the part of it whose
// cost grows with the batch).
func (b Batch) checkHeader(crc bool) error {
	if len(b) < HeaderSize {
		return corruptf(ErrBadLength, "batch of %d bytes is shorter than the %d-byte header", len(b), HeaderSize)
	}
	if size := b.Size(); size != len(b) {
		return corruptf(ErrBadLength, "length field says %d bytes, batch has %d", size, len(b))
	}
	if m := b.Magic(); m != Magic {
		return corruptf(ErrBadMagic, "got %d, want %d", m, Magic)
	}
	if crc {
		if stored, computed := b.CRC(), crc32.Checksum(b[offAttributes:], castagnoli); stored != computed {
			return corruptf(ErrBadCRC, "stored 0x%08x computed 0x%08x", stored, computed)
		}
	}
	// A compacted batch keeps its offset range but may hold fewer records
	// (down to none: the header an idempotent producer's last batch leaves),
	// so the count is bounded by the range, not equal to it.
	if n, lod := b.NumRecords(), b.LastOffsetDelta(); n < 0 || lod < 0 || n > lod+1 {
		return corruptf(ErrBadCount, "%d records with lastOffsetDelta %d", n, lod)
	}
	if c := b.Compression(); !c.Valid() {
		return corruptf(ErrUnknownCompression, "codec %d", int(c))
	}
	return nil
}
