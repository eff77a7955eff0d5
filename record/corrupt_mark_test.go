package record

import (
	"testing"

	"github.com/strata-log/strata/internal/corrupt"
)

// TestCorruptionIsMarked: every corruption the package reports, and only
// corruption, passes the one check callers use, corrupt.Is.
func TestCorruptionIsMarked(t *testing.T) {
	for _, err := range []error{ErrCorrupt, ErrBadMagic, ErrBadLength, ErrBadCRC, ErrBadCount, ErrBadRecord, ErrUnknownCompression, ErrTooLarge} {
		if !corrupt.Is(err) {
			t.Errorf("%v is not marked as corruption", err)
		}
	}
	valid := mustEncode(t, DefaultBatchOptions(), sampleRecords(4)...)
	bad := clone(valid)
	bad[len(bad)-2] ^= 0x40
	if err := Batch(bad).Validate(); !corrupt.Is(err) {
		t.Errorf("Validate of a damaged batch: %v, not marked as corruption", err)
	}
	for _, err := range []error{ErrShortBuffer, ErrNoRecords, ErrBatchTooLarge} {
		if corrupt.Is(err) {
			t.Errorf("%v is marked as corruption", err)
		}
	}
}
