package tiering

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// flight lets concurrent callers that want the same thing (a chunk, a
// footer, a manifest) share one request to the object store: the first
// caller runs it, later ones wait for its result. It is a small
// singleflight with two differences that matter here: a waiter honours its
// own context, and a waiter whose leader gave up (the leader's context
// ended, not the waiter's) runs the request itself rather than return
// someone else's cancellation.
type flight[K comparable, V any] struct {
	// joins, if set, counts callers that joined a request in flight, as
	// they join.
	joins *atomic.Uint64
	mu    sync.Mutex
	calls map[K]*flightCall[V]
}

type flightCall[V any] struct {
	done chan struct{}
	val  V
	err  error
}

// do returns fn's result for key, running fn at most once at a time per
// key. shared reports that the result is from another caller's request:
// this one did not run fn (it may have waited on one that gave up, then
// run its own).
func (f *flight[K, V]) do(ctx context.Context, key K, fn func(context.Context) (V, error)) (val V, shared bool, err error) {
	for {
		f.mu.Lock()
		if f.calls == nil {
			f.calls = make(map[K]*flightCall[V])
		}
		c, ok := f.calls[key]
		if !ok {
			c = &flightCall[V]{done: make(chan struct{})}
			f.calls[key] = c
			f.mu.Unlock()
			f.run(ctx, key, c, fn)
			return c.val, false, c.err
		}
		f.mu.Unlock()
		if !shared && f.joins != nil {
			f.joins.Add(1)
		}
		shared = true
		select {
		case <-c.done:
		case <-ctx.Done():
			var zero V
			return zero, shared, ctx.Err()
		}
		if isContextErr(c.err) && ctx.Err() == nil {
			continue // the leader's context ended, ours has not: try again
		}
		return c.val, shared, c.err
	}
}

func (f *flight[K, V]) run(ctx context.Context, key K, c *flightCall[V], fn func(context.Context) (V, error)) {
	// Deferred so that waiters are released even if fn panics.
	defer func() {
		f.mu.Lock()
		delete(f.calls, key)
		f.mu.Unlock()
		close(c.done)
	}()
	c.val, c.err = fn(ctx)
}

// busy reports whether a request for key is in flight.
func (f *flight[K, V]) busy(key K) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.calls[key]
	return ok
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
