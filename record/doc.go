// Package record owns Strata's batch format: Kafka's RecordBatch v2 (magic 2),
// byte for byte, so a later Kafka-protocol listener can serve stored batches
// without re-encoding them.
//
// A batch is the unit of write, replication, storage and fetch. Its fixed
// 61-byte header is big-endian:
//
//	offset size field
//	     0    8 baseOffset            first offset of the batch (assigned by the leader)
//	     8    4 batchLength           bytes after this field: total size = 12 + batchLength
//	    12    4 partitionLeaderEpoch  epoch of the leader that appended it
//	    16    1 magic                 always 2
//	    17    4 crc                   CRC-32C (Castagnoli) of bytes [21:end]
//	    21    2 attributes            bits 0-2 codec, bit 3 timestamp type,
//	                                  bit 4 transactional, bit 5 control
//	    23    4 lastOffsetDelta       number of records - 1
//	    27    8 baseTimestamp         first record's timestamp, ms since epoch
//	    35    8 maxTimestamp          largest record timestamp (or the log append time)
//	    43    8 producerId            -1 when the producer is not idempotent
//	    51    2 producerEpoch         -1 when none
//	    53    4 baseSequence          -1 when none
//	    57    4 records count
//	    61      records               compressed as a whole when the codec is not none
//
// Base offset, length and leader epoch sit before the CRC on purpose: a leader
// assigns offsets and stamps its epoch with [Batch.SetBaseOffset] and
// [Batch.SetLeaderEpoch] without recomputing the checksum.
//
// Each record uses Kafka's zigzag varints (protobuf sint32/sint64):
//
//	length varint (bytes after it), attributes int8 (unused, 0),
//	timestampDelta varlong (vs baseTimestamp), offsetDelta varint (vs baseOffset),
//	keyLength varint (-1 = null), key, valueLength varint (-1 = null), value,
//	headers count varint, then per header:
//	keyLength varint, key (string), valueLength varint (-1 = null), value.
//
// The package has three sides:
//
//   - [Batch] is a view over encoded bytes: header accessors that never
//     allocate, [Batch.Validate] (lengths and CRC, no record decoding) and
//     record decoding ([Batch.Records], [Batch.All]) and its check without
//     building records ([Batch.ValidateRecordsLimit]; [Batch.CheckRecordTimes]
//     after Validate is what a leader runs before it stores a batch: the
//     same check, handing back the records' timestamps from the same pass).
//   - [Next] and [PeekSize] split a stream of concatenated batches, as stored
//     in a segment file, telling a torn tail ([ErrShortBuffer]) from
//     corruption ([ErrCorrupt]).
//   - [Builder] encodes records into a batch, compressing with gzip, snappy
//     (xerial framing, as Kafka's Java producer), lz4 (frame format) or zstd.
//
// Decompression is always bounded ([MaxDecompressedSize] by default, or the
// limit given to [Batch.RecordsLimit], [Batch.AllLimit] and
// [Batch.ValidateRecordsLimit]) so a small hostile batch cannot expand into
// an unbounded allocation.
//
// Errors: [ErrShortBuffer] means "read more bytes"; every error caused by
// malformed bytes wraps [ErrCorrupt] (test with [IsCorrupt], or with
// internal/corrupt's Is, which holds for every layer's corruption), and names
// the specific problem ([ErrBadCRC], [ErrBadLength], ...) for errors.Is.
package record
