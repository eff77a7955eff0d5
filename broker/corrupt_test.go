package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/corrupt"
	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering"
)

// TestCorruptionIsMarked: a damaged producer snapshot is corruption by the
// one check, corrupt.Is, as the snapshot sentinel is.
func TestCorruptionIsMarked(t *testing.T) {
	snap, _ := sampleSnapshot(t)
	data := encodeProducerSnapshot(snap)
	data[len(data)/2] ^= 1
	_, err := decodeProducerSnapshot(data)
	if !errors.Is(err, errCorruptSnapshot) || !corrupt.Is(err) {
		t.Fatalf("a damaged producer snapshot: %v, want corruption", err)
	}
}

// TestColdErrorReasons: the one translation of a cold read's failure, as a
// leader and as a read replica: corruption from any layer is CORRUPT_DATA,
// an offset the cold tier no longer holds names the caller's range (a
// leader) or the bucket's (a read replica), a cancelled read stays itself,
// and anything else is STORAGE_ERROR.
func TestColdErrorReasons(t *testing.T) {
	for _, cause := range []error{
		fmt.Errorf("segment 7: %w", tiering.ErrCorrupt),
		fmt.Errorf("batch at 12: %w", record.ErrBadCRC),
		fmt.Errorf("%w: chunk 3", hotlog.ErrCorrupt),
		fmt.Errorf("%w: snapshot at 40", errCorruptSnapshot),
	} {
		for _, bucket := range []bool{false, true} {
			err := coldError("t-0", 12, 0, 100, bucket, cause)
			if ReasonOf(err) != ReasonCorruptData || !errors.Is(err, cause) {
				t.Errorf("coldError(%v, bucketRange %v) = %v, want CORRUPT_DATA wrapping the cause", cause, bucket, err)
			}
		}
	}
	oor := fmt.Errorf("read: %w", &tiering.OutOfColdRangeError{Offset: 5, Start: 10, End: 90})
	check := func(err error, start, hw string) {
		t.Helper()
		var e *Error
		if !errors.As(err, &e) || e.Reason != ReasonOffsetOutOfRange || e.Meta["log_start_offset"] != start || e.Meta["high_watermark"] != hw {
			t.Fatalf("got %v (%+v), want OFFSET_OUT_OF_RANGE %s to %s", err, e, start, hw)
		}
	}
	check(coldError("t-0", 5, 20, 100, false, oor), "20", "100")
	check(coldError("t-0", 5, 20, 80, true, oor), "10", "90")
	check(coldError("t-0", 5, 20, 100, true, oor), "10", "100")
	if err := coldError("t-0", 5, 0, 100, true, context.Canceled); err != context.Canceled {
		t.Fatalf("a cancelled read: %v", err)
	}
	if err := coldError("t-0", 5, 0, 100, false, errors.New("connection reset")); ReasonOf(err) != ReasonStorageError {
		t.Fatalf("a failed read: %v, want STORAGE_ERROR", err)
	}
}
