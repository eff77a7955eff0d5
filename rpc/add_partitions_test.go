package rpc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// TestAddPartitions: partitions added through a broker that is not the
// controller (the call is passed on) are there on it when the call
// answers; a new partition takes acks=all produce on its leader, replicates
// to every replica and reads back; the existing partitions keep their
// records, leaders and epochs; a Go client producer that started before
// the increase maps keys over the new count once its metadata is
// refreshed; a decrease or an equal count is refused and changes nothing.
func TestAddPartitions(t *testing.T) {
	bs := threeBrokers(t)
	ctx := testCtx(t)
	createEverywhere(t, bs, "grow", 2, map[string]string{"replication.factor": "2"})
	leader0 := byID(bs, partitionState(t, bs[0], "grow", 0).Metadata.Leader)
	if _, err := leader0.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "grow", Partition: 0, Batch: batchOf(t, "a", "b"), Acks: stratav1.Acks_ACKS_ALL}); err != nil {
		t.Fatal(err)
	}

	c, err := client.New(ctx, []string{bs[0].addr}, client.WithLogger(quietLogger()), client.WithMetadataMaxAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	producer := c.NewProducer()
	defer producer.Close()
	if err := producer.ProduceSync(ctx, &client.Record{Topic: "grow", Partition: client.AnyPartition, Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}

	before := partitionState(t, bs[0], "grow", 0)
	via := bs[2] // not the controller: broker 1 bootstrapped the metadata group
	// UNAVAILABLE: no controller known for a moment (an election under
	// load); the change is not made, so the call is made again.
	var resp *stratav1.AddPartitionsResponse
	testutil.WaitFor(t, 20*time.Second, "the increase", func() bool {
		resp, err = via.admin.AddPartitions(ctx, &stratav1.AddPartitionsRequest{Name: "grow", Count: 4})
		if err != nil && status.Code(err) != codes.Unavailable {
			t.Fatal(err)
		}
		return err == nil
	})
	if n := len(resp.Topic.Partitions); n != 4 {
		t.Fatalf("answer lists %d partitions, want 4", n)
	}
	for p := int32(2); p < 4; p++ {
		st := partitionState(t, via, "grow", p)
		if len(st.Metadata.Replicas) != 2 || st.HighWatermark != 0 {
			t.Fatalf("new partition %d on broker %d: %+v", p, via.ID(), st)
		}
	}
	after := partitionState(t, bs[0], "grow", 0)
	if after.HighWatermark != before.HighWatermark || after.Metadata.Leader != before.Metadata.Leader || after.Metadata.LeaderEpoch != before.Metadata.LeaderEpoch {
		t.Fatalf("partition 0 changed: %+v -> %+v", before, after)
	}

	// acks=all on a new partition: every replica has it.
	st := partitionState(t, bs[0], "grow", 3)
	leader3 := byID(bs, st.Metadata.Leader)
	res, err := leader3.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "grow", Partition: 3, Batch: batchOf(t, "x", "y", "z"), Acks: stratav1.Acks_ACKS_ALL})
	if err != nil {
		t.Fatalf("produce to the new partition: %v", err)
	}
	if res.BaseOffset != 0 || res.LastOffset != 2 {
		t.Fatalf("offsets %d..%d in a new partition, want 0..2", res.BaseOffset, res.LastOffset)
	}
	for _, id := range st.Metadata.Replicas {
		b := byID(bs, id)
		testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("broker %d to have partition 3's records", id), func() bool {
			p := partitionState(t, b, "grow", 3)
			return p.LogEndOffset == 3 && p.HighWatermark == 3
		})
	}
	if _, recs := leader3.readAll(t, "grow", 3, 0); len(recs) != 3 || string(recs[2].Value) != "z" {
		t.Fatalf("read back %d records from the new partition", len(recs))
	}

	// The client's producer, started before: keys spread over 4 partitions
	// once it has refreshed its metadata.
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		r := &client.Record{Topic: "grow", Partition: client.AnyPartition, Key: fmt.Appendf(nil, "key-%d", i), Value: []byte("v")}
		if err := producer.ProduceSync(ctx, r); err != nil {
			t.Fatal(err)
		}
		if r.Partition >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the producer sent no key to a new partition within 20s")
		}
	}

	// Refusals.
	for _, count := range []int32{4, 3, 0, -1} {
		_, err := via.admin.AddPartitions(ctx, &stratav1.AddPartitionsRequest{Name: "grow", Count: count})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("count %d: %v, want InvalidArgument", count, err)
		}
	}
	_, err = via.admin.AddPartitions(ctx, &stratav1.AddPartitionsRequest{Name: "nosuch", Count: 4})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("unknown topic: %v", err)
	}
	_, err = via.admin.AddPartitions(ctx, &stratav1.AddPartitionsRequest{Name: "grow", Count: 5, Assignment: []*stratav1.ReplicaList{{Brokers: []int32{1}}}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an assignment of another replication factor: %v", err)
	}
	for _, b := range bs {
		testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("broker %d to have 4 partitions", b.ID()), func() bool {
			d, err := b.admin.DescribeTopic(ctx, &stratav1.DescribeTopicRequest{Name: "grow"})
			return err == nil && len(d.Topic.Partitions) == 4
		})
	}
}

// TestAddPartitionsGroup: a consumer group subscribed to a topic is given
// the partitions added to it and reads what is written there.
func TestAddPartitionsGroup(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	ctx := testCtx(t)
	tb.createTopic(t, "grow", 2, nil)
	c, err := client.New(ctx, []string{tb.addr}, client.WithLogger(quietLogger()), client.WithMetadataMaxAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := c.NewGroupConsumer("readers", []string{"grow"}, client.WithGroupStartAt(client.Earliest()))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	pollUntil := func(what string, cond func([]*client.Record) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			recs, err := g.Poll(pctx)
			cancel()
			if err != nil && ctx.Err() != nil {
				t.Fatal(err)
			}
			if cond(recs) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; assignment %v", what, g.Assignment())
			}
		}
	}
	pollUntil("both partitions assigned", func([]*client.Record) bool { return len(g.Assignment()) == 2 })

	if _, err := tb.admin.AddPartitions(ctx, &stratav1.AddPartitionsRequest{Name: "grow", Count: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "grow", Partition: 3, Batch: batchOf(t, "in-a-new-partition"), Acks: stratav1.Acks_ACKS_ALL}); err != nil {
		t.Fatal(err)
	}
	pollUntil("the record in partition 3", func(recs []*client.Record) bool {
		for _, r := range recs {
			if r.Partition == 3 && string(r.Value) == "in-a-new-partition" {
				return true
			}
		}
		return false
	})
	if n := len(g.Assignment()); n != 4 {
		t.Fatalf("the only member holds %d partitions, want 4", n)
	}
}
