package tiering

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/tiering/objstore"
)

// testContext bounds a test that hangs; it is no measure of speed: under
// the race detector on a busy two-core machine, a test that takes 15 s
// alone took more than 30.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// segmentBytes is a local segment's log bytes: batches of n records from
// base, count of them.
func segmentBytes(t testing.TB, base int64, batches, n int, ts int64, valueSize int) []byte {
	var buf bytes.Buffer
	off := base
	for range batches {
		buf.Write(testutil.SeqBatch(t, off, n, ts+off, valueSize, nil))
		off += int64(n)
	}
	return buf.Bytes()
}

// localLog opens a real hotlog with small segments for upload tests.
func localLog(t testing.TB, dir string) *hotlog.Log {
	t.Helper()
	opts := hotlog.DefaultOptions()
	opts.SegmentBytes = 16 << 10
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := hotlog.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// fill appends count batches of n records to l, with timestamps from ts.
func fill(t testing.TB, l *hotlog.Log, count, n int, ts int64) {
	t.Helper()
	for range count {
		off := l.LogEndOffset()
		if _, err := l.Append(testutil.SeqBatch(t, off, n, ts+off, 200, nil), 0); err != nil {
			t.Fatal(err)
		}
	}
}

// committedEnd is the log end of a test log whose every record counts as
// committed (these tests have no followers).
func committedEnd(l *hotlog.Log) int64 { return l.LogEndOffset() }

// newTestCommitter takes over testRef's manifest in store for a leader in
// epoch.
func newTestCommitter(t testing.TB, store objstore.Bucket, epoch int32) *Committer {
	t.Helper()
	c, err := NewCommitter(testContext(t), store, testRef, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
