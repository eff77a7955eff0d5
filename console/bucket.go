package console

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/strata-log/strata/broker"
)

const (
	// bucketProbeEvery: however many pages poll, the bucket is asked at
	// most this often.
	bucketProbeEvery = 5 * time.Second
	// bucketProbeTimeout bounds one probe, so a store that hangs shows as
	// unreachable rather than holding the page.
	bucketProbeTimeout = 2 * time.Second
)

// bucketProbe remembers the last answer of the broker's object-store
// probe for bucketProbeEvery.
type bucketProbe struct {
	probe func(context.Context) error
	now   func() time.Time
	mu    struct {
		sync.Mutex
		at  time.Time
		err error
	}
}

// bucketState is the bucket as the cluster page shows it.
type bucketState struct {
	Configured bool
	Reachable  bool
	Error      string
	CheckedAgo string
}

func (b *bucketProbe) state(ctx context.Context) bucketState {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if b.mu.at.IsZero() || now.Sub(b.mu.at) >= bucketProbeEvery {
		ctx, cancel := context.WithTimeout(ctx, bucketProbeTimeout)
		b.mu.err = b.probe(ctx)
		cancel()
		b.mu.at = now
	}
	if errors.Is(b.mu.err, broker.ErrNoObjectStore) {
		return bucketState{}
	}
	st := bucketState{Configured: true, Reachable: b.mu.err == nil, CheckedAgo: humanMillis(now.Sub(b.mu.at).Milliseconds())}
	if b.mu.err != nil {
		st.Error = b.mu.err.Error()
	}
	return st
}
