package tiering

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"
)

// chunkCache holds chunks of cold segment log bytes in memory, keyed by
// object key and chunk index, and makes concurrent readers of a missing
// chunk share one GET. A cached chunk is never written to: readers copy
// out of it.
//
// Two regions share the byte budget. Every fetched chunk enters a small LRU
// window (a quarter of the budget, in whole chunks) and is offered to the
// main region, a ristretto cache whose cost is bytes. The window is there
// because ristretto admits by frequency (TinyLFU): once it is full, a chunk
// fetched a moment ago has no history and usually loses to the chunks it
// would evict, so a consumer reading a 4 MiB chunk 1 MiB at a time, or
// whose read-ahead has just landed, would GET the same chunk again. The
// window keeps what was just fetched whatever admission decides, as
// W-TinyLFU puts a window in front of its main region; the main region
// keeps the chunks that many readers come back to. The two may hold the
// same chunk (one slice, counted twice), so the memory they hold stays
// within the budget.
type chunkCache struct {
	counters *readerCounters
	// main is nil when the budget left after the window cannot hold a
	// chunk.
	main    *ristretto.Cache[string, *cachedChunk]
	flights flight[string, *chunk]
	// aheadBytes bounds the bytes of chunks read-ahead may have brought in
	// and not yet seen read, with those on their way: half the window, so
	// that read-ahead cannot push out of the window what it fetched before
	// a reader gets to it. It is bytes, not chunks, so that the chunks of
	// small objects (each smaller than ChunkBytes) count for what they hold.
	aheadBytes int64
	// chunkBytes is the reader's ChunkBytes: what a chunk counts for at
	// most (one that starts after its nominal start runs a little longer).
	chunkBytes int64
	mu         struct {
		sync.Mutex
		window *lru[string, *chunk]
		// unread are the chunks in the window that read-ahead fetched and
		// no read has asked for yet, with what each counts against
		// aheadBytes; unreadBytes is their sum.
		unread      map[string]int64
		unreadBytes int64
	}
}

// chunk is a cached chunk of an object's log bytes. Its buffer is the
// arena's, recycled once nothing refers to it: the cache (one reference
// for each region that holds the chunk) and every read that was handed
// the chunk, until it releases it (a response is released once sent).
// Anyone touching data must hold a reference.
type chunk struct {
	data []byte
	// checked is how many bytes from the start of data hold whole batches
	// that passed every check of their bytes (length, magic, CRC, record
	// count) when the chunk was fetched (checkChunk): a read of them checks
	// only what ties each to its place (its offsets), not its bytes again.
	checked int64
	// buf is the whole buffer data lies in, given back to arena, if pooled
	// there, when refs drops to zero.
	buf    []byte
	arena  *arena
	pooled bool
	refs   atomic.Int32
}

// newChunk wraps data, a slice of buf (a buffer from a, pooled as get
// said), with one reference: the caller's.
func newChunk(a *arena, buf []byte, pooled bool, data []byte) *chunk {
	ch := &chunk{data: data, buf: buf, arena: a, pooled: pooled}
	ch.refs.Store(1)
	return ch
}

// acquire takes a reference, unless the chunk's buffer has gone back to
// the arena already (a lookup that raced its eviction then misses).
func (ch *chunk) acquire() bool {
	for {
		n := ch.refs.Load()
		if n <= 0 {
			return false
		}
		if ch.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference; the last one gives the buffer back.
func (ch *chunk) release() {
	switch n := ch.refs.Add(-1); {
	case n < 0:
		panic("tiering: cold chunk released more often than acquired")
	case n > 0 || !ch.pooled:
		return // a heap buffer is the GC's
	}
	buf := ch.buf
	ch.buf, ch.data = nil, nil
	ch.arena.put(buf)
}

// cachedChunk is a main-region entry: it holds one reference to its
// chunk, dropped when ristretto lets go of the entry (OnExit, or a Set it
// refused outright). The key is kept so that a hit can be checked against
// the key asked for: ristretto stores hashes, not keys.
type cachedChunk struct {
	key    string
	ch     *chunk
	exited atomic.Bool
}

// exit drops the entry's reference, once however often ristretto reports
// the entry gone.
func (e *cachedChunk) exit() {
	if e != nil && e.exited.CompareAndSwap(false, true) {
		e.ch.release()
	}
}

func newChunkCache(cacheBytes, chunkBytes int64, counters *readerCounters) (*chunkCache, error) {
	windowChunks := cacheBytes / chunkBytes / 4
	if windowChunks == 0 && cacheBytes >= chunkBytes {
		windowChunks = 1
	}
	windowBytes := windowChunks * chunkBytes
	c := &chunkCache{counters: counters, aheadBytes: max(windowChunks/2, 1) * chunkBytes, chunkBytes: chunkBytes}
	c.flights.joins = &counters.sharedGets
	c.mu.unread = map[string]int64{}
	c.mu.window = newLRU(windowBytes, func(key string, ch *chunk) {
		c.readLocked(key)
		ch.release()
	})
	if mainBytes := cacheBytes - windowBytes; mainBytes > 0 {
		// Ristretto wants about ten counters per entry it may hold.
		entries := mainBytes/chunkBytes + 1
		main, err := ristretto.NewCache(&ristretto.Config[string, *cachedChunk]{
			NumCounters:        max(10*entries, 1000),
			MaxCost:            mainBytes,
			BufferItems:        64,
			IgnoreInternalCost: true, // cost is the chunk's bytes
			OnExit:             func(e *cachedChunk) { e.exit() },
		})
		if err != nil {
			return nil, fmt.Errorf("tiering: chunk cache: %w", err)
		}
		c.main = main
	}
	return c, nil
}

// chunkKey names chunk idx of an object. The index follows the last '#',
// so no two (key, index) pairs share a name.
func chunkKey(object string, idx int64) string {
	return object + "#" + strconv.FormatInt(idx, 10)
}

// get returns the chunk named key, with a reference the caller must
// release, calling fetch to read it from the store when it is not cached
// and no GET for it is in flight. fetch returns the chunk with one
// reference, which the caller that ran it gets. prefetch marks a
// read-ahead lookup, which is left out of the hit and miss counts.
func (c *chunkCache) get(ctx context.Context, key string, prefetch bool, fetch func(context.Context) (*chunk, error)) (*chunk, error) {
	for missed := false; ; missed = true {
		if ch, ok := c.lookup(key, !prefetch); ok {
			if !prefetch && !missed {
				c.counters.chunkHits.Add(1)
			}
			return ch, nil
		}
		if !prefetch && !missed {
			c.counters.chunkMisses.Add(1)
		}
		ch, shared, err := c.flights.do(ctx, key, func(ctx context.Context) (*chunk, error) {
			// A GET that finished between the lookup above and now has
			// cached the chunk: the window takes it synchronously.
			if ch, ok := c.lookup(key, !prefetch); ok {
				return ch, nil
			}
			ch, err := fetch(ctx)
			if err != nil {
				return nil, err
			}
			c.add(key, ch, prefetch)
			return ch, nil
		})
		if err != nil {
			return nil, err
		}
		// The reference the flight's leader took is its own; one that
		// joined takes one now, unless the chunk left the cache and its
		// last reader already (then it looks again).
		if !shared || ch.acquire() {
			if !prefetch {
				// It may have come from a read-ahead GET this read joined.
				c.mu.Lock()
				c.readLocked(key)
				c.mu.Unlock()
			}
			return ch, nil
		}
	}
}

// readLocked forgets that read-ahead brought in chunk key and no read has
// asked for it: one has, or it left the window.
func (c *chunkCache) readLocked(key string) {
	if n, ok := c.mu.unread[key]; ok {
		delete(c.mu.unread, key)
		c.mu.unreadBytes -= n
	}
}

// lookup returns the chunk named key, with a reference the caller must
// release, if it is cached; read says a read (not read-ahead) wants it.
func (c *chunkCache) lookup(key string, read bool) (*chunk, bool) {
	c.mu.Lock()
	ch, ok := c.mu.window.get(key)
	if ok {
		// The window's reference keeps it alive while the lock is held.
		ch.acquire()
		if read {
			c.readLocked(key)
		}
	}
	c.mu.Unlock()
	if ok {
		return ch, true
	}
	// Ristretto may let go of the entry at any moment: acquire fails once
	// its last reference is gone, and then it is a miss.
	if e, ok := c.main.Get(key); ok && e != nil && e.key == key && e.ch.acquire() {
		return e.ch, true
	}
	return nil, false
}

// add caches ch, which the caller holds a reference to, under key: each
// region that takes it takes a reference of its own.
func (c *chunkCache) add(key string, ch *chunk, prefetch bool) {
	n := int64(len(ch.data))
	c.mu.Lock()
	ch.acquire()
	if !c.mu.window.add(key, ch, n) {
		ch.release()
	}
	if _, in := c.mu.window.peek(key); in && prefetch {
		if _, ok := c.mu.unread[key]; !ok {
			cost := min(n, c.chunkBytes)
			c.mu.unread[key] = cost
			c.mu.unreadBytes += cost
		}
	}
	c.mu.Unlock()
	e := &cachedChunk{key: key, ch: ch}
	ch.acquire()
	if !c.main.Set(key, e, n) {
		e.exit() // dropped at once (or no main region): OnExit will not run
	}
}

// has reports whether the chunk is cached or being fetched, so read-ahead
// can skip it without starting any work.
func (c *chunkCache) has(key string) bool {
	c.mu.Lock()
	_, ok := c.mu.window.peek(key)
	c.mu.Unlock()
	if ok {
		return true
	}
	if e, ok := c.main.Get(key); ok && e != nil && e.key == key {
		return true
	}
	return c.flights.busy(key)
}

// readPast says that a sequential reader has read chunk key to its end:
// in the window it becomes the first to go, ahead of chunks read-ahead
// brought in for readers that have not reached them yet. (The main region
// keeps it if it is read often.)
func (c *chunkCache) readPast(key string) {
	c.mu.Lock()
	c.mu.window.demote(key)
	c.mu.Unlock()
}

// aheadRoom reports whether read-ahead may start fetching one more chunk
// of n bytes, with inflight bytes of chunks of its own on their way now.
func (c *chunkCache) aheadRoom(inflight, n int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.unreadBytes+inflight+n <= c.aheadBytes
}

// drop forgets a chunk, so that bytes found corrupt are fetched again on
// the next read rather than served from memory for good.
func (c *chunkCache) drop(key string) {
	c.mu.Lock()
	c.mu.window.remove(key)
	c.mu.Unlock()
	c.main.Del(key)
}

// bytes is what the cache holds now.
func (c *chunkCache) bytes() int64 {
	c.mu.Lock()
	n := c.mu.window.cost()
	c.mu.Unlock()
	if c.main != nil {
		n += c.main.MaxCost() - c.main.RemainingCost()
	}
	return n
}

// wait applies the main region's buffered admissions (ristretto admits
// asynchronously), for tests that look at what it holds.
func (c *chunkCache) wait() { c.main.Wait() }

func (c *chunkCache) close() {
	c.main.Close()
	c.mu.Lock()
	c.mu.window.clear()
	c.mu.Unlock()
}
