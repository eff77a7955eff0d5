package tiering

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/tiering/objstore"
)

// TestColdReadAheadReachesSeveralSegmentsAhead: with segments smaller than
// a chunk, read-ahead fetches the next ReadAhead segments, not just the
// next one, so a replay of small objects has several in flight at once.
func TestColdReadAheadReachesSeveralSegmentsAhead(t *testing.T) {
	f := newColdFixture(t)
	for range 6 {
		f.addSegment(batchSpec{count: 6, records: 1, valueLen: 400}) // < 4 KiB
	}
	r := f.reader(ReaderConfig{ChunkBytes: 4 << 10, ReadAhead: 4})
	first, err := r.Read(f.ctx, f.ref, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The second read continues the first: read-ahead starts.
	if _, err := r.Read(f.ctx, f.ref, first.NextOffset, 1); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the next four segments' chunks", func() bool {
		for _, seg := range f.segs[1:5] {
			if !chunkCached(r, seg.Key, 0) {
				return false
			}
		}
		return true
	})
	// Reading those segments never waits for a GET of its own (their
	// footers were read ahead too). Read-ahead runs on meanwhile, into the
	// sixth segment.
	before := r.Stats()
	for off := f.segs[1].BaseOffset; off < f.segs[5].BaseOffset; {
		res, err := r.Read(f.ctx, f.ref, off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		f.checkRead(res, off, 1<<20)
		off = res.NextOffset
	}
	s := r.Stats()
	if s.ChunkGets-s.ReadAheadChunks != before.ChunkGets-before.ReadAheadChunks || s.ChunkMisses != before.ChunkMisses {
		t.Fatalf("reads of segments read ahead fetched on their own: before %+v, after %+v", before, s)
	}
}

// TestColdReadAheadCountsBytes: read-ahead's budget is ReadAhead chunks'
// worth of bytes, so a replay of objects much smaller than a chunk has as
// many bytes in flight as one of large objects: here ReadAhead 2 of 4 KiB
// chunks reaches as many ~1 KiB objects as make 8 KiB, not two.
func TestColdReadAheadCountsBytes(t *testing.T) {
	f := newColdFixture(t)
	for range 16 {
		f.addSegment(batchSpec{count: 2, records: 1, valueLen: 400})
	}
	const cb, ahead = 4 << 10, 2
	r := f.reader(ReaderConfig{ChunkBytes: cb, ReadAhead: ahead})
	first, err := r.Read(f.ctx, f.ref, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// The second read continues the first (the rest of segment 0, if any,
	// else segment 1): read-ahead starts from the segment it ends in.
	res, err := r.Read(f.ctx, f.ref, first.NextOffset, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	from := f.batches[f.batchAt(res.NextOffset-1)].seg + 1
	want, budget := 0, int64(ahead*cb)
	for _, seg := range f.segs[from:] {
		if budget <= 0 {
			break
		}
		want++
		budget -= seg.LogLen
	}
	if want <= ahead+1 {
		t.Fatalf("segments of %d log bytes: the test wants many within %d bytes", f.segs[0].LogLen, ahead*cb)
	}
	testutil.WaitFor(t, 10*time.Second, "read-ahead to settle", func() bool { return len(r.prefetching) == 0 })
	got := 0
	for _, seg := range f.segs[from:] {
		if chunkCached(r, seg.Key, 0) {
			got++
		}
	}
	if got != want {
		t.Fatalf("read-ahead fetched %d segments of %d log bytes ahead, want %d (%d bytes' worth)", got, f.segs[0].LogLen, want, ahead*cb)
	}
}

// primedReader returns a reader of a long segment that has read its first
// batch (chunk 0 is cached), and a gated store in front of the fixture's
// whose gate is closed: the read that continues the first starts
// read-ahead whose GETs wait at the gate.
func primedReader(t *testing.T, cfg ReaderConfig) (*coldFixture, *ColdReader, *gatedStore, ColdRead) {
	f := newColdFixture(t)
	f.addSegment(batchSpec{count: 300, records: 1, valueLen: 450}) // ~150 KiB
	g := &gatedStore{Reader: f.read}
	f.chunkBytes = cfg.ChunkBytes
	r := newTestReader(t, g, cfg)
	first, err := r.Read(f.ctx, f.ref, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	g.close(gate)
	t.Cleanup(func() { close(gate) })
	return f, r, g, first
}

// TestColdReadAheadEndsWithItsReader: read-ahead lives as long as the
// context of the read that started it, so a consumer that goes away does
// not leave downloads running that nobody will read.
func TestColdReadAheadEndsWithItsReader(t *testing.T) {
	f, r, g, first := primedReader(t, ReaderConfig{ChunkBytes: 4 << 10, ReadAhead: 4})
	gets := g.readAts.Load()
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	res, err := r.Read(ctx, f.ref, first.NextOffset, 1)
	if err != nil {
		t.Fatal(err)
	}
	f.checkRead(res, first.NextOffset, 1)
	testutil.WaitFor(t, 10*time.Second, "read-ahead GETs at the gate", func() bool { return g.readAts.Load() >= gets+4 })
	// The consumer goes away; the gate stays closed.
	cancel()
	testutil.WaitFor(t, 10*time.Second, "the read-ahead to give up", func() bool { return len(r.prefetching) == 0 })
	if s := r.Stats(); s.ReadAheadChunks != 4 || s.BytesFetched != uint64(r.cfg.ChunkBytes) {
		t.Fatalf("read-ahead after its reader left: %+v", s)
	}
}

// TestColdReadGetsInFlightAreBounded: reads and read-ahead together keep at
// most MaxGets GETs in flight.
func TestColdReadGetsInFlightAreBounded(t *testing.T) {
	f, r, g, first := primedReader(t, ReaderConfig{ChunkBytes: 4 << 10, ReadAhead: 8, MaxGets: 2})
	gets := g.readAts.Load()
	if _, err := r.Read(f.ctx, f.ref, first.NextOffset, 1); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "eight read-ahead chunks started", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.mu.prefetches) == 8
	})
	testutil.WaitFor(t, 10*time.Second, "two GETs at the gate", func() bool { return len(r.gets) == 2 && g.readAts.Load() == gets+2 })
	// A read of a chunk nobody fetches yet waits for a place too.
	far := f.batches[len(f.batches)-1]
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(ctx, f.ref, far.base, 1)
		done <- err
	}()
	testutil.WaitFor(t, 10*time.Second, "the read to wait", func() bool { return r.Stats().ChunkMisses == 2 })
	if n := g.readAts.Load(); n != gets+2 {
		t.Fatalf("%d GETs sent with 2 places", n-gets)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("read waiting for a place, cancelled: %v", err)
	}
}

// TestColdReadIsPaced: every GET of segment bytes or of a manifest head
// waits for Pace first, which is told the partition and the bytes; an
// error from Pace fails the read, and no GET is sent.
func TestColdReadIsPaced(t *testing.T) {
	f := newColdFixture(t)
	f.addSegment(batchSpec{count: 100, records: 1, valueLen: 450})
	f.addSegment(batchSpec{count: 100, records: 1, valueLen: 450})
	var mu sync.Mutex
	var calls, paced int64
	var refuse atomic.Bool
	errLimit := errors.New("over the limit")
	cfg := smallChunks()
	cfg.Pace = func(ctx context.Context, p PartitionRef, n int64) error {
		if p != f.ref || n < 0 {
			t.Errorf("paced %+v, %d bytes", p, n)
		}
		if refuse.Load() {
			return errLimit
		}
		mu.Lock()
		defer mu.Unlock()
		calls++
		paced += n
		return nil
	}
	r := f.reader(cfg)
	got := f.readAll(r, 0, 3000)
	if len(got) == 0 {
		t.Fatal("nothing read")
	}
	s := r.Stats()
	mu.Lock()
	if calls != int64(s.Gets) || paced < int64(s.BytesFetched) {
		t.Fatalf("%d GETs paced for %d bytes; the reader sent %d GETs of %d chunk bytes", calls, paced, s.Gets, s.BytesFetched)
	}
	mu.Unlock()

	refuse.Store(true)
	other := f.reader(cfg)
	before := f.opCount(objstore.OpReadAt) + f.opCount(objstore.OpGet)
	if _, err := other.Read(f.ctx, f.ref, 0, 1); !errors.Is(err, errLimit) {
		t.Fatalf("read refused by Pace: %v", err)
	}
	if n := f.opCount(objstore.OpReadAt) + f.opCount(objstore.OpGet) - before; n != 0 {
		t.Fatalf("%d reads of the store after Pace refused", n)
	}
}

// TestColdReadAheadLeavesRoomInTheCache: read-ahead never brings in more
// than half the cache's window of chunks not yet read, so with a cache of
// a few chunks a sequential reader still fetches every chunk once, instead
// of read-ahead pushing out what it fetched before the reader got there.
func TestColdReadAheadLeavesRoomInTheCache(t *testing.T) {
	f := newColdFixture(t)
	f.addSegment(batchSpec{count: 300, records: 1, valueLen: 450}) // ~150 KiB
	const cb = 4 << 10
	r := f.reader(ReaderConfig{ChunkBytes: cb, CacheBytes: 16 * cb, ReadAhead: 16})
	for off := int64(0); off < f.next; {
		res, err := r.Read(f.ctx, f.ref, off, 1)
		if err != nil {
			t.Fatal(err)
		}
		f.checkRead(res, off, 1)
		off = res.NextOffset
	}
	testutil.WaitFor(t, 10*time.Second, "read-ahead to settle", func() bool { return len(r.prefetching) == 0 })
	chunks := uint64((f.segs[0].LogLen + cb - 1) / cb)
	if s := r.Stats(); s.ChunkGets != chunks {
		t.Fatalf("%d chunk GETs for %d chunks: %+v", s.ChunkGets, chunks, s)
	}
}

// TestColdReadAheadSurvivesOtherReaders: chunks a sequential reader has
// read to the end leave the cache's window first, before chunks read-ahead
// fetched for readers that have not reached them yet. Three readers replay
// a segment each at once through a window of eight chunks; without that
// order, the chunks they finished pushed out what was fetched ahead for
// the others, which fetched them again: 20 to 30 chunks of 117 a round.
// Scheduling can still cost a GET now and then, so the test allows three a
// round, over ten rounds.
func TestColdReadAheadSurvivesOtherReaders(t *testing.T) {
	f := newColdFixture(t)
	for range 3 {
		f.addSegment(batchSpec{count: 300, records: 1, valueLen: 450}) // ~39 chunks of 4 KiB
	}
	const cb, rounds = 4 << 10, 10
	var chunks uint64
	for _, seg := range f.segs {
		chunks += uint64((seg.LogLen + cb - 1) / cb)
	}
	var extra uint64
	for range rounds {
		r := f.reader(ReaderConfig{ChunkBytes: cb, CacheBytes: 32 * cb, ReadAhead: 4})
		var wg sync.WaitGroup
		for _, seg := range f.segs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for off := seg.BaseOffset; off <= seg.LastOffset; {
					res, err := r.Read(f.ctx, f.ref, off, 1)
					if err != nil {
						t.Error(err)
						return
					}
					off = res.NextOffset
				}
			}()
		}
		wg.Wait()
		testutil.WaitFor(t, 10*time.Second, "read-ahead to settle", func() bool { return len(r.prefetching) == 0 })
		extra += r.Stats().ChunkGets - chunks
	}
	if extra > 3*rounds {
		t.Fatalf("%d chunks fetched again in %d rounds of %d chunks", extra, rounds, chunks)
	}
}
