package tiering

import (
	"math"
	"slices"
	"testing"

	"github.com/strata-log/strata/record"
)

func TestColdOffsetForTimestamp(t *testing.T) {
	f := newColdFixture(t)
	// Timestamps jump around within batches and segments, and the second
	// segment is older than the first.
	jitter := func(lo, hi int64) func(int64) int64 {
		return func(int64) int64 { return lo + f.rng.Int64N(hi-lo) }
	}
	f.addSegment(batchSpec{count: 120, records: 4, valueLen: 200, ts: jitter(5000, 9000)})
	f.addSegment(batchSpec{count: 100, records: 3, valueLen: 300, ts: jitter(1000, 6000)})
	f.addSegment(
		batchSpec{count: 50, records: 2, valueLen: 500, ts: jitter(8000, 12000), codec: record.CompressionLZ4},
		batchSpec{count: 10, records: 3, valueLen: 50, appendTime: 11000},
	)
	f.addSegment(batchSpec{count: 90, records: 5, valueLen: 250, ts: jitter(0, 15000)})

	// brute force: the first record, in offset order, at or after ts.
	want := func(ts int64) (int64, int64, bool) {
		for _, r := range f.records {
			if r.ts >= ts {
				return r.offset, r.ts, true
			}
		}
		return -1, -1, false
	}
	queries := []int64{math.MinInt64, -1, 0, 14999, 15000, 16000, math.MaxInt64}
	for _, r := range f.records {
		queries = append(queries, r.ts-1, r.ts, r.ts+1)
	}
	slices.Sort(queries)
	queries = slices.Compact(queries)

	r := f.reader(smallChunks())
	for _, ts := range queries {
		off, at, found, err := r.OffsetForTimestamp(f.ctx, f.ref, ts)
		if err != nil {
			t.Fatalf("ts %d: %v", ts, err)
		}
		wo, wt, wf := want(ts)
		if off != wo || at != wt || found != wf {
			t.Fatalf("ts %d: got offset %d ts %d found %v, want %d %d %v", ts, off, at, found, wo, wt, wf)
		}
	}
}

func TestColdOffsetForTimestampChecksNewSegments(t *testing.T) {
	f := newColdFixture(t)
	r := f.reader(smallChunks())
	if _, _, found, err := r.OffsetForTimestamp(f.ctx, f.ref, 0); found || err != nil {
		t.Fatalf("empty cold tier: found %v, %v", found, err)
	}
	f.addSegment(batchSpec{count: 3, records: 2, valueLen: 10}) // ts 0..5
	if off, _, found, err := r.OffsetForTimestamp(f.ctx, f.ref, 2); !found || err != nil || off != 2 {
		t.Fatalf("got %d %v %v", off, found, err)
	}
	// Newer than the cached head knows: a fresh head is read once.
	f.addSegment(batchSpec{count: 3, records: 2, valueLen: 10}) // ts 6..11
	if off, ts, found, err := r.OffsetForTimestamp(f.ctx, f.ref, 9); !found || err != nil || off != 9 || ts != 9 {
		t.Fatalf("got %d %d %v %v", off, ts, found, err)
	}
	if _, _, found, err := r.OffsetForTimestamp(f.ctx, f.ref, 12); found || err != nil {
		t.Fatalf("every record is older: found %v, %v", found, err)
	}
}
