package e2e

import (
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/testutil"
)

// BenchmarkPausedBroker measures, three times, the longest window with no
// acknowledged acks=all write on any partition while one broker of three
// is paused (SIGSTOP) for 8 s: a producer writes to each of three
// partitions all along, and the paused broker leads one of them and
// follows the other two, so the window covers both a move of leadership
// and the paused follower leaving the ISRs. Three broker processes with
// gossip.profile local. Run it with make bench-failover.
func BenchmarkPausedBroker(b *testing.B) {
	const (
		partitions = 3
		pause      = 8 * time.Second
	)
	tc, ctx, c := benchCluster(b, "paused", partitions)
	p := c.NewProducer(client.WithLinger(0), client.WithIdempotence(true))
	acks := make([]ackTimes, partitions)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range partitions {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := p.ProduceSync(ctx, &client.Record{Topic: "paused", Partition: int32(i), Value: []byte("x")}); err == nil {
					acks[i].add(time.Now())
				}
			}
		})
	}
	var worst []time.Duration
	for round := range 3 {
		tc.waitInSync(ctx, time.Minute, "every replica in sync")
		victim := tc.byID(int32(round%3 + 1))
		settled := time.Now()
		for i := range partitions {
			testutil.WaitFor(b, time.Minute, fmt.Sprintf("an acknowledged write to partition %d before the pause", i), func() bool {
				return acks[i].last().After(settled)
			})
		}
		paused := time.Now()
		if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			b.Fatal(err)
		}
		// The fault itself is a length of time: the broker stays paused
		// for it, or until the benchmark's context ends.
		select {
		case <-time.After(pause):
		case <-ctx.Done():
		}
		if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			b.Fatal(err)
		}
		resumed := time.Now()
		// The window ends with each partition's first acknowledgement after
		// the resume, so a partition that stalled until then counts whole.
		for i := range partitions {
			testutil.WaitFor(b, time.Minute, fmt.Sprintf("an acknowledged write to partition %d after the resume", i), func() bool {
				return acks[i].last().After(resumed)
			})
		}
		var gaps []time.Duration
		for i := range partitions {
			gaps = append(gaps, acks[i].longestGap(paused))
		}
		b.Logf("broker %d paused for %v: longest window without an acknowledged write per partition %v", victim.id, pause, roundAll(gaps))
		worst = append(worst, slices.Max(gaps))
	}
	close(stop)
	wg.Wait()
	p.Close()
	b.Logf("longest window without an acknowledged write on any partition, per pause: %v (max %v)", roundAll(worst), slices.Max(worst).Round(time.Millisecond))
	for b.Loop() {
		// The measurements above run once; the loop only satisfies the
		// benchmark protocol.
	}
	b.ReportMetric(float64(slices.Max(worst).Milliseconds()), "max-window-ms")
}

// ackTimes records when a partition's writes were acknowledged.
type ackTimes struct {
	mu    sync.Mutex
	times []time.Time
}

func (a *ackTimes) add(t time.Time) {
	a.mu.Lock()
	a.times = append(a.times, t)
	a.mu.Unlock()
}

func (a *ackTimes) last() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.times) == 0 {
		return time.Time{}
	}
	return a.times[len(a.times)-1]
}

// longestGap is the longest time between two acknowledgements, the first
// of them the last one before since or later.
func (a *ackTimes) longestGap(since time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	i, _ := slices.BinarySearchFunc(a.times, since, func(t, s time.Time) int { return t.Compare(s) })
	i = max(i-1, 0)
	var gap time.Duration
	for ; i+1 < len(a.times); i++ {
		gap = max(gap, a.times[i+1].Sub(a.times[i]))
	}
	return gap
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
