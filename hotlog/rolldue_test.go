package hotlog

import (
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
)

// RollDue names the roll by age of a segment holding records, and nothing
// for an empty one; NeedsCheckpoint follows the high watermark until
// Checkpoint saves it.
func TestRollDueAndNeedsCheckpoint(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	opts := testOptions(DiskFS{})
	opts.Now = func() time.Time { return now }
	opts.SegmentAge = time.Minute
	l := mustOpen(t, t.TempDir(), opts)
	defer l.Close()

	if _, due := l.RollDue(); due {
		t.Fatal("an empty segment has a roll due")
	}
	if _, err := l.Append(testutil.SeqBatch(t, 0, 2, 5000, 100, []byte("k")), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(testutil.SeqBatch(t, 2, 2, 5002, 100, []byte("k")), 0); err != nil {
		t.Fatal(err)
	}
	if at, due := l.RollDue(); !due || !at.Equal(now.Add(time.Minute)) {
		t.Fatalf("roll due %v %v; want at %v", at, due, now.Add(time.Minute))
	}

	if err := l.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if l.NeedsCheckpoint() {
		t.Fatal("needs a checkpoint right after one")
	}
	l.SetHighWatermark(l.LogEndOffset())
	if !l.NeedsCheckpoint() {
		t.Fatal("a moved high watermark needs no checkpoint")
	}
	if err := l.Checkpoint(); err != nil || l.NeedsCheckpoint() {
		t.Fatalf("after a checkpoint: %v, needs another %v", err, l.NeedsCheckpoint())
	}
}
