package record

import (
	"errors"
	"fmt"

	"github.com/strata-log/strata/internal/corrupt"
)

// Errors returned by this package. Detail (offsets, stored and computed
// values) is added by wrapping, so test with errors.Is, never ==.
//
// Every corruption error wraps ErrCorrupt, so errors.Is(err, ErrCorrupt) (or
// IsCorrupt) tells bytes that can never become a valid batch from bytes that
// are merely incomplete (ErrShortBuffer) or a misuse of the Builder.
var (
	// ErrShortBuffer means the input holds less than one whole batch: the
	// caller may read more bytes and retry. At the end of a segment file it
	// marks a torn write. It is not corruption.
	ErrShortBuffer = errors.New("record: short buffer")

	// ErrCorrupt is the class of every error caused by malformed bytes. It
	// is marked as corruption, so corrupt.Is holds for all of them too.
	ErrCorrupt = corrupt.Mark(errors.New("record: corrupt batch"))

	// ErrBadMagic: the magic byte is not 2.
	ErrBadMagic error = &corruptError{"record: bad magic"}
	// ErrBadLength: the batch length field is out of range or disagrees with
	// the bytes at hand.
	ErrBadLength error = &corruptError{"record: bad batch length"}
	// ErrBadCRC: the stored CRC-32C does not match the bytes.
	ErrBadCRC error = &corruptError{"record: crc mismatch"}
	// ErrBadCount: the record count disagrees with lastOffsetDelta or with
	// the records actually present.
	ErrBadCount error = &corruptError{"record: bad record count"}
	// ErrBadRecord: a record (or the compressed records section) does not
	// decode.
	ErrBadRecord error = &corruptError{"record: bad record"}
	// ErrUnknownCompression: the codec bits name no known codec.
	ErrUnknownCompression error = &corruptError{"record: unknown compression"}
	// ErrTooLarge: the records decompress to more than the allowed limit.
	ErrTooLarge error = &corruptError{"record: decompressed records too large"}

	// ErrNoRecords: Build was called on a Builder with no records; a batch
	// holds at least one. Not corruption: a caller mistake.
	ErrNoRecords = errors.New("record: batch has no records")
	// ErrBatchTooLarge: the encoded batch would exceed MaxBatchSize. Not
	// corruption: the caller should split the batch.
	ErrBatchTooLarge = errors.New("record: batch too large")
)

// IsCorrupt reports whether err comes from malformed bytes.
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

// corruptError is a specific corruption sentinel: it has its own message and
// unwraps to ErrCorrupt, so both errors.Is(err, ErrBadCRC) and
// errors.Is(err, ErrCorrupt) hold for anything wrapping it.
type corruptError struct{ msg string }

func (e *corruptError) Error() string { return e.msg }
func (e *corruptError) Unwrap() error { return ErrCorrupt }

// corruptf wraps a sentinel with detail: "record: crc mismatch: stored ...".
// Only used on error paths, so its allocation never touches a success path.
func corruptf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}
