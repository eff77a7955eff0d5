package client

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLimiterBlocksUntilRelease(t *testing.T) {
	l := newLimiter(100)
	ctx := context.Background()
	if err := l.acquire(ctx, 60, nil); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- l.acquire(ctx, 60, nil) }()
	select {
	case err := <-got:
		t.Fatalf("acquire over the bound returned %v before a release", err)
	case <-time.After(20 * time.Millisecond):
	}
	l.release(60)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if l.used() != 60 {
		t.Errorf("used %d", l.used())
	}
}

func TestLimiterOversizeAloneAndCancel(t *testing.T) {
	l := newLimiter(10)
	// Larger than the bound, but nothing else is held: let through.
	if err := l.acquire(context.Background(), 50, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := l.acquire(ctx, 1, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("acquire with a full limiter and an ending ctx: %v", err)
	}
	stop := make(chan struct{})
	close(stop)
	if err := l.acquire(context.Background(), 1, stop); !errors.Is(err, ErrClosed) {
		t.Errorf("acquire after stop: %v", err)
	}
	l.release(50)
	if l.used() != 0 {
		t.Errorf("used %d", l.used())
	}
}

func TestBackoffDelay(t *testing.T) {
	b := backoff{min: 100 * time.Millisecond, max: time.Second}
	for attempt := range 10 {
		ceil := min(b.min<<attempt, b.max)
		for range 100 {
			d := b.delay(attempt, 0)
			if d < ceil/2 || d > ceil {
				t.Fatalf("attempt %d: delay %s outside [%s, %s]", attempt, d, ceil/2, ceil)
			}
		}
	}
	if d := b.delay(0, 3*time.Second); d != 3*time.Second {
		t.Errorf("RetryAfter not honoured: %s", d)
	}
	if err := sleepCtx(context.Background(), 0); err != nil {
		t.Error(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sleepCtx(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("sleepCtx on a cancelled ctx: %v", err)
	}
}
