package hotlog

// Logs with offset gaps, as the cleaner of a compacted topic leaves them
// and as a follower copies them from such a leader: batches that keep their
// offset range but hold fewer records (down to none), and whole batches
// missing between others. They are built through hotlog's own API
// (AppendReplicaFrom, testutil.GappedLog) and then read, indexed,
// recovered, replicated and truncated.

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-log/strata/hotlog/memfs"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
)

const gapTs = 1_700_000_000_000

// gapSpecs is a compacted log of n batches of ten offsets each: some hold
// every record, most some, some none (empty headers), and some batches are
// gone altogether.
func gapSpecs(n int, seed uint64) []testutil.GapSpec {
	rng := rand.New(rand.NewPCG(seed, 1))
	var specs []testutil.GapSpec
	for i := range n {
		base := int64(i * 10)
		if i > 0 && rng.IntN(5) == 0 {
			continue // the whole batch was cleaned away
		}
		var keep []int32
		switch k := rng.IntN(6); k {
		case 0: // empty: a producer's last batch, kept as a header
		case 1:
			keep = []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
		default:
			for d := range int32(10) {
				if rng.IntN(3) == 0 {
					keep = append(keep, d)
				}
			}
		}
		specs = append(specs, testutil.GapSpec{Base: base, LastDelta: 9, Keep: keep})
	}
	return specs
}

// appendGapped writes specs to l as a follower takes them from its leader,
// in chunks of a few batches, each read by the leader from the follower's
// log end.
func appendGapped(t *testing.T, l *Log, specs []testutil.GapSpec) []int64 {
	t.Helper()
	var all []int64
	for i := 0; i < len(specs); i += 7 {
		data, offsets := testutil.GappedLog(t, specs[i:min(i+7, len(specs))], 1, gapTs)
		res, err := l.AppendReplicaFrom(data, l.LogEndOffset())
		if err != nil {
			t.Fatalf("append batches from %d: %v", specs[i].Base, err)
		}
		if res.BaseOffset != specs[i].Base {
			t.Fatalf("append result %+v, want base %d", res, specs[i].Base)
		}
		all = append(all, offsets...)
	}
	return all
}

// consumeAll reads l from offset from to its end as a consumer does, from
// each read's NextOffset on, and returns the offsets of the records at or
// after the offset each read asked for. Every read below the end must
// return a batch: a reader whose offset is in a gap moves on.
func consumeAll(t *testing.T, l *Log, from int64) []int64 {
	t.Helper()
	var got []int64
	leo := l.LogEndOffset()
	for off := from; off < leo; {
		res, err := l.Read(off, 700, leo)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(res.Data) == 0 || res.NextOffset <= off {
			t.Fatalf("read at %d below the log end %d returned %d bytes, next %d: a reader would stall", off, leo, len(res.Data), res.NextOffset)
		}
		for rest := res.Data; len(rest) > 0; {
			b, next, err := record.Next(rest)
			if err != nil {
				t.Fatalf("batch read at %d: %v", off, err)
			}
			recs, err := b.Records()
			if err != nil {
				t.Fatalf("decode batch %d: %v", b.BaseOffset(), err)
			}
			for _, r := range recs {
				if r.Offset >= off {
					if len(got) > 0 && r.Offset <= got[len(got)-1] {
						t.Fatalf("offset %d after %d", r.Offset, got[len(got)-1])
					}
					if v := int64(seqOf(r)); v != r.Offset || r.Timestamp != gapTs+r.Offset {
						t.Fatalf("record at %d holds value %d, time %d", r.Offset, v, r.Timestamp)
					}
					got = append(got, r.Offset)
				}
			}
			rest = next
		}
		off = res.NextOffset
	}
	return got
}

// checkGappedLog reads a log holding specs every way a reader can: from
// the start, from every offset (one in a gap gets the next batch holding a
// higher offset), and by timestamp.
func checkGappedLog(t *testing.T, l *Log, specs []testutil.GapSpec, offsets []int64) {
	t.Helper()
	end := specs[len(specs)-1].Base + int64(specs[len(specs)-1].LastDelta) + 1
	if l.LogEndOffset() != end {
		t.Fatalf("log end %d, want %d", l.LogEndOffset(), end)
	}
	if got := consumeAll(t, l, 0); !slices.Equal(got, offsets) {
		t.Fatalf("a reader from 0 got %d records, want %d:\n%v\n%v", len(got), len(offsets), got, offsets)
	}
	for off := int64(0); off < end; off++ {
		res, err := l.Read(off, 1, end)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		b, _, err := record.Next(res.Data)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		i := slices.IndexFunc(specs, func(s testutil.GapSpec) bool { return s.Base+int64(s.LastDelta) >= off })
		if b.BaseOffset() != specs[i].Base {
			t.Fatalf("read at %d starts with the batch at %d, want the one at %d", off, b.BaseOffset(), specs[i].Base)
		}
		// By time: record times grow with offsets, so the first record at
		// or after off is the answer.
		j, _ := slices.BinarySearch(offsets, off)
		o, ts, found, err := l.OffsetForTimestamp(gapTs + off)
		if err != nil || found != (j < len(offsets)) || (found && (o != offsets[j] || ts != gapTs+offsets[j])) {
			t.Fatalf("offset for time %d: %d %d %v %v; want the record at %v", gapTs+off, o, ts, found, err, offsets[j:min(j+1, len(offsets))])
		}
	}
}

// TestGappedLogReads: a follower's log copied from a compacted leader
// holds the leader's batches at the leader's offsets across segment rolls;
// reads from every offset find the next batch holding a higher one, a
// consumer gets every record in order without stalling, lookups by time
// find the first record at or after the time, and the indexes are
// trusted on the next open, or rebuilt the same when they are lost.
func TestGappedLogReads(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testOptions(DiskFS{}))
	specs := gapSpecs(300, 1)
	offsets := appendGapped(t, l, specs)
	if n := len(l.Segments()); n < 4 {
		t.Fatalf("%d segments; the test wants rolls", n)
	}
	checkGappedLog(t, l, specs, offsets)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = mustOpen(t, dir, testOptions(DiskFS{}))
	if r := l.Recovery(); len(r.RebuiltIndexes) != 0 || r.TruncatedBytes != 0 {
		t.Fatalf("open after a clean close: %+v", r)
	}
	checkGappedLog(t, l, specs, offsets)
	l.Close()

	idx, _ := filepath.Glob(filepath.Join(dir, "*index"))
	for _, p := range idx {
		if err := (DiskFS{}).Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	l = mustOpen(t, dir, testOptions(DiskFS{}))
	defer l.Close()
	if r := l.Recovery(); len(r.RebuiltIndexes) == 0 || r.TruncatedBytes != 0 {
		t.Fatalf("open without indexes: %+v", r)
	}
	checkGappedLog(t, l, specs, offsets)
}

// TestGappedLogRecovery: a gapped log survives a kill: the open after it
// keeps every whole batch, however few records it holds, and cuts only a
// torn last batch.
func TestGappedLogRecovery(t *testing.T) {
	fsys := memfs.New()
	l := mustOpen(t, "/log", testOptions(fsys))
	specs := gapSpecs(200, 2)
	offsets := appendGapped(t, l, specs)

	killed := fsys.Fork() // a kill -9: the page cache survives
	l2 := mustOpen(t, "/log", testOptions(killed))
	if r := l2.Recovery(); r.TruncatedBytes != 0 {
		t.Fatalf("recovery after a kill cut %d bytes: %s", r.TruncatedBytes, r.TruncateReason)
	}
	checkGappedLog(t, l2, specs, offsets)
	l2.Close()

	// Lose the second half of the last batch: it goes, the rest stays.
	torn := fsys.Fork()
	torn.Crash(func(path string, synced, current []byte) []byte {
		if filepath.Base(path) == segmentName(l.ActiveBaseOffset(), logSuffix) {
			last := specs[len(specs)-1]
			size := len(testutil.GappedBatch(t, last.Base, last.LastDelta, last.Keep, 1, gapTs+last.Base))
			return current[:len(current)-size/2]
		}
		return current
	})
	l.Close()
	l3 := mustOpen(t, "/log", testOptions(torn))
	defer l3.Close()
	if r := l3.Recovery(); r.TruncatedBytes == 0 {
		t.Fatalf("a torn last batch was kept: %+v", r)
	}
	kept := specs[:len(specs)-1]
	want := offsets[:len(offsets)-len(specs[len(specs)-1].Keep)]
	checkGappedLog(t, l3, kept, want)
}

// TestAppendReplicaFromGaps: a follower takes a gap only as the leader's:
// from a chunk the leader read at or below the follower's log end. A chunk
// read from further on (sent before the follower truncated) and any gap
// through AppendReplica are ErrOffsetGap, an overlap ErrOffsetOverlap, and
// none of them writes anything.
func TestAppendReplicaFromGaps(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(DiskFS{}))
	defer l.Close()
	first, _ := testutil.GappedLog(t, []testutil.GapSpec{{Base: 0, LastDelta: 4, Keep: []int32{0, 4}}}, 1, gapTs)
	if _, err := l.AppendReplicaFrom(first, 0); err != nil {
		t.Fatal(err)
	}
	after, _ := testutil.GappedLog(t, []testutil.GapSpec{{Base: 9, LastDelta: 0, Keep: []int32{0}}, {Base: 20, LastDelta: 2, Keep: nil}}, 1, gapTs)
	_, err := l.AppendReplica(after)
	wantErr(t, err, ErrOffsetGap)
	_, err = l.AppendReplicaFrom(after, 6) // read past our end (5)
	wantErr(t, err, ErrOffsetGap)
	overlap, _ := testutil.GappedLog(t, []testutil.GapSpec{{Base: 4, LastDelta: 1, Keep: []int32{1}}}, 1, gapTs)
	_, err = l.AppendReplicaFrom(overlap, 4)
	wantErr(t, err, ErrOffsetOverlap)
	_, err = l.AppendReplicaFrom(after, -1)
	wantErr(t, err, ErrInvalidBatch)
	if l.LogEndOffset() != 5 {
		t.Fatalf("refused appends moved the log end to %d", l.LogEndOffset())
	}
	res, err := l.AppendReplicaFrom(after, 5)
	if err != nil || res.BaseOffset != 9 || res.LastOffset != 22 || l.LogEndOffset() != 23 {
		t.Fatalf("append after the leader's gap: %+v %v, log end %d", res, err, l.LogEndOffset())
	}
	if got := consumeAll(t, l, 0); !slices.Equal(got, []int64{0, 4, 9}) {
		t.Fatalf("records %v", got)
	}
}

// TestTruncateInGap: a follower truncating (KIP-279) at an offset in a gap
// keeps every batch below it: in a gap between batches the log ends where
// the batch before ends; inside a batch's own range the batch goes whole,
// as any batch the cut falls in. It then takes the leader's batches again.
func TestTruncateInGap(t *testing.T) {
	specs := []testutil.GapSpec{
		{Base: 0, LastDelta: 4, Keep: []int32{0, 2, 4}},
		{Base: 5, LastDelta: 4, Keep: []int32{1, 3}},
		{Base: 20, LastDelta: 4, Keep: nil},
		{Base: 25, LastDelta: 4, Keep: []int32{4}},
	}
	for _, c := range []struct {
		cut, end int64
		want     []int64
	}{
		{cut: 12, end: 10, want: []int64{0, 2, 4, 6, 8}}, // between batches
		{cut: 10, end: 10, want: []int64{0, 2, 4, 6, 8}}, // where the gap starts
		{cut: 7, end: 5, want: []int64{0, 2, 4}},         // inside a batch, between its records
		{cut: 22, end: 10, want: []int64{0, 2, 4, 6, 8}}, // inside an empty batch
		{cut: 26, end: 25, want: []int64{0, 2, 4, 6, 8}},
	} {
		l := mustOpen(t, t.TempDir(), testOptions(DiskFS{}))
		data, offsets := testutil.GappedLog(t, specs, 1, gapTs)
		if _, err := l.AppendReplicaFrom(data, 0); err != nil {
			t.Fatal(err)
		}
		end, err := l.TruncateTo(c.cut)
		if err != nil || end != c.end || l.LogEndOffset() != c.end {
			t.Fatalf("truncate to %d: end %d, %v; want %d", c.cut, end, err, c.end)
		}
		if got := consumeAll(t, l, 0); !slices.Equal(got, c.want) {
			t.Fatalf("after truncating to %d: %v, want %v", c.cut, got, c.want)
		}
		// The leader sends again from the follower's new end.
		i := slices.IndexFunc(specs, func(s testutil.GapSpec) bool { return s.Base >= end })
		again, _ := testutil.GappedLog(t, specs[i:], 1, gapTs)
		if _, err := l.AppendReplicaFrom(again, end); err != nil {
			t.Fatalf("append after truncating to %d: %v", c.cut, err)
		}
		checkGappedLog(t, l, specs, offsets)
		l.Close()
	}
}

// TestReadAcrossCleanedSegmentTail: a sealed segment whose last batches
// the cleaner dropped ends below the next segment's base; the log opens,
// and a read at an offset in that gap returns the next segment's first
// batch.
func TestReadAcrossCleanedSegmentTail(t *testing.T) {
	fsys := memfs.New()
	l := mustOpen(t, "/log", testOptions(fsys))
	specs := gapSpecs(300, 3)
	offsets := appendGapped(t, l, specs)
	segs := l.Segments()
	if len(segs) < 3 {
		t.Fatalf("%d segments", len(segs))
	}
	if err := l.Close(); err != nil { // checkpoints the recovery point past every segment
		t.Fatal(err)
	}
	// Drop the last batch of the first segment, as a cleaner's rewrite would
	// (its records superseded), leaving the indexes to be checked on open.
	path := filepath.Join("/log", segmentName(segs[0].BaseOffset, logSuffix))
	data := fsys.ReadFile(path)
	var pos, lastPos int
	var dropped record.Batch
	for pos < len(data) {
		b, _, err := record.Next(data[pos:])
		if err != nil {
			t.Fatal(err)
		}
		lastPos, dropped, pos = pos, b, pos+len(b)
	}
	writeMemFile(t, fsys, path, data[:lastPos])
	f, _ := fsys.OpenFile(path, 2, 0)
	if err := f.Truncate(int64(lastPos)); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	f.Close()

	l = mustOpen(t, "/log", testOptions(fsys))
	defer l.Close()
	var kept []testutil.GapSpec
	for _, s := range specs {
		if s.Base != dropped.BaseOffset() {
			kept = append(kept, s)
		}
	}
	var want []int64
	for _, o := range offsets {
		if o < dropped.BaseOffset() || o > dropped.LastOffset() {
			want = append(want, o)
		}
	}
	checkGappedLog(t, l, kept, want)
}
