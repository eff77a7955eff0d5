package tiering

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
)

func TestFlightSharesOneCall(t *testing.T) {
	var f flight[string, int]
	var joins atomic.Uint64
	f.joins = &joins
	release := make(chan struct{})
	var calls atomic.Int32
	fn := func(context.Context) (int, error) {
		calls.Add(1)
		<-release
		return 42, nil
	}
	const n = 8
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if v, _, err := f.do(context.Background(), "k", fn); v != 42 || err != nil {
				t.Errorf("got %d, %v", v, err)
			}
		})
	}
	testutil.WaitFor(t, 10*time.Second, "callers to join", func() bool { return joins.Load() == n-1 })
	close(release)
	wg.Wait()
	if c := calls.Load(); c != 1 {
		t.Fatalf("%d calls, want 1", c)
	}
	if f.busy("k") {
		t.Fatal("a finished call is still in flight")
	}
}

// A waiter whose leader gave up runs the call itself instead of returning
// the leader's cancellation, and says its result is not shared; a waiter
// that gives up returns at once.
func TestFlightWaiterOutlivesItsLeader(t *testing.T) {
	var f flight[string, int]
	var joins atomic.Uint64
	f.joins = &joins
	leaderCtx, cancelLeader := context.WithCancel(context.Background())
	started := make(chan struct{})
	leaderDone := make(chan error)
	go func() {
		_, _, err := f.do(leaderCtx, "k", func(ctx context.Context) (int, error) {
			close(started)
			<-ctx.Done()
			return 0, ctx.Err()
		})
		leaderDone <- err
	}()
	<-started

	quitter, quit := context.WithCancel(context.Background())
	quitterDone := make(chan error)
	go func() {
		_, _, err := f.do(quitter, "k", func(context.Context) (int, error) { return 0, errors.New("not called") })
		quitterDone <- err
	}()
	waiterDone := make(chan int)
	go func() {
		v, shared, err := f.do(context.Background(), "k", func(context.Context) (int, error) { return 7, nil })
		if err != nil || shared {
			// Its result is its own: a caller that takes a reference for
			// a shared result (the cold reader's objects) must not take a
			// second.
			t.Errorf("waiter: %v, shared %v; want its own call's result, not shared", err, shared)
		}
		waiterDone <- v
	}()
	testutil.WaitFor(t, 10*time.Second, "two waiters", func() bool { return joins.Load() == 2 })
	quit()
	if err := <-quitterDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("quitter: %v", err)
	}
	cancelLeader()
	if err := <-leaderDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader: %v", err)
	}
	if v := <-waiterDone; v != 7 {
		t.Fatalf("waiter got %d, want its own call's 7", v)
	}
}
