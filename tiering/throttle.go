package tiering

import (
	"context"
	"sync"
	"time"
)

// Throttle holds the cold cleaner's reads and writes of objects to a rate
// in bytes per second, so that a cleaning of a big partition leaves the
// bucket's bandwidth to uploads and cold fetches. It paces as Kafka's
// Throttler does for its log cleaner, without banking idle time: a charge
// waits until the bytes charged before it are paid for at the rate, so over
// any span the bytes moved stay within rate × span plus the last charge.
// One Throttle may be shared by the cleanings of many partitions; it is
// safe for concurrent use. A nil Throttle or a rate <= 0 does not throttle
// (the latter still counts what is charged).
type Throttle struct {
	rate int64
	// now and sleep are the clock; tests pace a Throttle by a fake one.
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
	mu    struct {
		sync.Mutex
		paid    time.Time // when the bytes charged so far are paid for
		charged int64     // bytes charged in all
	}
}

// NewThrottle returns a Throttle at rate bytes per second (<= 0: none).
func NewThrottle(rate int64) *Throttle {
	return &Throttle{rate: rate, now: time.Now, sleep: sleepCtx}
}

// Wait charges n bytes about to be read or written and returns once the
// bytes charged before them are paid for, or ctx's error when it ends
// first.
func (t *Throttle) Wait(ctx context.Context, n int64) error {
	if t == nil {
		return ctx.Err()
	}
	t.mu.Lock()
	t.mu.charged += n
	if t.rate <= 0 {
		t.mu.Unlock()
		return ctx.Err()
	}
	now := t.now()
	start := t.mu.paid
	if start.Before(now) {
		start = now
	}
	t.mu.paid = start.Add(time.Duration(float64(n) / float64(t.rate) * float64(time.Second)))
	t.mu.Unlock()
	if wait := start.Sub(now); wait > 0 {
		return t.sleep(ctx, wait)
	}
	return ctx.Err()
}

// Charged is the bytes charged so far.
func (t *Throttle) Charged() int64 {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.charged
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
