package kafka

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ownership checks that no partition is owned by two members at once, as
// each member's callbacks report what it was given and gave up.
type ownership struct {
	t     *testing.T
	mu    sync.Mutex
	owner map[int32]string
}

func (o *ownership) assigned(who string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, list := range ps {
		for _, p := range list {
			if prev, ok := o.owner[p]; ok && prev != who {
				o.t.Errorf("partition %d given to %s while %s owns it", p, who, prev)
			}
			o.owner[p] = who
		}
	}
}

func (o *ownership) released(who string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, list := range ps {
		for _, p := range list {
			if o.owner[p] == who {
				delete(o.owner, p)
			}
		}
	}
}

// consumed is every record the group's members read, by partition and
// offset.
type consumed struct {
	mu   sync.Mutex
	seen map[[2]int64]bool
}

func (c *consumed) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// TestKgoConsumerGroupKIP848: three kgo members on the KIP-848 protocol
// (ServerSideBalancer, so ConsumerGroupHeartbeat with the "uniform"
// assignor) share six partitions, each owned by one member at a time;
// one leaves, its partitions move to the other two, and every record is
// consumed. Autocommit commits through OffsetCommit as members, and the
// group's positions reach the end of every partition.
func TestKgoConsumerGroupKIP848(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic(t, "events", 6)
	ctx := testCtx(t)
	prod := tb.client(t, kgo.DefaultProduceTopic("events"), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i), Partition: int32(i % 6)}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 300)

	own := &ownership{t: t, owner: map[int32]string{}}
	got := &consumed{seen: map[[2]int64]bool{}}
	members := make([]*kgo.Client, 3)
	var wg sync.WaitGroup
	for i := range members {
		who := fmt.Sprintf("member-%d", i)
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(tb.addr),
			kgo.ClientID(who),
			kgo.ConsumerGroup("cg"),
			kgo.ConsumeTopics("events"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.ServerSideBalancer(),
			kgo.AutoCommitInterval(100*time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.assigned(who, ps) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.released(who, ps) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.released(who, ps) }),
		)
		if err != nil {
			t.Fatal(err)
		}
		members[i] = cl
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				fs := cl.PollFetches(ctx)
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					got.mu.Lock()
					got.seen[[2]int64{int64(r.Partition), r.Offset}] = true
					got.mu.Unlock()
				})
			}
		}()
	}
	t.Cleanup(func() {
		for _, cl := range members {
			if cl != nil {
				cl.Close()
			}
		}
		wg.Wait()
	})

	adm := kadm.NewClient(tb.client(t))
	describe := func() kadm.DescribedConsumerGroup {
		ds, err := adm.DescribeConsumerGroups(ctx, "cg")
		if err != nil {
			t.Fatal(err)
		}
		return ds["cg"]
	}
	// spread is whether the group is stable with n members, each owning
	// its share, every partition once.
	spread := func(n int) bool {
		d := describe()
		if d.Err != nil || d.State != "Stable" || len(d.Members) != n {
			return false
		}
		seen := map[int32]int{}
		for _, m := range d.Members {
			if len(m.Assignment["events"]) < 6/n {
				return false
			}
			for p := range m.Assignment["events"] {
				seen[p]++
			}
		}
		for p := range int32(6) {
			if seen[p] != 1 {
				return false
			}
		}
		return true
	}
	waitFor(t, 30*time.Second, "three members sharing six partitions", func() bool { return spread(3) })
	waitFor(t, 30*time.Second, "the first 300 records consumed", func() bool { return got.count() == 300 })

	// One member leaves (Close leaves the group): its partitions go to the
	// other two.
	members[2].Close()
	members[2] = nil
	waitFor(t, 30*time.Second, "two members sharing six partitions", func() bool { return spread(2) })
	produce(300, 600)
	waitFor(t, 30*time.Second, "all 600 records consumed", func() bool { return got.count() == 600 })

	// Autocommit brings the group's positions to the end of every
	// partition (100 records each).
	waitFor(t, 30*time.Second, "commits at the end of every partition", func() bool {
		os, err := adm.FetchOffsets(ctx, "cg")
		if err != nil {
			return false
		}
		for p := range int32(6) {
			if o, ok := os.Lookup("events", p); !ok || o.At != 100 {
				return false
			}
		}
		return true
	})

	// ListGroups and DescribeGroups see the group, its members and what
	// they own; it cannot be deleted while it has members.
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := listed["cg"]; !ok || g.ProtocolType != "consumer" || g.State != "Stable" {
		t.Fatalf("listed %+v", listed)
	}
	described, err := adm.DescribeGroups(ctx, "cg")
	if err != nil {
		t.Fatal(err)
	}
	dg := described["cg"]
	if dg.Err != nil || dg.State != "Stable" || dg.ProtocolType != "consumer" || len(dg.Members) != 2 || len(dg.AssignedPartitions()["events"]) != 6 {
		t.Fatalf("described %+v", dg)
	}
	for _, m := range dg.Members {
		if m.ClientID != "member-0" && m.ClientID != "member-1" || m.ClientHost != "127.0.0.1" {
			t.Errorf("member %+v: want client member-0 or member-1 on 127.0.0.1", m)
		}
	}
	del, err := adm.DeleteGroups(ctx, "cg")
	if err != nil {
		t.Fatal(err)
	}
	if del["cg"].Err != kerr.NonEmptyGroup {
		t.Fatalf("delete of a group with members: %v, want NON_EMPTY_GROUP", del["cg"].Err)
	}
}
