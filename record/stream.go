package record

import "encoding/binary"

// PeekSize returns the total size of the batch at the start of buf, read
// from its first LengthOffset bytes, so a reader knows how much to read.
// It returns ErrShortBuffer when buf is shorter than that, and ErrBadLength
// when the length field is below a header's size or above MaxBatchSize:
// such a size can never lead to a valid batch.
func PeekSize(buf []byte) (int, error) {
	if len(buf) < LengthOffset {
		return 0, ErrShortBuffer
	}
	n := int32(binary.BigEndian.Uint32(buf[offBatchLength:]))
	if n < minBatchLength || int64(n) > MaxBatchSize-LengthOffset {
		return 0, corruptf(ErrBadLength, "length field %d out of range [%d, %d]", n, minBatchLength, MaxBatchSize-LengthOffset)
	}
	return LengthOffset + int(n), nil
}

// Next splits the first batch off buf, a stream of concatenated batches as
// stored in a segment file. The batch aliases buf (its capacity is clipped,
// so appending to it cannot overwrite rest); rest is what follows it.
//
// ErrShortBuffer means buf ends inside the batch: a reader may read more, and
// at the end of a file it marks a torn write. Any other error wraps
// ErrCorrupt: bad length, bad magic, CRC mismatch or a failed Validate; those
// bytes can never become a valid batch, however many follow.
//
// The magic byte is checked as soon as it is present, before the whole batch
// is, so garbage is reported as corruption early rather than as a short
// buffer waiting for bytes that will never make it valid.
func Next(buf []byte) (batch Batch, rest []byte, err error) {
	return next(buf, true)
}

// NextVerified is Next for bytes whose batches Next has validated already,
// such as a replicated chunk split again to write the batches it checked:
// it checks each batch's layout (CheckLayout) but not its CRC, the part of
// the check whose cost grows with the batch.
func NextVerified(buf []byte) (batch Batch, rest []byte, err error) {
	return next(buf, false)
}

func next(buf []byte, crc bool) (batch Batch, rest []byte, err error) {
	size, err := PeekSize(buf)
	if err != nil {
		return nil, buf, err
	}
	if len(buf) > offMagic && int8(buf[offMagic]) != Magic {
		return nil, buf, corruptf(ErrBadMagic, "got %d, want %d", int8(buf[offMagic]), Magic)
	}
	if len(buf) < size {
		return nil, buf, ErrShortBuffer
	}
	batch = Batch(buf[:size:size])
	if err := batch.checkHeader(crc); err != nil {
		return nil, buf, err
	}
	return batch, buf[size:], nil
}
