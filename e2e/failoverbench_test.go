package e2e

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/testutil"
)

// BenchmarkFailover measures, five times, the time from kill -9 of a
// partition's leader to the first acks=all write acknowledged by its new
// leader, with a producer writing all along, on three broker processes
// with gossip.profile local. Run it with make bench-failover.
func BenchmarkFailover(b *testing.B) {
	tc, ctx, c := benchCluster(b, "failover", 1)
	var mu sync.Mutex
	var lastAck time.Time
	p := c.NewProducer(client.WithLinger(0))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			err := p.ProduceSync(ctx, &client.Record{Topic: "failover", Partition: 0, Value: []byte("x")})
			if err == nil {
				mu.Lock()
				lastAck = time.Now()
				mu.Unlock()
			}
		}
	}()
	var times []time.Duration
	for range 5 {
		tc.waitInSync(ctx, time.Minute, "every replica in sync")
		leader := tc.leaderOf(ctx, "failover", 0)
		victim := tc.byID(leader)
		killed := time.Now()
		victim.kill9()
		testutil.WaitFor(b, time.Minute, "an acknowledged write after the kill", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return lastAck.After(killed)
		})
		mu.Lock()
		times = append(times, lastAck.Sub(killed))
		mu.Unlock()
		victim.start()
	}
	close(stop)
	<-done
	p.Close()
	slices.Sort(times)
	b.Logf("kill -9 of the leader to the next acknowledged acks=all write: %v (median %v)", times, times[len(times)/2])
	for b.Loop() {
		// The measurements above run once; the loop only satisfies the
		// benchmark protocol.
	}
	// Reported after the loop: its first call resets user metrics.
	b.ReportMetric(float64(times[len(times)/2].Milliseconds()), "median-ms")
}

// benchCluster starts three broker processes (gossip.profile local) and a
// client of them, with a context of ten minutes, and creates topic with
// partitions of three replicas and min.insync.replicas 2.
func benchCluster(b *testing.B, topic string, partitions int32) (*testCluster, context.Context, *client.Client) {
	tc := startCluster(b, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	c, err := client.New(ctx, tc.addrs())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	if _, err := c.CreateTopic(ctx, topic, partitions, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		b.Fatal(err)
	}
	return tc, ctx, c
}
