package tiering

import (
	"bytes"
	"context"
	"slices"
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

func TestChunkStarts(t *testing.T) {
	footer := func(pos ...uint32) *Footer {
		f := &Footer{}
		for i, p := range pos {
			f.Entries = append(f.Entries, IndexEntry{Rel: uint32(i), Pos: p})
		}
		return f
	}
	for _, c := range []struct {
		name   string
		f      *Footer
		logLen int64
		want   []int64
	}{
		{"one chunk", footer(0), 90, []int64{0}},
		{"no entries past the first: fixed chunks", footer(0), 350, []int64{0, 100, 200, 300}},
		{"entries in each chunk: at the first of them", footer(0, 40, 130, 170, 205, 260), 300, []int64{0, 130, 205}},
		{"an entry exactly at a chunk's start", footer(0, 100, 230), 300, []int64{0, 100, 230}},
		{"a batch larger than a chunk: fixed inside it", footer(0, 20, 290), 400, []int64{0, 100, 290, 300}},
		{"entries past a chunk's range are not taken", footer(0, 250), 300, []int64{0, 100, 250}},
	} {
		got := chunkStarts(c.f, c.logLen, 100)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: chunkStarts = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestColdReadChunksStartAtBatches: with chunks no finer than the index,
// every chunk starts at a batch, so no read copies a batch that crosses
// from one chunk into the next, and every chunk is fetched once.
func TestColdReadChunksStartAtBatches(t *testing.T) {
	f := newColdFixture(t)
	f.addSegment(batchSpec{count: 150, records: 2, valueLen: 5000}) // ~10 KiB batches, ~1.5 MiB
	const cb = 2 * coldIndexInterval
	r := f.reader(ReaderConfig{ChunkBytes: cb, ReadAhead: -1})
	starts := f.chunkStarts(f.segs[0], cb)
	if len(starts) < 5 {
		t.Fatalf("chunk starts %v: want the segment in several chunks", starts)
	}
	batchAt := map[int64]bool{}
	for _, b := range f.batches {
		batchAt[b.pos] = true
	}
	for _, s := range starts {
		if !batchAt[s] {
			t.Fatalf("chunk starts %v: %d is not where a batch starts", starts, s)
		}
	}
	got := f.readAll(r, 0, 1<<20)
	if !bytes.Equal(got, f.bytesFrom(0)) {
		t.Fatal("batches differ from those encoded")
	}
	if s := r.Stats(); s.ChunkGets != uint64(len(starts)) || s.BytesFetched != uint64(f.segs[0].LogLen) {
		t.Fatalf("%d chunk GETs of %d bytes for %d chunks of %d bytes", s.ChunkGets, s.BytesFetched, len(starts), f.segs[0].LogLen)
	}
}

// TestColdReadSmallObjectsTakeOneGet: an object no larger than a chunk is
// read whole, footer and log in one GET, and a read of it needs no other.
// Its chunk is not read again when the object is opened anew.
func TestColdReadSmallObjectsTakeOneGet(t *testing.T) {
	f := newColdFixture(t)
	for range 4 {
		f.addSegment(batchSpec{count: 6, records: 1, valueLen: 400}) // < 4 KiB
	}
	r := f.reader(smallChunks())
	got := f.readAll(r, 0, 1<<20)
	if !bytes.Equal(got, f.bytesFrom(0)) {
		t.Fatal("batches differ from those encoded")
	}
	s := r.Stats()
	var logBytes uint64
	for _, seg := range f.segs {
		if seg.Size > 4<<10 {
			t.Fatalf("segment of %d bytes: the test wants objects within a chunk", seg.Size)
		}
		logBytes += uint64(seg.LogLen)
	}
	if s.IndexGets != 4 || s.ChunkGets != 0 || s.BytesFetched != logBytes {
		t.Fatalf("four small objects read with %+v: want 4 GETs of the objects and no chunk GET", s)
	}
	if n := f.opCount(objstore.OpReadAt); n != 4 {
		t.Fatalf("%d ranged reads of the store, want 4", n)
	}
	// With the footer gone from the cache but the chunk still there, the
	// object is opened again with a read of its tail alone.
	r.forgetObject(f.segs[0].Key)
	res, err := r.Read(f.ctx, f.ref, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	f.checkRead(res, 0, 1<<20)
	if s := r.Stats(); s.BytesFetched != logBytes || s.ChunkGets != 0 {
		t.Fatalf("reopening an object whose chunk is cached fetched it again: %+v", s)
	}
}

// TestColdReadChecksEachBatchOnce: a batch's bytes (CRC and all) are
// checked once, when its chunk comes from the store, whoever fetched it;
// replays served from the cache check only the batches' offsets. With
// chunks starting at batches, a cold replay checks each log byte once and
// a warm one none, for chunks read in ranges and objects read whole.
func TestColdReadChecksEachBatchOnce(t *testing.T) {
	f := newColdFixture(t)
	f.addSegment(batchSpec{count: 150, records: 2, valueLen: 5000})
	f.addSegment(batchSpec{count: 3, records: 1, valueLen: 400}) // read whole, in one GET
	const cb = 2 * coldIndexInterval
	for _, ahead := range []int{-1, 8} {
		r := f.reader(ReaderConfig{ChunkBytes: cb, ReadAhead: ahead})
		var logLen uint64
		for _, seg := range f.segs {
			logLen += uint64(seg.LogLen)
		}
		if !bytes.Equal(f.readAll(r, 0, 64<<10), f.bytesFrom(0)) {
			t.Fatal("batches differ from those encoded")
		}
		if s := r.Stats(); s.BytesFetched != logLen {
			t.Fatalf("read ahead %d: fetched %d bytes of %d: the test wants each chunk fetched once", ahead, s.BytesFetched, logLen)
		}
		if got := r.counters.checkedBytes.Load(); got != logLen {
			t.Fatalf("read ahead %d: a cold replay checked %d bytes of batches, want each of the %d log bytes once", ahead, got, logLen)
		}
		if !bytes.Equal(f.readAll(r, 0, 64<<10), f.bytesFrom(0)) {
			t.Fatal("batches differ from those encoded on the warm replay")
		}
		if got := r.counters.checkedBytes.Load(); got != logLen {
			t.Fatalf("read ahead %d: a warm replay checked %d more bytes of batches, want none", ahead, got-logLen)
		}
	}
}
