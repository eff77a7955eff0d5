package kafka

import (
	"context"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/rpc"
)

// serveGRPC serves tb's gRPC front end on the address it advertises, so
// Strata's own client reaches it.
func serveGRPC(t *testing.T, tb *testBroker) string {
	t.Helper()
	addr := tb.Cluster(nil).Brokers[0].Addr
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewServer(tb.Broker, nil)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return addr
}

// groupConsumerMember runs a KIP-848 member (Strata's client.GroupConsumer
// over gRPC) of grp on topic, recording into l, until the test ends.
func groupConsumerMember(t *testing.T, addr string, l *ledger, name, grp, topic string) {
	t.Helper()
	cl, err := client.New(testCtx(t), []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	list := func(tps []client.TopicPartition) []int32 {
		var out []int32
		for _, tp := range tps {
			out = append(out, tp.Partition)
		}
		return out
	}
	g, err := cl.NewGroupConsumer(grp, []string{topic},
		client.WithSessionTimeout(3*time.Second),
		client.WithAutoCommitInterval(200*time.Millisecond),
		client.WithGroupClientID(name),
		client.WithOnAssigned(func(_ context.Context, tps []client.TopicPartition) { l.assigned(name, list(tps)) }),
		client.WithOnRevoked(func(_ context.Context, tps []client.TopicPartition) { l.released(name, list(tps)) }),
		client.WithOnLost(func(_ context.Context, tps []client.TopicPartition) { l.released(name, list(tps)) }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			recs, err := g.Poll(ctx)
			if err != nil && ctx.Err() == nil {
				t.Logf("%s: poll: %v", name, err)
				time.Sleep(50 * time.Millisecond) // a failed poll is retried; do not spin
			}
			for _, r := range recs {
				l.consume(name, r.Partition, string(r.Value))
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		g.Close(context.Background())
		cl.Close()
	})
}

// TestClassicMixedGroup: a classic kgo member (cooperative-sticky) and a
// KIP-848 member (Strata's GroupConsumer over gRPC, or kgo over
// ConsumerGroupHeartbeat) in one group share the partitions without
// overlap, each consuming its own, and every record is consumed.
func TestClassicMixedGroup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T, tb *testBroker, addr string, l *ledger)
	}{
		{"grpc", func(t *testing.T, _ *testBroker, addr string, l *ledger) {
			groupConsumerMember(t, addr, l, "kip848", "mix", "mixed")
		}},
		{"kafka", func(t *testing.T, tb *testBroker, _ string, l *ledger) {
			classicMember(t, tb, l, "kip848", "mix", "mixed", nil, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const partitions = 6
			tb := startBroker(t)
			addr := serveGRPC(t, tb)
			tb.createTopic(t, "mixed", partitions)
			produceValues(t, tb, "mixed", partitions, 0, 120)
			l := newLedger()
			classicMember(t, tb, l, "classic", "mix", "mixed", nil, kgo.Balancers(kgo.CooperativeStickyBalancer()))
			l.waitFor(t, "the classic member owns every partition", 30*time.Second, func() bool { return len(l.owner) == partitions })
			tc.start(t, tb, addr, l)
			l.waitFor(t, "the two members share the partitions", 30*time.Second, func() bool {
				var owners []string
				for _, o := range l.owner {
					if !slices.Contains(owners, o) {
						owners = append(owners, o)
					}
				}
				return len(l.owner) == partitions && len(owners) == 2
			})
			produceValues(t, tb, "mixed", partitions, 120, 120)
			l.waitFor(t, "every record is consumed", 30*time.Second, func() bool {
				for i := range 240 {
					if l.consumed[strconv.Itoa(i)] == 0 {
						return false
					}
				}
				return true
			})
			d, err := tb.DescribeGroup(testCtx(t), "mix")
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, m := range d.Members {
				kinds = append(kinds, m.ClientID+":"+m.ClassicProtocol)
			}
			slices.Sort(kinds)
			if want := []string{"classic:cooperative-sticky", "kip848:"}; !slices.Equal(kinds, want) {
				t.Errorf("members %v, want %v (one classic, one KIP-848)", kinds, want)
			}
			// ConsumerGroupDescribe v1 tells the kinds apart too.
			creq := kmsg.NewPtrConsumerGroupDescribeRequest()
			creq.Groups = []string{"mix"}
			cresp, err := creq.RequestWith(testCtx(t), tb.client(t))
			if err != nil {
				t.Fatal(err)
			}
			types := map[string]int8{}
			for _, m := range cresp.Groups[0].Members {
				types[m.ClientID] = m.MemberType
			}
			if types["classic"] != 0 || types["kip848"] != 1 {
				t.Errorf("member types %v, want classic 0 and kip848 1", types)
			}
			l.check(t)
		})
	}
}
