package hotlog

import (
	"sync/atomic"
	"testing"

	"github.com/strata-log/strata/internal/testutil"
)

// AfterChange calls its callback once, at the next change (here an
// append), and not for the changes after it; a callback stopped before the
// change is never called.
func TestAfterChangeCallsOnceAtTheNextChange(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(DiskFS{}))
	defer l.Close()

	var calls, stoppedCalls atomic.Int32
	l.AfterChange(func() { calls.Add(1) })
	stop := l.AfterChange(func() { stoppedCalls.Add(1) })
	stop()
	if calls.Load() != 0 {
		t.Fatal("called before any change")
	}
	if _, err := l.Append(testutil.SeqBatch(t, 0, 2, 5000, 100, []byte("k")), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(testutil.SeqBatch(t, 2, 2, 5002, 100, []byte("k")), 0); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("called %d times for two appends; want once", n)
	}
	if n := stoppedCalls.Load(); n != 0 {
		t.Fatalf("a stopped callback was called %d times", n)
	}
	stop() // after the change: harmless

	// A high watermark move is a change too.
	l.AfterChange(func() { calls.Add(1) })
	l.SetHighWatermark(l.LogEndOffset())
	if n := calls.Load(); n != 2 {
		t.Fatalf("called %d times after a high watermark move; want 2", n)
	}
}
