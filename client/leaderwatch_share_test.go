package client

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
)

// TestLeaderChecksShareOneFetch: a hundred requests watching their leader
// at once cause one metadata fetch, not a hundred; those that come while
// it runs wait for it, and a check after leaderCheckEvery/2 fetches again.
func TestLeaderChecksShareOneFetch(t *testing.T) {
	var l leaderChecks
	var fetches atomic.Int32
	release := make(chan struct{})
	fetch := func(context.Context) {
		fetches.Add(1)
		<-release
	}
	var wg sync.WaitGroup
	returned := make(chan struct{}, 100)
	for range 100 {
		wg.Go(func() {
			l.refresh(context.Background(), fetch)
			returned <- struct{}{}
		})
	}
	testutil.WaitFor(t, 10*time.Second, "the shared fetch to start", func() bool { return fetches.Load() > 0 })
	select {
	case <-returned:
		t.Fatal("a watcher returned before the shared fetch ended")
	default:
	}
	close(release)
	wg.Wait()
	if n := fetches.Load(); n != 1 {
		t.Fatalf("%d fetches for 100 watchers at once, want 1", n)
	}
	l.refresh(context.Background(), fetch) // within leaderCheckEvery/2: uses it
	if n := fetches.Load(); n != 1 {
		t.Fatalf("%d fetches after a check right after one, want 1", n)
	}
	l.mu.Lock()
	l.last = time.Now().Add(-leaderCheckEvery)
	l.mu.Unlock()
	l.refresh(context.Background(), fetch)
	if n := fetches.Load(); n != 2 {
		t.Fatalf("%d fetches after a check once the last is stale, want 2", n)
	}
}
