package tiering

import (
	"context"
	"testing"

	"github.com/strata-log/strata/tiering/objstore"
)

type closeCounter struct {
	objstore.ObjectReader
	closes int
}

func (c *closeCounter) Close() error { c.closes++; return nil }

// An object's handle stays open while a read holds it, even after the
// object has left the cache, and is closed exactly once after.
func TestColdObjectHandleOutlivesEviction(t *testing.T) {
	rd := &closeCounter{}
	o := &coldObject{rd: rd}
	for range 2 {
		if !o.acquire() {
			t.Fatal("acquire of a cached object failed")
		}
	}
	o.evict()
	if o.acquire() {
		t.Fatal("acquired an evicted object")
	}
	o.release()
	if rd.closes != 0 {
		t.Fatal("closed while a read still holds it")
	}
	o.release()
	if rd.closes != 1 {
		t.Fatalf("closed %d times, want once", rd.closes)
	}
}

func TestColdObjectIndexEntries(t *testing.T) {
	f := newColdFixture(t)
	f.addSegment(batchSpec{count: 300, records: 2, valueLen: 400, ts: func(off int64) int64 { return 1000 - off }})
	r := f.reader(smallChunks())
	o, err := r.object(context.Background(), f.ref, f.segs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer o.release()
	if len(o.footer.Entries) < 3 {
		t.Fatalf("%d index entries, want several", len(o.footer.Entries))
	}
	for _, e := range o.footer.Entries {
		off := f.segs[0].BaseOffset + int64(e.Rel)
		if got := o.entryFor(off); got != e {
			t.Fatalf("entry for %d: %+v, want %+v", off, got, e)
		}
		b := f.batches[f.batchAt(off)]
		if b.base != off || b.pos != int64(e.Pos) {
			t.Fatalf("entry %+v does not name the batch at %d", e, b.pos)
		}
	}
	if s := r.Stats(); s.IndexGets != 1 {
		t.Fatalf("%d ranged reads for trailer and footer, want 1", s.IndexGets)
	}
}
