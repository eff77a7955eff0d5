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

// gatedStore holds every ranged read at a gate while one is set, and
// counts them.
type gatedStore struct {
	objstore.Reader
	readAts atomic.Int64
	mu      sync.Mutex
	gate    chan struct{}
}

func (g *gatedStore) close(gate chan struct{}) {
	g.mu.Lock()
	g.gate = gate
	g.mu.Unlock()
}

func (g *gatedStore) Open(ctx context.Context, key string) (objstore.ObjectReader, error) {
	rd, err := g.Reader.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	return &gatedObject{ObjectReader: rd, g: g}, nil
}

type gatedObject struct {
	objstore.ObjectReader
	g *gatedStore
}

func (o *gatedObject) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	o.g.readAts.Add(1)
	o.g.mu.Lock()
	gate := o.g.gate
	o.g.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return o.ObjectReader.ReadAt(ctx, p, off)
}

// gatedFixture is a segment whose second footer entry starts a batch at
// the start of chunk 1 (chunks are one index interval, 64 KiB), and a
// reader that has the footer and chunk 0 cached.
func gatedFixture(t *testing.T) (*coldFixture, *gatedStore, *ColdReader, int64) {
	f := newColdFixture(t)
	f.addSegment(batchSpec{count: 200, records: 1, valueLen: 700})
	g := &gatedStore{Reader: f.read}
	r := newTestReader(t, g, ReaderConfig{ChunkBytes: coldIndexInterval, ReadAhead: -1})
	if _, err := r.Read(f.ctx, f.ref, 0, 1); err != nil {
		t.Fatal(err)
	}
	var target coldBatch
	for _, b := range f.batches {
		if b.pos >= coldIndexInterval {
			target = b
			break
		}
	}
	if target.pos+int64(len(target.data)) > 2*coldIndexInterval {
		t.Fatal("the target batch spans chunks")
	}
	return f, g, r, target.base
}

func TestColdReadConcurrentReadersShareOneGet(t *testing.T) {
	f, g, r, target := gatedFixture(t)
	const readers = 16
	before, shared := g.readAts.Load(), r.Stats().SharedGets
	gate := make(chan struct{})
	g.close(gate)
	var wg sync.WaitGroup
	results := make([]ColdRead, readers)
	errs := make([]error, readers)
	for i := range readers {
		wg.Go(func() { results[i], errs[i] = r.Read(f.ctx, f.ref, target, 1) })
	}
	// Every reader but the one sending the GET joins it.
	testutil.WaitFor(t, 10*time.Second, "readers to join the GET", func() bool { return r.Stats().SharedGets-shared == readers-1 })
	g.close(nil)
	close(gate)
	wg.Wait()
	for i := range readers {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		f.checkRead(results[i], target, 1)
	}
	if n := g.readAts.Load() - before; n != 1 {
		t.Fatalf("%d concurrent readers of one chunk sent %d GETs, want 1", readers, n)
	}
	if n := f.opCount(objstore.OpReadAt); uint64(n) != r.Stats().ChunkGets+r.Stats().IndexGets {
		t.Fatalf("the store saw %d ranged reads, the reader counts %+v", n, r.Stats())
	}
}

func TestColdReaderCloseCancelsReads(t *testing.T) {
	f, g, r, target := gatedFixture(t)
	g.close(make(chan struct{})) // never opens
	errc := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := r.Read(f.ctx, f.ref, target, 1)
			errc <- err
		}()
	}
	testutil.WaitFor(t, 10*time.Second, "both reads to wait for the store", func() bool { return r.Stats().ChunkMisses == 3 })
	r.Close()
	for range 2 {
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("read cut short by Close: %v", err)
		}
	}
}

func TestColdReadAheadForSequentialReads(t *testing.T) {
	f := newColdFixture(t)
	f.addSegment(batchSpec{count: 200, records: 1, valueLen: 450}) // ~100 KiB
	const cb = 4 << 10
	// Reads at random places are not sequential: no read-ahead.
	random := f.reader(ReaderConfig{ChunkBytes: cb, ReadAhead: 2})
	for _, off := range []int64{150, 20, 90, 30} {
		if _, err := random.Read(f.ctx, f.ref, off, 2000); err != nil {
			t.Fatal(err)
		}
	}
	if s := random.Stats(); s.ReadAheadChunks != 0 {
		t.Fatalf("random reads read ahead %d chunks", s.ReadAheadChunks)
	}

	r := f.reader(ReaderConfig{ChunkBytes: cb, ReadAhead: 2})
	demand := func() uint64 { s := r.Stats(); return s.ChunkGets - s.ReadAheadChunks }
	first, err := r.Read(f.ctx, f.ref, 0, 2000)
	if err != nil {
		t.Fatal(err)
	}
	// The second read continues the first: the two chunks after its end
	// are fetched in the background.
	second, err := r.Read(f.ctx, f.ref, first.NextOffset, 2000)
	if err != nil {
		t.Fatal(err)
	}
	end := f.batches[f.batchAt(second.NextOffset)].pos
	last := (end - 1) / cb
	testutil.WaitFor(t, 10*time.Second, "read-ahead", func() bool {
		return chunkCached(r, f.segs[0].Key, last+1) && chunkCached(r, f.segs[0].Key, last+2)
	})
	before, hits := demand(), r.Stats().ChunkHits

	// Reading on through those chunks needs no GET of its own.
	off := second.NextOffset
	for {
		b := f.batches[f.batchAt(off)]
		if b.pos+int64(len(b.data)) > (last+3)*cb {
			break
		}
		// One batch a read: no read looks past it, into chunks whose
		// read-ahead may still be on its way.
		res, err := r.Read(f.ctx, f.ref, off, 1)
		if err != nil {
			t.Fatal(err)
		}
		f.checkRead(res, off, 1)
		off = res.NextOffset
	}
	s := r.Stats()
	if demand() != before || s.ChunkHits <= hits || s.ReadAheadChunks < 2 {
		t.Fatalf("reads through read-ahead chunks: %d GETs of their own (want %d), %+v", demand(), before, s)
	}
}

func TestColdReadAheadCrossesIntoTheNextSegment(t *testing.T) {
	f := newColdFixture(t)
	f.addSegment(batchSpec{count: 40, records: 1, valueLen: 450})
	f.addSegment(batchSpec{count: 40, records: 1, valueLen: 450})
	r := f.reader(ReaderConfig{ChunkBytes: 4 << 10, ReadAhead: 2})
	next := f.segs[1].BaseOffset
	for off := int64(0); off < next; {
		// Let earlier read-ahead finish, so that the read that reaches the
		// segment's end finds a free read-ahead slot.
		testutil.WaitFor(t, 10*time.Second, "read-ahead to settle", func() bool { return len(r.prefetching) == 0 })
		res, err := r.Read(f.ctx, f.ref, off, 2000)
		if err != nil {
			t.Fatal(err)
		}
		off = res.NextOffset
	}
	testutil.WaitFor(t, 10*time.Second, "the next segment's first chunk", func() bool { return chunkCached(r, f.segs[1].Key, 0) })
	before := r.Stats()
	res, err := r.Read(f.ctx, f.ref, next, 2000)
	if err != nil {
		t.Fatal(err)
	}
	f.checkRead(res, next, 2000)
	s := r.Stats()
	if s.ChunkGets-s.ReadAheadChunks != before.ChunkGets-before.ReadAheadChunks || s.IndexGets != before.IndexGets {
		t.Fatalf("first read of the next segment fetched on its own: before %+v, after %+v", before, s)
	}
}

func TestColdReadCacheStaysWithinItsBudget(t *testing.T) {
	f := threeSegments(t)
	for _, budget := range []int64{1000, 3 * 4 << 10, 64 << 10} {
		r := f.reader(ReaderConfig{ChunkBytes: 4 << 10, CacheBytes: budget, ReadAhead: 2})
		check := func() {
			r.chunks.wait()
			if n := r.Stats().CachedBytes; n > budget {
				t.Fatalf("budget %d: the cache holds %d bytes", budget, n)
			}
		}
		for off := int64(0); off < f.next; {
			res, err := r.Read(f.ctx, f.ref, off, 3000)
			if err != nil {
				t.Fatal(err)
			}
			f.checkRead(res, off, 3000)
			check()
			off = res.NextOffset
		}
		for i := range 200 {
			off := int64(i*7919) % f.next
			res, err := r.Read(f.ctx, f.ref, off, 5000)
			if err != nil {
				t.Fatal(err)
			}
			f.checkRead(res, off, 5000)
			check()
		}
	}
}

// TestColdReadsOfPartitionsGoToTheStoreAtOnce: a consumer reads each of
// its partitions through a fetch stream of its own, and the reads of
// different partitions do not wait for one another: with the store
// holding every ranged read, each partition has its GET in flight at
// once, and every read completes once the store answers.
func TestColdReadsOfPartitionsGoToTheStoreAtOnce(t *testing.T) {
	const partitions = 4
	store := objstore.NewMemory()
	var fs []*coldFixture
	for p := range int32(partitions) {
		ref := coldTestRef
		ref.Partition = p
		f := newColdFixtureOn(t, store, ref)
		f.addSegment(batchSpec{count: 20, records: 2, valueLen: 100})
		fs = append(fs, f)
	}
	g := &gatedStore{Reader: store}
	r := newTestReader(t, g, ReaderConfig{ReadAhead: -1})
	gate := make(chan struct{})
	g.close(gate)
	var wg sync.WaitGroup
	results := make([]ColdRead, partitions)
	errs := make([]error, partitions)
	for i, f := range fs {
		wg.Go(func() { results[i], errs[i] = r.Read(f.ctx, f.ref, 0, 1<<20) })
	}
	testutil.WaitFor(t, 10*time.Second, "a GET of every partition at the store at once", func() bool { return g.readAts.Load() == partitions })
	g.close(nil)
	close(gate)
	wg.Wait()
	for i, f := range fs {
		if errs[i] != nil {
			t.Fatalf("partition %d: %v", f.ref.Partition, errs[i])
		}
		f.checkRead(results[i], 0, 1<<20)
	}
}
