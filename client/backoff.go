package client

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff is exponential backoff with jitter between min and max.
type backoff struct {
	min, max time.Duration
}

// defaultBackoff is what admin calls, metadata waits and the consumer use.
var defaultBackoff = backoff{min: 100 * time.Millisecond, max: time.Second}

// delay is the wait before retry number attempt (0 for the first retry):
// min doubled per attempt up to max, of which a random half is kept so that
// clients failing together do not retry together. A broker's RetryAfter
// (THROTTLED) is a floor: it knows better when it will have room.
func (b backoff) delay(attempt int, retryAfter time.Duration) time.Duration {
	d := b.min
	for i := 0; i < attempt && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	if half := d / 2; half > 0 {
		d = half + rand.N(half+1)
	}
	return max(d, retryAfter)
}

// sleepCtx waits d or until ctx ends, whichever comes first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
