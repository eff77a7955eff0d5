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
// reads into a buffer of the heap, counted in heapBuffers, which the
// arena keeps on its release only if there is room then.
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
		outBytes  int64 // handed out from the arena's room, not yet back
	}
}

// poisonReturned, set by tests, overwrites each buffer as it is handed
// back, so that a read of a chunk after its release sees the pattern
// rather than the bytes it expected.
var poisonReturned atomic.Bool

// poisonByte is the pattern poisonReturned writes: 0xEE as the first byte
// of a batch header's offset, and as the magic byte, fails every check.
const poisonByte = 0xEE

func newArena(limit, chunkBytes int64) *arena {
	step := max(int(chunkBytes/16), 512)
	a := &arena{class: step, max: int(2 * chunkBytes), limit: limit}
	a.mu.free = map[int][][]byte{}
	return a
}

// get returns a buffer of n bytes whose contents are whatever its last
// user left: the caller overwrites all of it. pooled says whether it
// counts against the arena (put must be called with it to give it back).
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
	// Make room by giving free buffers of other classes to the GC.
	for a.mu.outBytes+a.mu.freeBytes+int64(size) > a.limit && a.mu.freeBytes > 0 {
		for c, l := range a.mu.free {
			if len(l) > 0 {
				l[len(l)-1] = nil
				a.mu.free[c] = l[:len(l)-1]
				a.mu.freeBytes -= int64(c * a.class)
				break
			}
		}
	}
	if a.mu.outBytes+int64(size) > a.limit {
		a.mu.Unlock()
		a.heapBuffers.Add(1)
		return make([]byte, n, size), false
	}
	a.mu.outBytes += int64(size)
	a.mu.Unlock()
	return make([]byte, n, size), true
}

// put gives back a buffer get returned with pooled true. Nothing may
// refer to it any more.
func (a *arena) put(buf []byte) {
	buf = buf[:cap(buf)]
	if poisonReturned.Load() {
		for i := range buf {
			buf[i] = poisonByte
		}
	}
	k := len(buf) / a.class
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mu.outBytes -= int64(len(buf))
	a.mu.free[k] = append(a.mu.free[k], buf)
	a.mu.freeBytes += int64(len(buf))
}

// adopt offers the arena a heap buffer that get returned with pooled
// false and nothing refers to any more: kept if it is of a class and there
// is room for it, so that a burst past the limit still ends in recycled
// buffers.
func (a *arena) adopt(buf []byte) {
	buf = buf[:cap(buf)]
	if len(buf)%a.class != 0 || len(buf) > a.max {
		return
	}
	if poisonReturned.Load() {
		for i := range buf {
			buf[i] = poisonByte
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.outBytes+a.mu.freeBytes+int64(len(buf)) > a.limit {
		return
	}
	k := len(buf) / a.class
	a.mu.free[k] = append(a.mu.free[k], buf)
	a.mu.freeBytes += int64(len(buf))
}

// held reports the bytes handed out and not back, and free.
func (a *arena) held() (out, free int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.outBytes, a.mu.freeBytes
}
