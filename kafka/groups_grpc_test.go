package kafka

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/rpc"
)

// startGRPC serves tb's gRPC front end at the address the broker
// advertises, as strata serve does, and stops it when the test ends.
func (tb *testBroker) startGRPC(t *testing.T) string {
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

// A group whose members joined over gRPC (Strata's own GroupConsumer) is
// the same group to Kafka clients: DescribeGroups and
// ConsumerGroupDescribe show its members with what they own, and
// OffsetFetch reads its commits.
func TestGRPCGroupSeenByKafka(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic(t, "events", 2)
	ctx := testCtx(t)
	addr := tb.startGRPC(t)

	prod := tb.client(t, kgo.DefaultProduceTopic("events"), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 10 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "v%d", i), Partition: int32(i % 2)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	var gs []*client.GroupConsumer
	for i := range 2 {
		c, err := client.New(ctx, []string{addr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		g, err := c.NewGroupConsumer("shared", []string{"events"},
			client.WithGroupClientID(fmt.Sprintf("grpc-%d", i)),
			client.WithGroupStartAt(client.Earliest()),
			client.WithAutoCommitInterval(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close(context.Background()) })
		gs = append(gs, g)
	}
	// Poll until each owns one partition and has read to its end (five
	// records; a partition that moved was committed by its first owner on
	// the way and resumed there).
	testutil.WaitFor(t, 30*time.Second, "two gRPC members reading a partition each", func() bool {
		done := true
		for _, g := range gs {
			pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			_, err := g.Poll(pctx)
			cancel()
			if err != nil && pctx.Err() == nil {
				t.Fatalf("poll: %v", err)
			}
			a := g.Assignment()
			done = done && len(a) == 1 && g.Position(a[0].Topic, a[0].Partition) == 5
		}
		return done
	})
	for _, g := range gs {
		if err := g.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}

	adm := kadm.NewClient(tb.client(t))
	want := []string{gs[0].MemberID(), gs[1].MemberID()}
	slices.Sort(want)

	cd, err := adm.DescribeConsumerGroups(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	d := cd["shared"]
	var ids []string
	for _, m := range d.Members {
		ids = append(ids, m.MemberID)
		if len(m.Assignment["events"]) != 1 || !slices.Contains([]string{"grpc-0", "grpc-1"}, m.ClientID) {
			t.Errorf("member %+v", m)
		}
	}
	slices.Sort(ids)
	if d.Err != nil || d.State != "Stable" || !slices.Equal(ids, want) || len(d.AssignedPartitions()["events"]) != 2 {
		t.Fatalf("ConsumerGroupDescribe: %+v, members %v, want %v", d, ids, want)
	}

	dg, err := adm.DescribeGroups(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	described := dg["shared"]
	ids = ids[:0]
	for _, m := range described.Members {
		ids = append(ids, m.MemberID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, want) || len(described.AssignedPartitions()["events"]) != 2 {
		t.Fatalf("DescribeGroups: %+v, want members %v", described, want)
	}

	os, err := adm.FetchOffsets(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		if o, ok := os.Lookup("events", p); !ok || o.At != 5 {
			t.Errorf("events/%d committed over gRPC, fetched over Kafka: %+v, want 5", p, o)
		}
	}
}
