package hotlog

import (
	"errors"
	"fmt"

	"github.com/strata-log/strata/internal/corrupt"
)

// Errors returned by the log. Callers test for them with errors.Is; the
// returned errors wrap them with detail.
var (
	// ErrClosed: the log was closed; nothing more can be appended or read.
	ErrClosed = errors.New("hotlog: log is closed")
	// ErrLogFailed: an earlier write or fsync failed, so the log refuses appends
	// until it is closed and reopened (which runs recovery). Sticky.
	ErrLogFailed = errors.New("hotlog: log failed on an earlier write or fsync")
	// ErrBatchTooLarge: a batch is larger than Config.MaxBatchBytes.
	ErrBatchTooLarge = errors.New("hotlog: batch too large")
	// ErrInvalidBatch: a batch failed validation (length, magic, CRC, counts).
	// The record package's error is wrapped too, so record.IsCorrupt holds.
	ErrInvalidBatch = errors.New("hotlog: invalid batch")
	// ErrOffsetOutOfRange: an offset below the log start or above the log end.
	// The error is a *RangeError carrying the valid range.
	ErrOffsetOutOfRange = errors.New("hotlog: offset out of range")
	// ErrOffsetGap: a replicated batch starts after the log end offset.
	ErrOffsetGap = errors.New("hotlog: batch leaves a gap after the log end")
	// ErrOffsetOverlap: a replicated batch starts before the log end offset.
	ErrOffsetOverlap = errors.New("hotlog: batch overlaps the log end")
	// ErrStaleEpoch: a batch carries a leader epoch older than the newest one
	// the log has seen.
	ErrStaleEpoch = errors.New("hotlog: leader epoch older than the log's latest")
	// ErrAboveHighWatermark: retention was asked to delete records the high
	// watermark has not passed, which are not committed yet.
	ErrAboveHighWatermark = errors.New("hotlog: cut above the high watermark")
	// ErrCorrupt: the files on disk are damaged beyond what recovery repairs on
	// its own (a sealed segment or a checkpoint that fails its checks).
	// Marked as corruption (corrupt.Is).
	ErrCorrupt = corrupt.Mark(errors.New("hotlog: corrupt log files"))
)

// RangeError reports an offset outside [LogStart, LogEnd]. It matches
// ErrOffsetOutOfRange with errors.Is.
type RangeError struct {
	Offset   int64
	LogStart int64
	LogEnd   int64
}

func (e *RangeError) Error() string {
	return fmt.Sprintf("hotlog: offset %d out of range: valid offsets are %d to %d", e.Offset, e.LogStart, e.LogEnd)
}

// Is makes errors.Is(err, ErrOffsetOutOfRange) true.
func (e *RangeError) Is(target error) bool { return target == ErrOffsetOutOfRange }
