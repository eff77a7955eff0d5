package tiering

import (
	"sync"
	"sync/atomic"
)

// arena recycles the buffers cold chunks are read into. A chunk's buffer
// is filled straight from the GET's body, served in place to every read
// that hits the chunk, and handed back here once the chunk has left both
// cache regions and the last response that refers to it has been sent
// (chunk.release). The next GET then reuses it: no fresh pages for the
// kernel to fault in and the runtime to zero, and nothing for the GC to
// reclaim, however long a replay runs.
//
// Buffers come in size classes, multiples of a sixteenth of a chunk, so
// that the chunks of small objects (a 1 MiB segment is one chunk of about
// 1 MiB) reuse each other's buffers without holding a whole chunk's worth
// each. A free buffer of another class is given up for a new one when the
// arena has no room for both.
//
// The arena is bounded: limit bytes of buffers handed out and free
// together (the cache budget with room for the GETs in flight and the
// chunks responses still refer to). A GET that finds it exhausted, every
// buffer referenced, does not wait and never takes a buffer in use: it
// reads into a buffer of the heap, counted in heapBuffers, that the GC
// reclaims once the chunk is gone.
//
// On Linux the buffers are mapped outside the Go heap (mapBuffer), their
// pages populated when mapped, in huge pages where the kernel has them: a
// cache of gigabytes neither counts towards the GC's heap goal nor is
// zeroed by the runtime. Fresh memory is still the largest cost of a cold
// GB read into a cache that keeps it (the kernel zeroes every page once);
// recycling buffers is what avoids it. A buffer is unmapped only once it
// is free, with no reference left to it.
type arena struct {
	class int // bytes per size class step
	max   int // largest buffer kept, in bytes
	limit int64
	// heapBuffers counts buffers taken from the heap because the arena was
	// exhausted or the chunk larger than the arena keeps; reused counts
	// buffers handed out again.
	heapBuffers, reused atomic.Uint64
	mu                  struct {
		sync.Mutex
		free      map[int][][]byte // by class
		freeBytes int64
		outBytes  int64 // handed out, not yet back
		closed    bool
	}
}

// poisonReturned, set by tests, overwrites each buffer as it is handed
// back, so that a read of a chunk after its release sees the pattern
// rather than the bytes it expected.
var poisonReturned atomic.Bool

// returnedHook, set by tests, sees each buffer put takes back, before it
// is poisoned or pooled.
var returnedHook atomic.Pointer[func(buf []byte)]

// PoisonRecycledBuffers makes every cold reader overwrite a chunk's
// buffer as it goes back to the arena (with 0xEE), from now on: for tests
// of the packages that hand cold reads on (the fetch paths), where a
// response that still referred to a released chunk would then show it.
// It costs a pass over every recycled buffer; nothing else sets it.
func PoisonRecycledBuffers() { poisonReturned.Store(true) }

// poisonByte is the pattern poisonReturned writes: as the first byte of a
// batch's offset, and as its magic byte, it fails every check.
const poisonByte = 0xEE

func newArena(limit, chunkBytes int64) *arena {
	step := max(int(chunkBytes/16), 512)
	a := &arena{class: step, max: int(2 * chunkBytes), limit: limit}
	a.mu.free = map[int][][]byte{}
	return a
}

// get returns a buffer of n bytes whose contents are whatever its last
// user left: the caller overwrites all of it. pooled says it is the
// arena's: put must be called with it, once nothing refers to it, and with
// nothing else. A buffer not pooled is the heap's, for the GC to reclaim.
func (a *arena) get(n int) (buf []byte, pooled bool) {
	k := (n + a.class - 1) / a.class
	size := k * a.class
	if size > a.max {
		a.heapBuffers.Add(1)
		return make([]byte, n), false
	}
	a.mu.Lock()
	if l := a.mu.free[k]; len(l) > 0 {
		buf = l[len(l)-1]
		l[len(l)-1] = nil
		a.mu.free[k] = l[:len(l)-1]
		a.mu.freeBytes -= int64(size)
		a.mu.outBytes += int64(size)
		a.mu.Unlock()
		a.reused.Add(1)
		return buf[:n], true
	}
	// Make room by giving up free buffers of other classes.
	var drop [][]byte
	for a.mu.outBytes+a.mu.freeBytes+int64(size) > a.limit && a.mu.freeBytes > 0 {
		for c, l := range a.mu.free {
			if len(l) > 0 {
				drop = append(drop, l[len(l)-1])
				l[len(l)-1] = nil
				a.mu.free[c] = l[:len(l)-1]
				a.mu.freeBytes -= int64(c * a.class)
				break
			}
		}
	}
	room := !a.mu.closed && a.mu.outBytes+int64(size) <= a.limit
	if room {
		a.mu.outBytes += int64(size)
	}
	a.mu.Unlock()
	for _, b := range drop {
		unmapBuffer(b)
	}
	if !room {
		a.heapBuffers.Add(1)
		return make([]byte, n), false
	}
	return mapBuffer(size)[:n], true
}

// put gives back a buffer get returned with pooled true. Nothing may
// refer to it any more.
func (a *arena) put(buf []byte) {
	buf = buf[:cap(buf)]
	if h := returnedHook.Load(); h != nil {
		(*h)(buf)
	}
	if poisonReturned.Load() {
		for i := range buf {
			buf[i] = poisonByte
		}
	}
	k := len(buf) / a.class
	a.mu.Lock()
	a.mu.outBytes -= int64(len(buf))
	if a.mu.closed {
		a.mu.Unlock()
		unmapBuffer(buf)
		return
	}
	a.mu.free[k] = append(a.mu.free[k], buf)
	a.mu.freeBytes += int64(len(buf))
	a.mu.Unlock()
}

// close gives up the free buffers, and those put back from now on; get
// then hands out heap buffers only.
func (a *arena) close() {
	a.mu.Lock()
	a.mu.closed = true
	free := a.mu.free
	a.mu.free, a.mu.freeBytes = map[int][][]byte{}, 0
	a.mu.Unlock()
	for _, l := range free {
		for _, b := range l {
			unmapBuffer(b)
		}
	}
}

// held reports the bytes handed out and not back, and free.
func (a *arena) held() (out, free int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.outBytes, a.mu.freeBytes
}
