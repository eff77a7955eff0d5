package tiering

import (
	"bytes"
	"testing"

	"github.com/strata-log/strata/tiering/objstore"
)

// TestColdReadAcrossClosedParts reads a cold tier whose head lists closed
// parts (the first with expired segments skipped) and a tail. The parts
// are written directly, as Committer would after partSegments appends,
// which is much cheaper than making 1000 appends per part.
func TestColdReadAcrossClosedParts(t *testing.T) {
	f := newColdFixture(t)
	// Timestamps are not monotonic across segments: part MaxTs matters.
	for _, base := range []int64{500, 100, 900, 300, 700, 200, 1000} {
		f.addSegment(batchSpec{count: 6, records: 2, valueLen: 800, ts: func(off int64) int64 { return base + off%50 }})
	}
	groups := [][]SegmentRef{f.segs[0:3], f.segs[3:5], f.segs[5:6]}
	h := cloneHead(f.com.Head())
	h.Parts, h.Tail = nil, f.segs[6:]
	for seq, segs := range groups {
		part := &Part{Seq: uint64(seq), Segments: segs}
		data, err := EncodePart(part)
		if err != nil {
			t.Fatal(err)
		}
		key := f.ref.newPartKey(part.Seq)
		if _, err := f.store.Put(f.ctx, key, data, objstore.WriteOptions{IfAbsent: true}); err != nil {
			t.Fatal(err)
		}
		skip := 0
		if seq == 0 {
			skip = 1 // the first segment has expired
		}
		h.Parts = append(h.Parts, partRef(key, part, skip))
	}
	h.NextSeq, h.Generation = uint64(len(groups)), h.Generation+1
	data, err := EncodeHead(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Put(f.ctx, f.ref.ManifestKey(), data, objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := f.segs[1].BaseOffset

	r := f.reader(smallChunks())
	for _, maxBytes := range []int{1, 5000, 1 << 20} {
		if got := f.readAll(r, start, maxBytes); !bytes.Equal(got, f.bytesFrom(start)) {
			t.Fatalf("max %d: the batches read differ from those encoded", maxBytes)
		}
	}
	// One head and three parts, each read once.
	if s := r.Stats(); s.ManifestGets != 4 || s.PartsCached != 3 {
		t.Fatalf("%d manifest GETs with %d parts cached, want 4 and 3", s.ManifestGets, s.PartsCached)
	}
	_, err = r.Read(f.ctx, f.ref, start-1, 1)
	if oor := outOfRange(t, err); oor.Start != start || oor.End != f.next {
		t.Fatalf("read of an expired segment: %+v", *oor)
	}

	// Timestamps: brute force over the live records.
	var live []coldRecord
	for _, rec := range f.records {
		if rec.offset >= start {
			live = append(live, rec)
		}
	}
	for ts := int64(0); ts <= 1200; ts += 7 {
		wo, wt, wf := int64(-1), int64(-1), false
		for _, rec := range live {
			if rec.ts >= ts {
				wo, wt, wf = rec.offset, rec.ts, true
				break
			}
		}
		off, at, found, err := r.OffsetForTimestamp(f.ctx, f.ref, ts)
		if err != nil || off != wo || at != wt || found != wf {
			t.Fatalf("ts %d: got %d %d %v %v, want %d %d %v", ts, off, at, found, err, wo, wt, wf)
		}
	}
	// Later than every part's MaxTs: the parts are not even read.
	fresh := f.reader(smallChunks())
	if _, _, found, err := fresh.OffsetForTimestamp(f.ctx, f.ref, 1000); !found || err != nil {
		t.Fatalf("found %v, %v", found, err)
	}
	if s := fresh.Stats(); s.ManifestGets != 1 {
		t.Fatalf("%d manifest GETs, want the head's only", s.ManifestGets)
	}
}

// TestColdReadAfterManyAppends takes the realistic path to closed parts:
// partSegments+1 appends through Committer, so that the first thousand
// segments move into a closed part.
func TestColdReadAfterManyAppends(t *testing.T) {
	f := newColdFixture(t)
	for range partSegments + 1 {
		f.addSegment(batchSpec{count: 1, records: 1, valueLen: 10})
	}
	if h := f.com.Head(); len(h.Parts) != 1 || len(h.Tail) != 1 {
		t.Fatalf("head has %d parts and %d tail segments", len(h.Parts), len(h.Tail))
	}
	r := f.reader(smallChunks())
	if got := f.readAll(r, 0, 1<<20); !bytes.Equal(got, f.bytesFrom(0)) {
		t.Fatal("the batches read differ from those encoded")
	}
	if off, _, found, err := r.OffsetForTimestamp(f.ctx, f.ref, 999); !found || err != nil || off != 999 {
		t.Fatalf("got %d %v %v", off, found, err)
	}
}
