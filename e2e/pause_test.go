package e2e

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// A leader paused with SIGSTOP (a long GC, a frozen VM) is replaced in about
// a second, but a produce already sent to it used to wait for the paused
// broker until the request timed out: the partition took no write for the
// whole pause. The client now notices the new leader and sends the batch
// there. The request timeout here is five minutes, so only that can
// acknowledge a write while the old leader stays paused.
func TestAPausedLeaderDoesNotHoldItsPartition(t *testing.T) {
	tc := startCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(ctx, tc.addrs(), client.WithRequestTimeout(5*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "paused", 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	p := c.NewProducer(client.WithAcks(stratav1.Acks_ACKS_ALL), client.WithIdempotence(true), client.WithDeliveryTimeout(5*time.Minute))
	defer p.Close()
	produce := func(ctx context.Context, v string) error {
		return p.ProduceSync(ctx, &client.Record{Topic: "paused", Value: []byte(v)})
	}
	if err := produce(ctx, "before"); err != nil {
		t.Fatal(err)
	}
	tc.waitInSync(ctx, time.Minute, "every replica in the ISR before the pause")

	victim := tc.byID(tc.leaderOf(ctx, "paused", 0))
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			victim.cmd.Process.Signal(syscall.SIGCONT)
			resumed = true
		}
	}
	defer resume()
	paused := time.Now()
	// Well below the request timeout: only the move to the new leader can
	// acknowledge this write while the old one stays paused.
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	err = produce(wctx, "during")
	wcancel()
	if err != nil {
		t.Fatalf("no write acknowledged within 30 s of pausing the leader (broker %d), which stays paused: %v", victim.id, err)
	}
	t.Logf("the first write after pausing leader %d was acknowledged %v later, by another leader", victim.id, time.Since(paused).Round(time.Millisecond))

	resume()
	if err := produce(ctx, "after"); err != nil {
		t.Fatal(err)
	}
	// Every acknowledged record once, in order: the abandoned request the
	// paused leader may still have held did not add a second copy.
	var got []string
	for _, r := range consumeAll(ctx, t, c, "paused") {
		got = append(got, string(r.Value))
	}
	if want := []string{"before", "during", "after"}; !slices.Equal(got, want) {
		t.Fatalf("partition holds %q, want %q", got, want)
	}
}
