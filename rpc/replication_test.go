package rpc

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// threeBrokers starts a cluster of three brokers on loopback.
func threeBrokers(t *testing.T) []*testBroker {
	dir := t.TempDir()
	b1 := startBroker(t, brokerConfig(t, 1, filepath.Join(dir, "b1")))
	b2 := joinSecondBroker(t, b1, brokerConfig(t, 2, filepath.Join(dir, "b2")))
	b3 := joinSecondBroker(t, b1, brokerConfig(t, 3, filepath.Join(dir, "b3")))
	return []*testBroker{b1, b2, b3}
}

// partitionState asks a broker for one partition's description.
func partitionState(t *testing.T, b *testBroker, topic string, p int32) *stratav1.PartitionDescription {
	d, err := b.admin.DescribeTopic(testCtx(t), &stratav1.DescribeTopicRequest{Name: topic})
	if err != nil {
		t.Fatal(err)
	}
	return d.Topic.Partitions[p]
}

// createEverywhere creates a topic and waits until every broker knows it.
func createEverywhere(t *testing.T, bs []*testBroker, name string, partitions int32, cfg map[string]string) {
	bs[0].createTopic(t, name, partitions, cfg)
	for _, b := range bs {
		testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("broker %d to know topic %s", b.cfg.NodeID, name), func() bool {
			_, err := b.admin.DescribeTopic(testCtx(t), &stratav1.DescribeTopicRequest{Name: name})
			return err == nil
		})
		// Knowing the topic is not having opened its replicas (they open
		// outside the broker lock): wait until they reflect the metadata.
		if err := b.Ready(testCtx(t)); err != nil {
			t.Fatalf("broker %d: %v", b.cfg.NodeID, err)
		}
	}
}

func byID(bs []*testBroker, id int32) *testBroker {
	for _, b := range bs {
		if b.ID() == id {
			return b
		}
	}
	return nil
}

// TestReplicationCommitsOnEveryReplica: with acks=all a batch is answered
// once the in-sync replicas have it; every replica's log ends up
// byte-identical to the leader's, and the high watermark reaches them all.
func TestReplicationCommitsOnEveryReplica(t *testing.T) {
	bs := threeBrokers(t)
	ctx := testCtx(t)
	createEverywhere(t, bs, "r", 1, map[string]string{"replication.factor": "3", "min.insync.replicas": "2", "segment.bytes": "16KiB"})
	leader := byID(bs, partitionState(t, bs[0], "r", 0).Metadata.Leader)
	var sent int64
	for i := range 300 {
		res, err := leader.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "r", Batch: batchOf(t, fmt.Sprintf("%03d-%0200d", i, i)), Acks: stratav1.Acks_ACKS_ALL})
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		sent = res.LastOffset + 1
	}
	for _, b := range bs {
		testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("broker %d to have every record", b.ID()), func() bool {
			p := partitionState(t, b, "r", 0)
			return p.LogEndOffset == sent && p.HighWatermark == sent && len(p.Metadata.Isr) == 3
		})
	}
	want, _ := leader.readAll(t, "r", 0, 0)
	id := partitionTopicID(t, bs[0], "r")
	// A follower's epoch query over the wire: the leader names the epoch,
	// where it ends, and its log end (which a follower whose epochs it
	// does not know keeps no record past).
	peers := NewPeers(nil, "")
	defer peers.Close()
	epoch := partitionState(t, leader, "r", 0).Metadata.LeaderEpoch
	ans, err := peers.EndOffsetForEpoch(ctx, broker.Peer{ID: leader.ID(), Addr: leader.cfg.Listen}, broker.EpochQuery{Topic: "r", TopicID: id, Partition: 0, Epoch: epoch})
	if err != nil || ans.Epoch != epoch || ans.EndOffset != sent || ans.LogEnd != sent {
		t.Fatalf("epoch %d query: %+v, %v; want the epoch ending at %d and log end %d", epoch, ans, err, sent, sent)
	}
	for _, b := range bs {
		b.stop(t)
	}
	for _, b := range bs {
		if got := localLog(t, b, "r", id, 0); !bytes.Equal(got, want) {
			t.Fatalf("broker %d's log differs from what the leader served (%d vs %d bytes)", b.cfg.NodeID, len(got), len(want))
		}
	}
}

func partitionTopicID(t *testing.T, b *testBroker, topic string) string {
	d, err := b.admin.DescribeTopic(testCtx(t), &stratav1.DescribeTopicRequest{Name: topic})
	if err != nil {
		t.Fatal(err)
	}
	return d.Topic.Id
}

// localLog reads a stopped broker's log of a partition from its disk.
func localLog(t *testing.T, b *testBroker, topic, id string, p int32) []byte {
	t.Helper()
	opts := hotlog.DefaultOptions()
	opts.Logger = quietLogger()
	l, err := hotlog.Open(filepath.Join(b.cfg.DataDir, "logs", topic+"-"+id, fmt.Sprint(p)), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out []byte
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		res, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		out, off = append(out, res.Data...), res.NextOffset
	}
	return out
}

// TestLeaderFailover: when a partition's leader stops, the controller
// elects another in-sync replica with a new epoch; it takes writes, keeps
// everything committed, and the old leader comes back as a follower and
// rejoins the ISR.
func TestLeaderFailover(t *testing.T) {
	bs := threeBrokers(t)
	ctx := testCtx(t)
	createEverywhere(t, bs, "f", 3, map[string]string{"replication.factor": "3", "min.insync.replicas": "2"})
	// Fail the leader of a partition that the controller (broker 1) does not
	// lead, so the controller survives.
	var p int32 = -1
	for i := range int32(3) {
		if partitionState(t, bs[0], "f", i).Metadata.Leader != 1 {
			p = i
			break
		}
	}
	before := partitionState(t, bs[0], "f", p).Metadata
	old := byID(bs, before.Leader)
	for i := range 50 {
		if _, err := old.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "f", Partition: p, Batch: batchOf(t, fmt.Sprint(i)), Acks: stratav1.Acks_ACKS_ALL}); err != nil {
			t.Fatal(err)
		}
	}
	old.stop(t)
	var after *stratav1.PartitionMetadata
	testutil.WaitFor(t, 20*time.Second, "a new leader", func() bool {
		after = partitionState(t, bs[0], "f", p).Metadata
		return after.Leader != before.Leader && after.Leader > 0
	})
	if after.LeaderEpoch <= before.LeaderEpoch {
		t.Fatalf("leader epoch %d after failover, %d before", after.LeaderEpoch, before.LeaderEpoch)
	}
	next := byID(bs, after.Leader)
	testutil.WaitFor(t, 20*time.Second, "the new leader to take writes", func() bool {
		_, err := next.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "f", Partition: p, Batch: batchOf(t, "after"), Acks: stratav1.Acks_ACKS_ALL})
		return err == nil
	})
	_, recs := next.readAll(t, "f", p, 0)
	if len(recs) < 51 {
		t.Fatalf("%d records after failover, want the 50 committed before and at least one after", len(recs))
	}
	for i := range 50 {
		if string(recs[i].Value) != fmt.Sprint(i) {
			t.Fatalf("record %d is %q after failover", i, recs[i].Value)
		}
	}
	// The old leader returns as a follower and rejoins the ISR.
	startBrokerAt(t, old.cfg)
	testutil.WaitFor(t, 20*time.Second, "the old leader to rejoin the ISR", func() bool {
		return len(partitionState(t, bs[0], "f", p).Metadata.Isr) == 3
	})
}

// TestReplicateRefusesAPositionPastTheLeadersLog: a Replicate stream that
// names a follower and claims a log end far past the leader's is answered
// OFFSET_OUT_OF_RANGE and counted nowhere (before, it kept the follower in
// the ISR and moved the high watermark past what the follower held). In
// plaintext mode any local process can open the stream; the check is the
// protocol's. The real follower goes on replicating.
func TestReplicateRefusesAPositionPastTheLeadersLog(t *testing.T) {
	dir := t.TempDir()
	b1 := startBroker(t, brokerConfig(t, 1, filepath.Join(dir, "b1")))
	b2 := joinSecondBroker(t, b1, brokerConfig(t, 2, filepath.Join(dir, "b2")))
	createEverywhere(t, []*testBroker{b1, b2}, "f", 2, map[string]string{"replication.factor": "2", "min.insync.replicas": "2"})
	p := ledBy(t, b1, "f", 1)
	waitForISR(t, b1, "f", p, 2)
	ctx := testCtx(t)
	produce := func() int64 {
		res, err := b1.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "f", Partition: p, Batch: batchOf(t, "a", "b", "c"), Acks: stratav1.Acks_ACKS_ALL})
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
		return res.LastOffset + 1
	}
	end := produce()
	epoch := partitionState(t, b1, "f", p).Metadata.LeaderEpoch

	stream, err := stratav1.NewReplicationServiceClient(b1.conn).Replicate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&stratav1.ReplicateRequest{FollowerId: 2, Positions: []*stratav1.ReplicaPosition{
		{Topic: "f", TopicId: partitionTopicID(t, b1, "f"), Partition: p, LeaderEpoch: epoch, LogEndOffset: 1 << 40}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorReason != "OFFSET_OUT_OF_RANGE" || resp.Partition != p || len(resp.Batches) > 0 {
		t.Fatalf("a claimed log end of 2^40 against a log ending at %d was answered %v; want OFFSET_OUT_OF_RANGE", end, resp)
	}
	if st := partitionState(t, b1, "f", p); st.HighWatermark > st.LogEndOffset || st.LogEndOffset != end {
		t.Fatalf("after the claim: high watermark %d, log end %d; want both at %d", st.HighWatermark, st.LogEndOffset, end)
	}
	end = produce()
	testutil.WaitFor(t, 20*time.Second, "broker 2 to have the new records", func() bool {
		st := partitionState(t, b2, "f", p)
		return st.LogEndOffset == end && len(st.Metadata.Isr) == 2
	})
}

// TestFollowersCopyManyChunksByteForByte: batches written faster than
// acks=all waits for go to the followers in many chunks of up to a MiB,
// each read into a buffer the leader reuses for the next and received into
// one the follower gives back once applied (with this package's pool
// poisoning every buffer it hands out); every replica's log still ends up
// byte-identical to the leader's.
func TestFollowersCopyManyChunksByteForByte(t *testing.T) {
	bs := threeBrokers(t)
	createEverywhere(t, bs, "many", 1, map[string]string{"replication.factor": "3", "min.insync.replicas": "1", "segment.bytes": "4MiB"})
	leader := byID(bs, partitionState(t, bs[0], "many", 0).Metadata.Leader)
	var sent int64
	for i := range 48 {
		values := make([]string, 120)
		for j := range values {
			values[j] = fmt.Sprintf("%03d-%03d-%01000d", i, j, i*j)
		}
		res, err := leader.produce.Produce(testCtx(t), &stratav1.ProduceRequest{Topic: "many", Batch: batchOf(t, values...), Acks: stratav1.Acks_ACKS_LEADER})
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		sent = res.LastOffset + 1
	}
	for _, b := range bs {
		testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("broker %d to have every record", b.ID()), func() bool {
			p := partitionState(t, b, "many", 0)
			return p.LogEndOffset == sent && p.HighWatermark == sent
		})
	}
	want, _ := leader.readAll(t, "many", 0, 0)
	if len(want) < 5<<20 {
		t.Fatalf("the leader holds %d bytes, want more than 5 MiB: several chunks", len(want))
	}
	id := partitionTopicID(t, bs[0], "many")
	for _, b := range bs {
		b.stop(t)
	}
	for _, b := range bs {
		if got := localLog(t, b, "many", id, 0); !bytes.Equal(got, want) {
			t.Fatalf("broker %d's log differs from what the leader served (%d vs %d bytes)", b.cfg.NodeID, len(got), len(want))
		}
	}
}
