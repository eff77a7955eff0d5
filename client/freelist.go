package client

// freeList keeps up to cap(c) spare objects for reuse. Unlike sync.Pool it
// is not emptied by the garbage collector: the producer's batch buffers are
// large (WithBatchBytes each), and losing them at every collection made
// each new batch grow its buffers again from nothing. The bound keeps what
// is retained small next to the producer's buffer limit.
type freeList[T any] struct {
	c chan T
}

func newFreeList[T any](n int) freeList[T] { return freeList[T]{c: make(chan T, n)} }

// get returns a spare object, or the zero T when there is none.
func (f freeList[T]) get() (v T) {
	select {
	case v = <-f.c:
	default:
	}
	return v
}

// put keeps v for reuse, or lets the collector have it when the list is
// full.
func (f freeList[T]) put(v T) {
	select {
	case f.c <- v:
	default:
	}
}
