package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
)

func TestWindowHistBuckets(t *testing.T) {
	prev := -1
	for us := uint64(0); us < 1<<22; us = us*17/16 + 1 {
		i := windowBucket(us)
		if i < prev {
			t.Fatalf("bucket of %d µs is %d, before %d of a smaller latency", us, i, prev)
		}
		prev = i
		up := windowUpper(i)
		if up < us || float64(up) > float64(us)*(1+1.0/(1<<windowSub))+1 {
			t.Fatalf("%d µs: bucket %d ends at %d µs", us, i, up)
		}
	}
	if i := windowBucket(1<<63 + 5); i >= windowBuckets {
		t.Fatalf("the largest latency falls in bucket %d of %d", i, windowBuckets)
	}
	var h windowHist
	for i := 1; i <= 100; i++ {
		h.record(time.Duration(i) * time.Millisecond)
	}
	n, q := h.take()
	if n != 100 || q[0] < 50*time.Millisecond || q[0] > 53*time.Millisecond || q[1] < 99*time.Millisecond || q[1] > 104*time.Millisecond {
		t.Fatalf("1..100 ms: %d latencies, median and p99 %v", n, q)
	}
	if n, _ := h.take(); n != 0 {
		t.Fatalf("take left %d latencies", n)
	}
}

// window ends a window of y in which cold reads were let through cold
// bytes and produces took each of lat.
func window(y *coldYield, cold int64, lat ...time.Duration) yieldState {
	y.admitted.Add(cold)
	for _, d := range lat {
		y.produceEnd(y.produceStart(), d)
	}
	y.step(time.Now())
	return y.state()
}

// TestColdYieldFollowsWriters: with no writers cold reads are not held
// back; writers' latency alone teaches the controller their own; when
// cold reads come with a rise in the writers' latency, or with produces
// left waiting, the rate cold reads get falls to the least, and it comes
// back, first while the latency stays low, then all at once when the
// writers stop; when they come back, cold reads start from the least rate.
func TestColdYieldFollowsWriters(t *testing.T) {
	y := &coldYield{}
	ms := time.Millisecond
	if st := window(y, 64<<20); st.rate != 0 {
		t.Fatalf("no writers: rate %v", st.rate)
	}
	// Writers arrive during a replay: their latency is not known yet, so
	// cold reads get the least until windows without them teach it.
	st := window(y, 4<<20, 2*ms, 2*ms, 3*ms)
	if st.rate != yieldMinRate || st.own != [2]time.Duration{} {
		t.Fatalf("writers of unknown latency: %+v", st)
	}
	for range yieldQuiet + 5 {
		st = window(y, 0, 2*ms, 2*ms, 2*ms)
	}
	if st.own[0] < 2*ms || st.own[0] > 3*ms || st.own[1] < 2*ms || st.own[1] > 3*ms {
		t.Fatalf("writers alone at 2 ms: learned %v", st.own)
	}
	// Cold reads that leave the writers' latency alone get more and more.
	prev := st.rate
	for range 30 {
		st = window(y, 1<<20, 2*ms, 2*ms)
		if st.rate < prev {
			t.Fatalf("rate fell from %v to %v with the writers at 2 ms", prev, st.rate)
		}
		prev = st.rate
	}
	if st.rate < 4*yieldMinRate {
		t.Fatalf("after 30 windows without harm: rate %v", st.rate)
	}
	// The writers slow down: cold reads get half as much each window,
	// down to the least.
	slowed := st.slowed
	for range 12 {
		prev = st.rate
		st = window(y, 1<<20, 20*ms, 20*ms)
		if st.rate > max(prev/2, yieldMinRate) {
			t.Fatalf("writers at 20 ms: rate %v after %v", st.rate, prev)
		}
	}
	if st.rate != yieldMinRate || st.slowed != slowed+12 {
		t.Fatalf("after 12 slow windows: %+v", st)
	}
	// Back to 2 ms: the rate grows again.
	for range 5 {
		st = window(y, 0, 2*ms)
	}
	if st.rate <= yieldMinRate {
		t.Fatalf("writers fast again: rate %v", st.rate)
	}
	// A produce left waiting counts for as long as it waits, though it
	// has not ended.
	w := y.produceStart()
	for range 3 {
		st = window(y, 0, 2*ms)
	}
	if st.rate != yieldMinRate || st.last[1] < 2*yieldWindow {
		t.Fatalf("a produce waiting for 3 windows: %+v", st)
	}
	// It ends, and the writers go away: after yieldIdleWindows cold reads
	// are free again, and a GET of any size goes at once.
	y.produceEnd(w, 300*ms)
	st = window(y, 0)
	for range yieldIdleWindows {
		if st.rate == 0 {
			t.Fatal("free again before the writers had been idle for yieldIdleWindows")
		}
		st = window(y, 0)
	}
	if st.rate != 0 {
		t.Fatalf("writers gone: rate %v", st.rate)
	}
	if waited, err := y.wait(context.Background(), 1<<30); err != nil || waited != 0 {
		t.Fatalf("a GET of 1 GiB, writers gone: waited %v, %v", waited, err)
	}
	// Writers come back while cold reads run at full speed: these start
	// again from the least rate, not from what they took.
	if st = window(y, 256<<20, 2*ms); st.rate > 2*yieldMinRate {
		t.Fatalf("writers back beside 2.5 GB/s of cold reads: rate %v", st.rate)
	}
}

// TestColdYieldProgresses: writers that are always slow hold cold reads
// at the least rate, never at none: GETs keep going out, through the
// broker's real controller loop.
func TestColdYieldProgresses(t *testing.T) {
	y := &coldYield{}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); y.run(ctx) }()
	defer func() { stop(); wg.Wait() }()

	// Writers at 1 ms until the controller has learned it, then at 50
	// ms: it slows cold reads at every window.
	var lat atomic.Int64
	lat.Store(int64(time.Millisecond))
	done := make(chan struct{})
	var writers sync.WaitGroup
	writers.Add(1)
	go func() {
		defer writers.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(yieldWindow / 4):
			}
			for range 10 {
				y.produceEnd(y.produceStart(), time.Duration(lat.Load()))
			}
		}
	}()
	defer func() { close(done); writers.Wait() }()
	testutil.Eventually(t, 30*time.Second, "the writers' own latency to be learned", func() error {
		if st := y.state(); st.own[1] == 0 {
			return fmt.Errorf("the writers' own latency not learned in 30 s: %+v", st)
		}
		return nil
	})
	lat.Store(int64(50 * time.Millisecond))

	// 2 MiB in GETs of 128 KiB: about two seconds at the least rate.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 16 {
		if _, err := y.wait(ctx, 128<<10); err != nil {
			t.Fatalf("GET %d of 16 held back for good: %v (%+v)", i, err, y.state())
		}
	}
	if st := y.state(); st.slowed == 0 || st.rate == 0 {
		t.Fatalf("writers always slow: the controller never slowed cold reads: %+v", st)
	}
}
