package tiering

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchTier is 64 MiB of 1 KiB records, 16 to a batch, in four 16 MiB
// segments of a memory store.
func benchTier(b *testing.B) *coldFixture {
	f := newColdFixture(b)
	for range 4 {
		f.addSegment(batchSpec{count: 1000, records: 16, valueLen: 1 << 10})
	}
	return f
}

func (f *coldFixture) tierBytes() int64 {
	var n int64
	for _, s := range f.segs {
		n += s.LogLen
	}
	return n
}

// readTier reads the whole tier in reads of up to maxBytes.
func readTier(b *testing.B, f *coldFixture, r *ColdReader, maxBytes int) {
	for off := int64(0); off < f.next; {
		res, err := r.Read(f.ctx, f.ref, off, maxBytes)
		if err != nil {
			b.Fatal(err)
		}
		off = res.NextOffset
	}
}

func BenchmarkColdReadSequential(b *testing.B) {
	f := benchTier(b)
	b.Run("cold", func(b *testing.B) {
		b.SetBytes(f.tierBytes())
		for b.Loop() {
			r, err := NewColdReader(f.store, ReaderConfig{})
			if err != nil {
				b.Fatal(err)
			}
			readTier(b, f, r, 1<<20)
			r.Close()
		}
	})
	for _, maxBytes := range []int{1 << 20, 64 << 10} {
		b.Run(fmt.Sprintf("warm/max=%dKiB", maxBytes>>10), func(b *testing.B) {
			r, err := NewColdReader(f.store, ReaderConfig{})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			readTier(b, f, r, maxBytes)
			r.chunks.wait()
			b.SetBytes(f.tierBytes())
			b.ResetTimer()
			for b.Loop() {
				readTier(b, f, r, maxBytes)
			}
			b.StopTimer()
			if s := r.Stats(); s.ChunkMisses > 16 {
				b.Fatalf("a warm cache missed %d times", s.ChunkMisses)
			}
		})
	}
}

func BenchmarkColdReadRandom(b *testing.B) {
	f := benchTier(b)
	for _, bc := range []struct {
		name  string
		cache int64
	}{
		{"warm", 256 << 20},       // the tier fits
		{"cache=16MiB", 16 << 20}, // a quarter of the tier fits
	} {
		b.Run(bc.name, func(b *testing.B) {
			r, err := NewColdReader(f.store, ReaderConfig{CacheBytes: bc.cache})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			readTier(b, f, r, 1<<20)
			r.chunks.wait()
			rng := rand.New(rand.NewPCG(3, 4))
			var n int64
			b.ResetTimer()
			for b.Loop() {
				res, err := r.Read(f.ctx, f.ref, rng.Int64N(f.next), 64<<10)
				if err != nil {
					b.Fatal(err)
				}
				n += int64(len(res.Batches))
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds()/1e6, "MB/s")
			s := r.Stats()
			b.ReportMetric(float64(s.ChunkHits)/float64(s.ChunkHits+s.ChunkMisses), "hit-ratio")
		})
	}
}

// BenchmarkColdReadEvicting replays the 64 MiB tier again and again
// through a 16 MiB cache, so that every chunk is fetched anew and evicted:
// the steady state of a long replay. "arena" recycles chunk buffers;
// "heap" gives the arena no room, so that every chunk is read into a fresh
// heap buffer as before it existed. Poisoning is off: it is a test's cost.
func BenchmarkColdReadEvicting(b *testing.B) {
	f := benchTier(b)
	defer poisonReturned.Store(poisonReturned.Load())
	poisonReturned.Store(false)
	for _, heap := range []bool{false, true} {
		name := "arena"
		if heap {
			name = "heap"
		}
		b.Run(name, func(b *testing.B) {
			r, err := NewColdReader(f.store, ReaderConfig{CacheBytes: 16 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			if heap {
				r.arena.limit = 0
			}
			read := func() {
				for off := int64(0); off < f.next; {
					res, err := r.Read(f.ctx, f.ref, off, 1<<20)
					if err != nil {
						b.Fatal(err)
					}
					off = res.NextOffset
					res.Release()
				}
			}
			read()
			b.SetBytes(f.tierBytes())
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				read()
			}
			b.StopTimer()
			s := r.Stats()
			b.ReportMetric(float64(s.ArenaReused)/float64(s.ChunkGets), "reused/GET")
		})
	}
}
