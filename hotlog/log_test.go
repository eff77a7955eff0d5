package hotlog

import (
	"context"
	"errors"
	"github.com/strata-log/strata/hotlog/memfs"
	"github.com/strata-log/strata/internal/testutil"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/record"
)

func TestAppendAssignsOffsetsAndReadsBack(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(DiskFS{}))
	defer l.Close()
	seq := 0
	var sent []record.Batch
	for i := range 40 {
		b := testutil.SeqBatch(t, int64(seq), 1+i%5, int64(1000+seq), 300, []byte("k"))
		res, err := l.Append(b, 3)
		if err != nil {
			t.Fatal(err)
		}
		if res.BaseOffset != int64(seq) || res.LastOffset != int64(seq+1+i%5-1) {
			t.Fatalf("append %d: got %+v, want base %d", i, res, seq)
		}
		if b.BaseOffset() != res.BaseOffset || b.LeaderEpoch() != 3 || b.Validate() != nil {
			t.Fatalf("header not rewritten in place: base %d epoch %d", b.BaseOffset(), b.LeaderEpoch())
		}
		sent = append(sent, b)
		seq += 1 + i%5
	}
	if got := l.LogEndOffset(); got != int64(seq) {
		t.Fatalf("LEO %d, want %d", got, seq)
	}
	if n := len(l.Segments()); n < 3 {
		t.Fatalf("%d segments; the test wants several rolls", n)
	}
	checkSeq(t, readRecords(t, l, 0, l.LogEndOffset()), 0, 0)

	// The bytes read back are exactly the bytes appended.
	var got []byte
	for off := int64(0); off < l.LogEndOffset(); {
		res, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		got, off = append(got, res.Data...), res.NextOffset
	}
	var want []byte
	for _, b := range sent {
		want = append(want, b...)
	}
	if !sameBytes(got, want) {
		t.Fatalf("read %d bytes that differ from the %d appended", len(got), len(want))
	}
}

// TestReadWithLendsTheBuffer: ReadWith reads into the buffers its caller
// lends, and asks for one only when there is data: the result is a slice
// of the lent buffer, the same bytes Read returns; a first batch larger
// than maxBytes is read into a second buffer of its size.
func TestReadWithLendsTheBuffer(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(DiskFS{}))
	defer l.Close()
	for i := range 10 {
		if _, err := l.Append(testutil.SeqBatch(t, int64(i*4), 4, 0, 200, []byte("k")), 0); err != nil {
			t.Fatal(err)
		}
	}
	var lent [][]byte
	lend := func(n int) []byte {
		b := make([]byte, n, n+100)
		lent = append(lent, b)
		return b
	}
	want, err := l.Read(4, 2000, 40)
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.ReadWith(lend, 4, 2000, 40)
	if err != nil {
		t.Fatal(err)
	}
	if !sameBytes(got.Data, want.Data) || got.NextOffset != want.NextOffset {
		t.Fatalf("ReadWith read %d bytes to %d, Read %d bytes to %d", len(got.Data), got.NextOffset, len(want.Data), want.NextOffset)
	}
	if len(lent) != 1 || &got.Data[0] != &lent[0][0] {
		t.Fatalf("%d buffers lent; the result is not a slice of the one lent", len(lent))
	}
	// A first batch larger than maxBytes: a second buffer, of its size.
	lent = nil
	got, err = l.ReadWith(lend, 0, 10, 40)
	if err != nil {
		t.Fatal(err)
	}
	if size := record.Batch(got.Data).Size(); len(lent) != 2 || len(lent[1]) != size || &got.Data[0] != &lent[1][0] {
		t.Fatalf("%d buffers lent for a batch of %d bytes over maxBytes", len(lent), size)
	}
	// Nothing to read: nothing lent.
	lent = nil
	if res, err := l.ReadWith(lend, 40, 1<<20, 40); err != nil || len(res.Data) != 0 || len(lent) != 0 {
		t.Fatalf("read at the end: %v, %d bytes, %d buffers lent", err, len(res.Data), len(lent))
	}
}

func TestReadBounds(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(DiskFS{}))
	defer l.Close()
	for i := range 10 {
		if _, err := l.Append(testutil.SeqBatch(t, int64(i*4), 4, 0, 200, []byte("k")), 0); err != nil {
			t.Fatal(err)
		}
	}
	// Offset in the middle of a batch: the read starts with that batch.
	res, err := l.Read(6, 1<<20, 40)
	if err != nil {
		t.Fatal(err)
	}
	if first := record.Batch(res.Data); first.BaseOffset() != 4 {
		t.Fatalf("read at 6 starts at batch %d, want 4", first.BaseOffset())
	}
	// upTo stops before the batch holding it; a batch is never split.
	res, err = l.Read(0, 1<<20, 10)
	if err != nil {
		t.Fatal(err)
	}
	if res.NextOffset != 8 {
		t.Fatalf("read up to 10 ends at %d, want 8 (the batch 8..11 is past upTo)", res.NextOffset)
	}
	// maxBytes smaller than one batch still returns that whole batch.
	res, err = l.Read(0, 10, 40)
	if err != nil {
		t.Fatal(err)
	}
	if b := record.Batch(res.Data); len(res.Data) != b.Size() || res.NextOffset != 4 {
		t.Fatalf("read with tiny maxBytes: %d bytes, next %d", len(res.Data), res.NextOffset)
	}
	// maxBytes bounds a read of several batches to whole batches.
	one := record.Batch(res.Data).Size()
	res, err = l.Read(0, 2*one+one/2, 40)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 2*one || res.NextOffset != 8 {
		t.Fatalf("read of 2.5 batches' bytes: %d bytes next %d, want %d bytes next 8", len(res.Data), res.NextOffset, 2*one)
	}
	// At the end: empty, no error. Past the end: a range error with the range.
	if res, err := l.Read(40, 1<<20, 40); err != nil || len(res.Data) != 0 || res.NextOffset != 40 {
		t.Fatalf("read at LEO: %v %d bytes", err, len(res.Data))
	}
	_, err = l.Read(41, 1<<20, 100)
	var re *RangeError
	if !errors.As(err, &re) || !errors.Is(err, ErrOffsetOutOfRange) || re.LogStart != 0 || re.LogEnd != 40 {
		t.Fatalf("read past LEO: %v", err)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testOptions(DiskFS{}))
	for i := range 30 {
		epoch := int32(i / 10)
		if _, err := l.Append(testutil.SeqBatch(t, int64(i*3), 3, int64(i), 300, []byte("k")), epoch); err != nil {
			t.Fatal(err)
		}
	}
	l.SetHighWatermark(60)
	segs := l.Segments()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = mustOpen(t, dir, testOptions(DiskFS{}))
	defer l.Close()
	if l.LogEndOffset() != 90 || l.HighWatermark() != 60 || l.LogStartOffset() != 0 {
		t.Fatalf("after reopen LEO %d HW %d start %d", l.LogEndOffset(), l.HighWatermark(), l.LogStartOffset())
	}
	if r := l.Recovery(); r.TruncatedBytes != 0 || len(r.RebuiltIndexes) != 0 || len(r.RemovedFiles) != 0 {
		t.Fatalf("clean reopen repaired something: %+v", r)
	}
	if got := l.Segments(); len(got) != len(segs) {
		t.Fatalf("%d segments after reopen, %d before", len(got), len(segs))
	} else {
		for i := range got {
			if got[i] != segs[i] {
				t.Fatalf("segment %d: %+v after reopen, %+v before", i, got[i], segs[i])
			}
		}
	}
	want := []EpochEntry{{0, 0}, {1, 30}, {2, 60}}
	if got := l.Epochs(); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("epochs %v, want %v", got, want)
	}
	checkSeq(t, readRecords(t, l, 0, 90), 0, 0)
	if _, err := l.Append(testutil.SeqBatch(t, 90, 3, 0, 300, []byte("k")), 2); err != nil {
		t.Fatal(err)
	}
	checkSeq(t, readRecords(t, l, 85, 93), 85, 85)
}

func TestRollBySizeAndAge(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var clockMu sync.Mutex
	opts := testOptions(DiskFS{})
	opts.Now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	opts.SegmentAge = time.Minute
	l := mustOpen(t, t.TempDir(), opts)
	defer l.Close()

	b := testutil.SeqBatch(t, 0, 2, 5000, 1000, []byte("k"))
	perSegment := int(opts.SegmentBytes) / len(b)
	for i := range perSegment + 1 {
		if _, err := l.Append(testutil.SeqBatch(t, int64(i*2), 2, int64(5000+i*2), 1000, []byte("k")), 0); err != nil {
			t.Fatal(err)
		}
	}
	segs := l.Segments()
	if len(segs) != 2 || !segs[0].Sealed || segs[1].Sealed {
		t.Fatalf("want one sealed and one active segment, got %+v", segs)
	}
	s := segs[0]
	if s.BaseOffset != 0 || s.LastOffset != int64(perSegment*2-1) || s.Size > opts.SegmentBytes ||
		s.MinTimestamp != 5000 || s.MaxTimestamp != int64(5000+perSegment*2-1) {
		t.Fatalf("sealed segment info %+v", s)
	}
	if segs[1].BaseOffset != s.LastOffset+1 {
		t.Fatalf("active base %d, want %d", segs[1].BaseOffset, s.LastOffset+1)
	}

	// Age: nothing happens before segment.ms; after it, the next append or
	// RollIfAged seals the segment.
	if rolled, err := l.RollIfAged(); err != nil || rolled {
		t.Fatalf("RollIfAged before the age: %v %v", rolled, err)
	}
	clockMu.Lock()
	now = now.Add(time.Minute)
	clockMu.Unlock()
	if rolled, err := l.RollIfAged(); err != nil || !rolled {
		t.Fatalf("RollIfAged after the age: %v %v", rolled, err)
	}
	if n := len(l.Segments()); n != 3 {
		t.Fatalf("%d segments after age roll, want 3", n)
	}
	// An empty active segment is never rolled.
	clockMu.Lock()
	now = now.Add(time.Hour)
	clockMu.Unlock()
	if rolled, _ := l.RollIfAged(); rolled {
		t.Fatal("rolled an empty segment")
	}
	if _, err := l.Append(testutil.SeqBatch(t, 0, 1, 0, 10, []byte("k")), 0); err != nil {
		t.Fatal(err)
	}
	clockMu.Lock()
	now = now.Add(time.Minute)
	clockMu.Unlock()
	if _, err := l.Append(testutil.SeqBatch(t, 0, 1, 0, 10, []byte("k")), 0); err != nil {
		t.Fatal(err)
	}
	if n := len(l.Segments()); n != 4 {
		t.Fatalf("%d segments after an aged append, want 4", n)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testOptions(DiskFS{}))
	if _, err := l.Append(testutil.SeqBatch(t, 0, 3, 0, 100, []byte("k")), 1); err != nil {
		t.Fatal(err)
	}
	before := l.LogEndOffset()

	big := testutil.SeqBatch(t, 0, 1, 0, 5000, []byte("k"))
	_, err := l.Append(big, 1)
	wantErr(t, err, ErrBatchTooLarge)

	bad := testutil.SeqBatch(t, 0, 3, 0, 100, []byte("k"))
	bad[len(bad)-1] ^= 0xff
	_, err = l.Append(bad, 1)
	wantErr(t, err, ErrInvalidBatch)
	if !record.IsCorrupt(err) {
		t.Fatalf("corrupt batch error %v is not a record corruption", err)
	}

	_, err = l.Append(record.Batch([]byte{1, 2, 3}), 1)
	wantErr(t, err, ErrInvalidBatch)

	_, err = l.Append(testutil.SeqBatch(t, 0, 1, 0, 10, []byte("k")), 0)
	wantErr(t, err, ErrStaleEpoch)
	_, err = l.Append(testutil.SeqBatch(t, 0, 1, 0, 10, []byte("k")), -1)
	wantErr(t, err, ErrStaleEpoch)

	_, err = l.Read(-1, 100, 10)
	wantErr(t, err, ErrOffsetOutOfRange)
	_, err = l.Read(before+1, 100, 10)
	wantErr(t, err, ErrOffsetOutOfRange)

	if l.LogEndOffset() != before {
		t.Fatalf("LEO moved from %d to %d on bad input", before, l.LogEndOffset())
	}
	checkSeq(t, readRecords(t, l, 0, before), 0, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	_, err = l.Append(testutil.SeqBatch(t, 0, 1, 0, 10, []byte("k")), 1)
	wantErr(t, err, ErrClosed)
	_, err = l.Read(0, 100, 10)
	wantErr(t, err, ErrClosed)
	_, err = l.AppendReplica(testutil.SeqBatch(t, 0, 1, 0, 10, []byte("k")))
	wantErr(t, err, ErrClosed)

	l = mustOpen(t, dir, testOptions(DiskFS{}))
	defer l.Close()
	if l.LogEndOffset() != before {
		t.Fatalf("LEO %d after reopen, want %d", l.LogEndOffset(), before)
	}
}

// replicaBatch is a batch as a leader would have stored it.
func replicaBatch(t testing.TB, base int64, n int, epoch int32) record.Batch {
	b := testutil.SeqBatch(t, int64(int(base)), n, base, 100, []byte("k"))
	b.SetBaseOffset(base)
	b.SetLeaderEpoch(epoch)
	return b
}

func TestAppendReplica(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(DiskFS{}))
	defer l.Close()
	var chunk []byte
	chunk = append(chunk, replicaBatch(t, 0, 3, 1)...)
	chunk = append(chunk, replicaBatch(t, 3, 2, 1)...)
	chunk = append(chunk, replicaBatch(t, 5, 4, 2)...)
	res, err := l.AppendReplica(chunk)
	if err != nil || res.BaseOffset != 0 || res.LastOffset != 8 {
		t.Fatalf("replica append: %+v %v", res, err)
	}
	if got := l.Epochs(); len(got) != 2 || got[1] != (EpochEntry{2, 5}) {
		t.Fatalf("epochs from replicated batches: %v", got)
	}

	_, err = l.AppendReplica(replicaBatch(t, 10, 1, 2))
	wantErr(t, err, ErrOffsetGap)
	_, err = l.AppendReplica(replicaBatch(t, 8, 1, 2))
	wantErr(t, err, ErrOffsetOverlap)
	_, err = l.AppendReplica(replicaBatch(t, 9, 1, 1))
	wantErr(t, err, ErrStaleEpoch)

	// A bad batch anywhere in the chunk means nothing of it is written.
	var mixed []byte
	mixed = append(mixed, replicaBatch(t, 9, 2, 2)...)
	corrupt := replicaBatch(t, 11, 2, 2)
	corrupt[record.HeaderSize+2] ^= 1
	mixed = append(mixed, corrupt...)
	_, err = l.AppendReplica(mixed)
	wantErr(t, err, ErrInvalidBatch)
	var gappy []byte
	gappy = append(gappy, replicaBatch(t, 9, 2, 2)...)
	gappy = append(gappy, replicaBatch(t, 12, 2, 2)...)
	_, err = l.AppendReplica(gappy)
	wantErr(t, err, ErrOffsetGap)
	if l.LogEndOffset() != 9 {
		t.Fatalf("LEO %d after refused replica appends, want 9", l.LogEndOffset())
	}
	checkSeq(t, readRecords(t, l, 0, 9), 0, 0)
}

func TestEndOffsetForEpoch(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(DiskFS{}))
	defer l.Close()
	if e, o := l.EndOffsetForEpoch(0); e != UndefinedEpoch || o != UndefinedOffset {
		t.Fatalf("empty log: %d %d", e, o)
	}
	// Epoch 2 from 0, epoch 4 from 5, epoch 7 from 9; LEO 12.
	for _, a := range []struct {
		epoch int32
		n     int
	}{{2, 5}, {4, 4}, {7, 3}} {
		if _, err := l.Append(testutil.SeqBatch(t, 0, a.n, 0, 10, []byte("k")), a.epoch); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		ask       int32
		epoch     int32
		endOffset int64
	}{
		{1, 1, 0},   // older than all: the start of the first epoch
		{2, 2, 5},   // a known epoch ends where the next begins
		{3, 2, 5},   // unknown epoch between: the one below it
		{4, 4, 9},   //
		{6, 4, 9},   //
		{7, 7, 12},  // the latest epoch ends at the log end
		{8, -1, -1}, // newer than all: undefined
	} {
		if e, o := l.EndOffsetForEpoch(c.ask); e != c.epoch || o != c.endOffset {
			t.Errorf("EndOffsetForEpoch(%d) = %d, %d; want %d, %d", c.ask, e, o, c.epoch, c.endOffset)
		}
	}
}

func TestTruncateTo(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testOptions(DiskFS{}))
	for i := range 30 {
		if _, err := l.Append(testutil.SeqBatch(t, int64(i*4), 4, int64(i*4), 300, []byte("k")), int32(i/10)); err != nil {
			t.Fatal(err)
		}
	}
	l.SetHighWatermark(120)
	nsegs := len(l.Segments())

	// Mid-batch: the whole batch holding the offset goes.
	end, err := l.TruncateTo(82)
	if err != nil || end != 80 {
		t.Fatalf("TruncateTo(82) = %d, %v; want 80", end, err)
	}
	if l.LogEndOffset() != 80 || l.HighWatermark() != 80 {
		t.Fatalf("after truncate LEO %d HW %d", l.LogEndOffset(), l.HighWatermark())
	}
	if got := l.Epochs(); len(got) != 2 {
		t.Fatalf("epoch 2 started at 80 and should be gone: %v", got)
	}
	if n := len(l.Segments()); n >= nsegs {
		t.Fatalf("%d segments after truncating, had %d", n, nsegs)
	}
	if segs := l.Segments(); segs[len(segs)-1].Sealed {
		t.Fatal("the cut segment must be active again")
	}
	// Appending continues from the cut, with a new epoch.
	if _, err := l.Append(testutil.SeqBatch(t, 80, 4, 0, 300, []byte("k")), 5); err != nil {
		t.Fatal(err)
	}
	checkSeq(t, readRecords(t, l, 0, 84), 0, 0)

	// At a segment boundary.
	segs := l.Segments()
	boundary := segs[1].BaseOffset
	if end, err := l.TruncateTo(boundary); err != nil || end != boundary {
		t.Fatalf("TruncateTo(%d) = %d, %v", boundary, end, err)
	}
	if len(l.Segments()) != 2 {
		t.Fatalf("segments after boundary cut: %+v", l.Segments())
	}
	if end, err := l.TruncateTo(1000); err != nil || end != boundary {
		t.Fatalf("TruncateTo past the end = %d, %v", end, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, testOptions(DiskFS{}))
	defer l.Close()
	if l.LogEndOffset() != boundary || l.Recovery().TruncatedBytes != 0 {
		t.Fatalf("reopen after truncation: LEO %d, recovery %+v", l.LogEndOffset(), l.Recovery())
	}
	checkSeq(t, readRecords(t, l, 0, boundary), 0, 0)
}

func TestDeleteSegmentsBefore(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testOptions(DiskFS{}))
	for i := range 40 {
		if _, err := l.Append(testutil.SeqBatch(t, int64(i*2), 2, 0, 400, []byte("k")), 0); err != nil {
			t.Fatal(err)
		}
	}
	segs := l.Segments()
	if len(segs) < 4 {
		t.Fatalf("want at least 4 segments, got %d", len(segs))
	}
	// Nothing above the high watermark may go: it is not committed.
	l.SetHighWatermark(segs[2].BaseOffset)
	if _, err := l.DeleteSegmentsBefore(segs[2].BaseOffset + 1); !errors.Is(err, ErrAboveHighWatermark) {
		t.Fatalf("a cut above the high watermark: %v, want ErrAboveHighWatermark", err)
	}
	if l.LogStartOffset() != 0 || len(l.Segments()) != len(segs) {
		t.Fatalf("a refused cut changed the log: start %d, %d segments", l.LogStartOffset(), len(l.Segments()))
	}
	l.SetHighWatermark(l.LogEndOffset())
	// Offset inside segment 2: segments 0 and 1 go, 2 stays.
	cut := segs[2].BaseOffset + 1
	deleted, err := l.DeleteSegmentsBefore(cut)
	if err != nil || len(deleted) != 2 || deleted[0].BaseOffset != 0 || deleted[1].BaseOffset != segs[1].BaseOffset {
		t.Fatalf("deleted %+v, %v", deleted, err)
	}
	if l.LogStartOffset() != segs[2].BaseOffset || l.HighWatermark() != l.LogEndOffset() {
		t.Fatalf("log start %d, high watermark %d; want %d, %d", l.LogStartOffset(), l.HighWatermark(), segs[2].BaseOffset, l.LogEndOffset())
	}
	for _, s := range deleted {
		if _, err := os.Stat(s.Path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s still there: %v", s.Path, err)
		}
	}
	_, err = l.Read(0, 100, 80)
	wantErr(t, err, ErrOffsetOutOfRange)
	// The active segment is never deleted, whatever the offset.
	if _, err := l.DeleteSegmentsBefore(l.HighWatermark()); err != nil {
		t.Fatal(err)
	}
	if segs := l.Segments(); len(segs) != 1 || segs[0].Sealed || l.LogStartOffset() != segs[0].BaseOffset {
		t.Fatalf("after deleting everything deletable: %+v start %d", segs, l.LogStartOffset())
	}
	start := l.LogStartOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, testOptions(DiskFS{}))
	defer l.Close()
	if l.LogStartOffset() != start || l.LogEndOffset() != 80 {
		t.Fatalf("reopen: start %d LEO %d", l.LogStartOffset(), l.LogEndOffset())
	}
	checkSeq(t, readRecords(t, l, start, 80), start, int(start))
}

func TestOffsetForTimestamp(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testOptions(DiskFS{}))
	// Timestamps per batch of 4 go up by 10 with a dip every 7th batch, so the
	// log is not sorted by time.
	type batchTs struct{ base, ts int64 }
	var all []batchTs
	for i := range 60 {
		ts := int64(1000 + i*10)
		if i%7 == 6 {
			ts = 500
		}
		if _, err := l.Append(testutil.SeqBatch(t, int64(i*4), 4, ts, 300, []byte("k")), 0); err != nil {
			t.Fatal(err)
		}
		all = append(all, batchTs{int64(i * 4), ts})
	}
	// The expected answer by brute force over every record.
	want := func(target int64) (int64, bool) {
		for _, b := range all {
			for j := range int64(4) {
				if b.ts+j >= target {
					return b.base + j, true
				}
			}
		}
		return 0, false
	}
	check := func(l *Log) {
		t.Helper()
		for _, target := range []int64{0, 500, 503, 504, 999, 1000, 1001, 1003, 1004, 1255, 1300, 1593, 1594, 5000} {
			got, ts, ok, err := l.OffsetForTimestamp(target)
			w, wok := want(target)
			if err != nil || ok != wok || got != w || (ok && ts < target) {
				t.Errorf("OffsetForTimestamp(%d) = %d (ts %d) %v %v, want %d %v", target, got, ts, ok, err, w, wok)
			}
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Again from indexes loaded from disk, and again after they are rebuilt.
	l = mustOpen(t, dir, testOptions(DiskFS{}))
	check(l)
	l.Close()
	matches, _ := filepath.Glob(filepath.Join(dir, "*.timeindex"))
	for _, m := range matches {
		os.Remove(m)
	}
	l = mustOpen(t, dir, testOptions(DiskFS{}))
	defer l.Close()
	if len(l.Recovery().RebuiltIndexes) == 0 {
		t.Fatal("time indexes were removed but none rebuilt")
	}
	check(l)
}

func TestLogAppendTimeLookup(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(DiskFS{}))
	defer l.Close()
	for i := range 5 {
		b := testutil.SeqBatch(t, int64(i), 3, 1, 100, []byte("k")) // producer times are tiny
		b.SetLogAppendTime(int64(10_000 + i*100))
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	if off, ts, ok, err := l.OffsetForTimestamp(10_150); err != nil || !ok || off != 6 || ts != 10_200 {
		t.Fatalf("lookup by append time: %d (ts %d) %v %v, want 6 at 10200", off, ts, ok, err)
	}
	if segs := l.Segments(); segs[0].MinTimestamp != 10_000 || segs[0].MaxTimestamp != 10_400 {
		t.Fatalf("segment times %+v", segs[0])
	}
}

func TestWaitForHighWatermark(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(DiskFS{}))
	if _, err := l.Append(testutil.SeqBatch(t, 0, 2, 0, 10, []byte("k")), 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.WaitForHighWatermark(context.Background(), 0) }()
	select {
	case err := <-done:
		t.Fatalf("wait returned %v before the high watermark moved", err)
	default:
	}
	l.SetHighWatermark(2)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if l.HighWatermark() != 2 {
		t.Fatalf("HW %d", l.HighWatermark())
	}
	l.SetHighWatermark(99) // clamped to LEO
	if l.HighWatermark() != 2 {
		t.Fatalf("HW %d past LEO", l.HighWatermark())
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- l.WaitForHighWatermark(ctx, 5) }()
	cancel()
	wantErr(t, <-done, context.Canceled)

	go func() { done <- l.WaitForLogEnd(context.Background(), 2) }()
	if _, err := l.Append(testutil.SeqBatch(t, 0, 1, 0, 10, []byte("k")), 0); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	go func() { done <- l.WaitForHighWatermark(context.Background(), 10) }()
	l.Close()
	wantErr(t, <-done, ErrClosed)
}

// Readers tail the log while appenders write: every reader sees a gapless,
// valid prefix. Run with -race.
func TestConcurrentReadersAndAppenders(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(DiskFS{}))
	defer l.Close()
	const writers, perWriter = 4, 60
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				if _, err := l.Append(testutil.SeqBatch(t, int64(w*1000+i), 2, 0, 200, []byte("k")), 0); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	readErr := make(chan error, 2)
	for range 2 {
		go func() {
			off, want := int64(0), int64(writers*perWriter*2)
			for off < want {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := l.WaitForLogEnd(ctx, off)
				cancel()
				if err != nil {
					readErr <- err
					return
				}
				res, err := l.Read(off, 4096, l.LogEndOffset())
				if err != nil {
					readErr <- err
					return
				}
				for rest := res.Data; len(rest) > 0; {
					b, next, err := record.Next(rest)
					if err != nil {
						readErr <- err
						return
					}
					if b.BaseOffset() != off {
						readErr <- errors.New("gap or overlap while tailing")
						return
					}
					off, rest = b.NextOffset(), next
				}
			}
			readErr <- nil
		}()
	}
	wg.Wait()
	for range 2 {
		if err := <-readErr; err != nil {
			t.Fatal(err)
		}
	}
}

func TestOnDurableAndAppendUnflushed(t *testing.T) {
	var mu sync.Mutex
	var seen []int64
	opts := testOptions(memfs.New())
	opts.OnDurable = func(d int64) { mu.Lock(); seen = append(seen, d); mu.Unlock() }
	l := mustOpen(t, "/log", opts)
	defer l.Close()
	lastSeen := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			return -1
		}
		return seen[len(seen)-1]
	}

	// FlushAlways: OnDurable has reported the batch by the time Append returns.
	if _, err := l.Append(testutil.SeqBatch(t, 0, 3, 0, 10, []byte("k")), 0); err != nil {
		t.Fatal(err)
	}
	if got := lastSeen(); got < 3 {
		t.Fatalf("OnDurable saw %d after Append returned, want >= 3", got)
	}

	// AppendUnflushed returns before any fsync; a roll makes it durable.
	if err := l.Reconfigure(withFlush(l.Config(), FlushNever)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendUnflushed(testutil.SeqBatch(t, 3, 2, 0, 10, []byte("k")), 0); err != nil {
		t.Fatal(err)
	}
	if l.DurableOffset() != 3 || lastSeen() != 3 {
		t.Fatalf("durable %d, OnDurable %d: an unflushed append was counted as durable", l.DurableOffset(), lastSeen())
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if l.DurableOffset() != 5 || lastSeen() != 5 {
		t.Fatalf("after roll durable %d, OnDurable %d, want 5", l.DurableOffset(), lastSeen())
	}
}

func TestResetTo(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testOptions(DiskFS{}))
	for i := range 20 {
		if _, err := l.Append(testutil.SeqBatch(t, int64(i*3), 3, 0, 400, []byte("k")), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.ResetTo(1000); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1000 || l.HighWatermark() != 1000 || len(l.Segments()) != 1 {
		t.Fatalf("after reset: start %d end %d hw %d segments %d", l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark(), len(l.Segments()))
	}
	_, err := l.Read(10, 100, 2000)
	wantErr(t, err, ErrOffsetOutOfRange)
	res, err := l.Append(testutil.SeqBatch(t, 1000, 2, 0, 10, []byte("k")), 3)
	if err != nil || res.BaseOffset != 1000 {
		t.Fatalf("append after reset: %+v %v", res, err)
	}
	l.Close()
	l = mustOpen(t, dir, testOptions(DiskFS{}))
	defer l.Close()
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1002 || len(l.Segments()) != 1 {
		t.Fatalf("after reopen: start %d end %d segments %d", l.LogStartOffset(), l.LogEndOffset(), len(l.Segments()))
	}
	checkSeq(t, readRecords(t, l, 1000, 1002), 1000, 1000)
}

// AppendVerified trusts the caller with the CRC, not with the layout: a
// batch whose length field lies is still refused, so the log stays
// readable.
func TestAppendVerifiedChecksTheLayout(t *testing.T) {
	l := mustOpen(t, t.TempDir(), testOptions(DiskFS{}))
	defer l.Close()
	b := testutil.SeqBatch(t, 0, 3, 0, 10, []byte("k"))
	b[len(b)-1] ^= 0xff // the CRC no longer matches: the caller said it checked
	if _, err := l.AppendVerified(b, 0); err != nil {
		t.Fatalf("a batch with a bad CRC, verified by the caller: %v", err)
	}
	short := testutil.SeqBatch(t, 0, 3, 0, 10, []byte("k"))
	if _, err := l.AppendVerified(short[:len(short)-1], 0); !errors.Is(err, ErrInvalidBatch) {
		t.Fatalf("a batch shorter than its length field: %v, want ErrInvalidBatch", err)
	}
	if l.LogEndOffset() != 3 {
		t.Fatalf("log end %d, want 3", l.LogEndOffset())
	}
}
