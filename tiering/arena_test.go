package tiering

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// Every test of the package reads through poisoned buffers: a chunk's
// buffer overwritten as it goes back to the arena shows in any read that
// still looks at it, and in the bytes compared with what was written.
func init() { PoisonRecycledBuffers() }

func TestArenaRecyclesWithinItsLimit(t *testing.T) {
	const chunk = 64 << 10
	a := newArena(3*chunk, chunk) // classes of 4 KiB
	defer a.close()
	b1, pooled1 := a.get(chunk)
	b2, pooled2 := a.get(chunk - 100) // the same class
	if !pooled1 || !pooled2 || len(b1) != chunk || len(b2) != chunk-100 {
		t.Fatalf("got %d (pooled %v) and %d (pooled %v)", len(b1), pooled1, len(b2), pooled2)
	}
	copy(b1, bytes.Repeat([]byte{1}, chunk))
	a.put(b1)
	if out, free := a.held(); out != chunk || free != chunk {
		t.Fatalf("held %d out, %d free; want %d and %d", out, free, chunk, chunk)
	}
	// Given back, the buffer is poisoned, then handed out again.
	b3, pooled := a.get(chunk - 5)
	if !pooled || &b3[0] != &b1[0] || a.reused.Load() != 1 {
		t.Fatalf("a free buffer of the class was not reused (pooled %v, reused %d)", pooled, a.reused.Load())
	}
	if b3[0] != poisonByte || b3[chunk-6] != poisonByte {
		t.Fatal("a buffer given back was not poisoned")
	}
	// With three chunks' worth out, the next comes from the heap, counted,
	// and is not the arena's to take back.
	if _, pooled := a.get(chunk); !pooled {
		t.Fatal("the third buffer did not come from the arena")
	}
	if _, pooled := a.get(chunk); pooled || a.heapBuffers.Load() != 1 {
		t.Fatalf("past its limit the arena handed out a buffer (pooled %v, %d from the heap)", pooled, a.heapBuffers.Load())
	}
	// A free buffer of another class is given up to make room.
	a.put(b2)
	a.put(b3)
	small, pooled := a.get(5 << 10)
	if !pooled || cap(small) != 8<<10 {
		t.Fatalf("small buffer: pooled %v, capacity %d", pooled, cap(small))
	}
	if out, free := a.held(); out+free > 3*chunk {
		t.Fatalf("the arena holds %d bytes, over its limit %d", out+free, 3*chunk)
	}
	// Larger than the arena keeps: the heap's.
	if _, pooled := a.get(3 * chunk); pooled {
		t.Fatal("a buffer over twice a chunk came from the arena")
	}
}

// TestColdReadReleasedChunkIsRecycled: a read's batches stay intact while
// the read holds its chunk, however the cache churns; once released and
// evicted, the chunk's buffer goes back to the arena. A cached chunk is
// served to the next read with the bytes it was fetched with.
//
// The test never reads the batches after their release: the arena may
// have unmapped the buffer by then (it gives up free buffers of one size
// class for another), and the read would fault. It watches the buffer
// come back instead (returnedHook).
func TestColdReadReleasedChunkIsRecycled(t *testing.T) {
	f := threeSegments(t)
	r := f.reader(ReaderConfig{ChunkBytes: 4 << 10, CacheBytes: 8 << 10, ReadAhead: -1})
	held, err := r.Read(f.ctx, f.ref, 0, 3000)
	if err != nil {
		t.Fatal(err)
	}
	f.checkRead(held, 0, 3000)
	want := bytes.Clone(held.Batches)
	heldAt := uintptr(unsafe.Pointer(unsafe.SliceData(held.Batches)))
	var returned atomic.Bool
	hook := func(buf []byte) {
		base := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
		if heldAt >= base && heldAt < base+uintptr(len(buf)) {
			returned.Store(true)
		}
	}
	returnedHook.Store(&hook)
	defer returnedHook.Store(nil)

	released, err := r.Read(f.ctx, f.ref, 0, 3000)
	if err != nil {
		t.Fatal(err)
	}
	released.Release()
	released.Release() // a second release does nothing
	// Churn the two-chunk cache through every chunk of the tier.
	readThrough := func() {
		for off := int64(0); off < f.next; {
			res, err := r.Read(f.ctx, f.ref, off, 5000)
			if err != nil {
				t.Fatal(err)
			}
			f.checkRead(res, off, 5000)
			off = res.NextOffset
			res.Release()
		}
		r.chunks.wait()
	}
	readThrough()
	if returned.Load() {
		t.Fatal("the buffer of a read not yet released went back to the arena")
	}
	if !bytes.Equal(held.Batches, want) {
		t.Fatal("the batches of a read not yet released changed under it")
	}
	held.Release()
	// Now nothing refers to chunk 0 but the cache: once it lets go of it
	// too, its buffer is back in the arena.
	readThrough()
	if chunkCached(r, f.segs[0].Key, 0) {
		t.Fatal("chunk 0 is still cached after reading the whole tier through a two-chunk cache")
	}
	if !returned.Load() {
		t.Fatal("a released, evicted chunk's buffer was not given back to the arena")
	}
	if s := r.Stats(); s.ArenaReused == 0 {
		t.Fatalf("no buffer was reused: %+v", s)
	}
}

// TestColdReadArenaUnderConcurrentReaders: many readers of one partition
// at random offsets, through a cache of a few chunks that evicts all the
// time, each holding what it read for a while (as a response not yet sent
// does) before comparing every byte with what was written and releasing
// it. A buffer recycled while a read still referred to it shows as
// poisoned or foreign bytes, and, with -race, as a race between the reuse
// and the read. Once every read is released and the reader closed, the
// arena has every buffer back.
func TestColdReadArenaUnderConcurrentReaders(t *testing.T) {
	f := threeSegments(t)
	r := f.reader(ReaderConfig{ChunkBytes: 4 << 10, CacheBytes: 16 << 10, ReadAhead: 2, MaxGets: 4})
	deadline := time.Now().Add(10 * time.Second)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			off := rng.Int64N(f.next)
			for i := 0; i < 300 && time.Now().Before(deadline); i++ {
				if rng.IntN(8) == 0 {
					off = rng.Int64N(f.next) // mostly sequential, sometimes a jump
				}
				maxBytes := 500 + rng.IntN(6000)
				res, err := r.Read(f.ctx, f.ref, off, maxBytes)
				if err != nil {
					t.Error(err)
					return
				}
				want := f.bytesFrom(off)[:len(res.Batches)]
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond) // a slow send
				}
				if !bytes.Equal(res.Batches, want) {
					t.Errorf("read at %d: %d bytes differ from those written", off, len(res.Batches))
					return
				}
				next := res.NextOffset
				res.Release()
				if off = next; off >= f.next {
					off = 0
				}
			}
		}()
	}
	wg.Wait()
	s := r.Stats()
	if s.ArenaReused == 0 {
		t.Fatalf("no buffer was recycled: %+v", s)
	}
	t.Logf("%d chunk GETs, %d buffers reused, %d from the heap", s.ChunkGets, s.ArenaReused, s.ArenaHeapBuffers)
	r.Close()
	if out, _ := r.arena.held(); out != 0 {
		t.Fatalf("after every read was released and the reader closed, %d bytes of buffers are still out", out)
	}
}
