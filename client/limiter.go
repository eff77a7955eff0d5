package client

import (
	"context"
	"sync"
)

// limiter bounds a quantity shared by many goroutines: the bytes a producer
// buffers, the records a consumer holds for Poll. acquire blocks while the
// bound is reached; release wakes the waiters.
type limiter struct {
	max int64

	mu struct {
		sync.Mutex
		used int64
		// freed is closed (and replaced) whenever something is released,
		// waking every waiter to look again.
		freed chan struct{}
	}
}

func newLimiter(max int64) *limiter {
	l := &limiter{max: max}
	l.mu.freed = make(chan struct{})
	return l
}

// acquire takes n, waiting until it fits, ctx ends or stop is closed. A
// request larger than the whole bound is let through when nothing else is
// held, so one huge record cannot block forever.
func (l *limiter) acquire(ctx context.Context, n int64, stop <-chan struct{}) error {
	for {
		l.mu.Lock()
		if l.mu.used+n <= l.max || l.mu.used == 0 {
			l.mu.used += n
			l.mu.Unlock()
			return nil
		}
		freed := l.mu.freed
		l.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return ErrClosed
		}
	}
}

// release gives back n taken by acquire.
func (l *limiter) release(n int64) {
	if n == 0 {
		return
	}
	l.mu.Lock()
	l.mu.used -= n
	close(l.mu.freed)
	l.mu.freed = make(chan struct{})
	l.mu.Unlock()
}

// used is how much is held now.
func (l *limiter) used() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.used
}
