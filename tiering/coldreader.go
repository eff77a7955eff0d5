package tiering

// The cold read path: any broker, leader or not, serves a partition's
// history from the bucket.
//
//	Read(offset) -> manifest head (cached for HeadTTL; parts cached, immutable)
//	             -> the segment holding offset
//	             -> its trailer and footer (one ranged read, cached by key;
//	                the whole object when it is no larger than a chunk)
//	             -> the footer's index: where to start scanning
//	             -> chunks of log bytes, starting at batches (ranged GETs
//	                through the chunk cache)
//	             -> whole batches, each checked, a slice of the cached chunk
//
// A reader that continues where its last read ended gets the next chunks,
// on into the next segments, fetched in the background (read-ahead), for
// as long as its context lasts. Every GET waits for the configured Pace
// (the broker's limits); those of segment bytes also for one of MaxGets
// places.
//
// Lock order: ColdReader.mu before coldObject.mu, and before the chunk
// cache's lock. The chunk cache and the flights never take another lock
// while holding their own.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/strata-log/strata/tiering/objstore"
)

// ErrReaderClosed is returned by a ColdReader after Close.
var ErrReaderClosed = errors.New("tiering: cold reader closed")

// OutOfColdRangeError: the offset asked for is not in the cold tier, even
// after the manifest head was read again. Start and End are the cold tier's
// [start, end), both -1 when it is empty.
type OutOfColdRangeError struct {
	Offset, Start, End int64
}

// Error says which offset and where the cold tier is.
func (e *OutOfColdRangeError) Error() string {
	if e.Start < 0 {
		return fmt.Sprintf("tiering: offset %d: the cold tier is empty", e.Offset)
	}
	return fmt.Sprintf("tiering: offset %d is outside the cold tier [%d, %d)", e.Offset, e.Start, e.End)
}

// ColdRead is the answer to a Read: whole batches, and the offset after the
// last of them, where the next Read continues.
type ColdRead struct {
	// Batches are concatenated batches exactly as they were produced.
	// They are usually a slice of the reader's cache, shared with other
	// reads: the caller must not change them, and must not look at them
	// after Release.
	Batches    []byte
	NextOffset int64
	ref        *readRef
}

// Release says the caller is done with Batches (a response holding them
// has been sent): the chunk they lie in may be recycled once the cache has
// let go of it too. Until then it stays in memory, so every Read must be
// released; a second Release, or one of a copy of the ColdRead, does
// nothing.
func (r ColdRead) Release() {
	if r.ref != nil && r.ref.done.CompareAndSwap(false, true) {
		r.ref.ch.release()
	}
}

// readRef is a Read's reference to the chunk its batches lie in.
type readRef struct {
	ch   *chunk
	done atomic.Bool
}

// ColdReader reads partitions' cold tiers from an object store, for any
// number of partitions and concurrent callers. It caches manifest heads and
// parts, segment footers and chunks of segment bytes; see ReaderConfig.
// Close it to stop its background work.
type ColdReader struct {
	store    objstore.Reader
	cfg      ReaderConfig
	counters readerCounters
	chunks   *chunkCache
	// arena recycles the buffers chunks are read into.
	arena *arena

	heads   flight[string, *Head]
	parts   flight[string, *Part]
	objects flight[string, *coldObject]

	// ctx ends on Close: it cancels reads in progress and read-ahead.
	ctx    context.Context
	cancel context.CancelFunc
	// ops counts calls in progress, and background tracks read-ahead
	// goroutines; Close waits for both.
	ops        sync.WaitGroup
	background sync.WaitGroup
	// prefetching holds a token per read-ahead goroutine, and gets one per
	// GET of segment bytes in flight (MaxGets): semaphores.
	prefetching chan struct{}
	gets        chan struct{}

	mu struct {
		sync.Mutex
		closed bool
		// prefetches are the chunks (by chunk key) a read-ahead goroutine
		// was started for and has not finished, so that reads in quick
		// succession do not start two, with the bytes each counts for
		// (chunkCost); prefetchBytes is their sum.
		prefetches    map[string]int64
		prefetchBytes int64
		partitions    *lru[PartitionRef, *partitionState]
		parts         *lru[string, *Part]
		objects       *lru[string, *coldObject]
	}
}

// NewColdReader returns a reader of the cold tiers in store.
func NewColdReader(store objstore.Reader, cfg ReaderConfig) (*ColdReader, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &ColdReader{
		store:       store,
		cfg:         cfg,
		prefetching: make(chan struct{}, readerPrefetches),
		gets:        make(chan struct{}, cfg.MaxGets),
	}
	// The arena holds what the cache may (with a quarter more for the
	// rounding of buffers to their size class), and a chunk's worth for
	// each GET in flight and the responses that still refer to chunks the
	// cache has let go of.
	r.arena = newArena(cfg.CacheBytes+cfg.CacheBytes/4+int64(cfg.MaxGets)*cfg.ChunkBytes, cfg.ChunkBytes)
	chunks, err := newChunkCache(cfg.CacheBytes, cfg.ChunkBytes, &r.counters)
	if err != nil {
		return nil, err
	}
	r.chunks = chunks
	r.heads.joins = &r.counters.sharedGets
	r.parts.joins = &r.counters.sharedGets
	r.objects.joins = &r.counters.sharedGets
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.mu.prefetches = map[string]int64{}
	r.mu.partitions = newLRU[PartitionRef, *partitionState](readerPartitions, nil)
	r.mu.parts = newLRU[string, *Part](readerParts, nil)
	r.mu.objects = newLRU(readerObjects, func(_ string, o *coldObject) { o.evict() })
	return r, nil
}

// begin starts a call: it refuses once the reader is closed, and gives the
// call a context that Close cancels too. end must be called when it is
// done.
func (r *ColdReader) begin(ctx context.Context) (_ context.Context, end func(), _ error) {
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return nil, nil, ErrReaderClosed
	}
	r.ops.Add(1)
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
		r.ops.Done()
	}, nil
}

// Read returns whole batches of partition p from its cold tier, starting
// with the batch that holds offset: at most maxBytes of them, but always at
// least one whole batch. They come from one cold segment, and from one
// chunk of it unless the first batch alone crosses from one chunk into the
// next (the caller continues from NextOffset). Every batch returned has
// been checked (length, magic, CRC: once, when its chunk came from the
// store) and their offsets follow on. A damaged
// object gives an error wrapping ErrCorrupt that names the object's key,
// never data. An offset outside the cold tier gives *OutOfColdRangeError;
// an offset past the end of the cached manifest is checked against a fresh
// one first, since the leader may have committed since. Read-ahead that a
// sequential Read starts lives as long as ctx, or as the context
// WithReadAhead put in it.
func (r *ColdReader) Read(ctx context.Context, p PartitionRef, offset int64, maxBytes int) (ColdRead, error) {
	caller := readAheadContext(ctx) // read-ahead lives as long as the caller's context
	ctx, end, err := r.begin(ctx)
	if err != nil {
		return ColdRead{}, err
	}
	defer end()
	h, fresh, err := r.head(ctx, p, false)
	if err != nil {
		return ColdRead{}, err
	}
	resume, sequential := r.resumePoint(p, offset)
	for retried := false; ; retried = true {
		var seg SegmentRef
		var res ColdRead
		var at readEnd
		h, seg, err = r.locate(ctx, p, h, fresh, offset)
		if err == nil {
			res, at, err = r.readSegment(ctx, p, seg, offset, maxBytes, resume)
		}
		if errors.Is(err, objstore.ErrNotFound) && !retried {
			// Retention may have removed the segment (or part) since this
			// head was read: a fresh one says where the cold tier starts
			// now.
			r.forgetObject(seg.Key)
			if h, _, err = r.head(ctx, p, true); err != nil {
				return ColdRead{}, err
			}
			fresh = true
			continue
		}
		if err != nil {
			return ColdRead{}, err
		}
		r.noteRead(p, offset, readMark{next: res.NextOffset, key: seg.Key, pos: at.pos})
		if sequential {
			r.readAhead(caller, p, h, seg, at)
		}
		return res, nil
	}
}

// Head returns partition p's manifest head, cached for HeadTTL (or until
// Invalidate), or nil when p has no cold tier. The caller must not modify
// it.
func (r *ColdReader) Head(ctx context.Context, p PartitionRef) (*Head, error) {
	ctx, end, err := r.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer end()
	h, _, err := r.head(ctx, p, false)
	return h, err
}

// Invalidate drops p's cached head, so that the next call reads it again:
// the local leader calls it after committing a change to p's manifest.
func (r *ColdReader) Invalidate(p PartitionRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, ok := r.mu.partitions.peek(p); ok {
		st.head, st.loaded = nil, false
		st.invalidations++
	}
}

// Stats returns the reader's counters and the size of its caches.
func (r *ColdReader) Stats() ReaderStats {
	c := &r.counters
	s := ReaderStats{
		ChunkHits:       c.chunkHits.Load(),
		ChunkMisses:     c.chunkMisses.Load(),
		ChunkGets:       c.chunkGets.Load(),
		BytesFetched:    c.bytesFetched.Load(),
		ReadAheadChunks: c.readAheadChunks.Load(),
		SharedGets:      c.sharedGets.Load(),
		IndexGets:       c.indexGets.Load(),
		ManifestGets:    c.manifestGets.Load(),
	}
	s.Gets = s.ChunkGets + s.IndexGets + s.ManifestGets
	s.ArenaReused, s.ArenaHeapBuffers = r.arena.reused.Load(), r.arena.heapBuffers.Load()
	out, free := r.arena.held()
	s.ArenaBytes = out + free
	r.mu.Lock()
	s.FootersCached = r.mu.objects.len()
	s.PartsCached = r.mu.parts.len()
	r.mu.Unlock()
	// The chunk cache is gone after Close.
	if _, end, err := r.begin(context.Background()); err == nil {
		s.CachedBytes = r.chunks.bytes()
		end()
	}
	return s
}

// Close cancels the reads in progress, waits for them and for read-ahead
// to end, and releases the caches and the open objects. Calls after Close
// return ErrReaderClosed. Close is idempotent.
func (r *ColdReader) Close() {
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return
	}
	r.mu.closed = true
	r.mu.Unlock()
	r.cancel()
	r.ops.Wait()
	r.background.Wait()
	r.chunks.close()
	r.arena.close()
	r.mu.Lock()
	r.mu.objects.clear()
	r.mu.parts.clear()
	r.mu.partitions.clear()
	r.mu.Unlock()
}
