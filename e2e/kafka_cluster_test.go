package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/record"
)

// TestKafkaEveryBrokerInMetadata: three `strata serve` processes, each with
// a Kafka listener, publish their Kafka addresses in the cluster metadata.
// A kgo client seeded with broker 1 alone learns all three from Metadata,
// produces to partitions led by each of them and reads every record back.
// A Produce (v10+) or Fetch (v16+) sent to a broker that does not lead the
// partition is NOT_LEADER_OR_FOLLOWER with the leader, its epoch and its
// Kafka endpoint (KIP-951).
func TestKafkaEveryBrokerInMetadata(t *testing.T) {
	tc := &testCluster{t: t}
	for range 3 {
		tc.gossip = append(tc.gossip, freeport.Loopback(t))
	}
	kafkaAddrs := map[int32]string{}
	for i := range 3 {
		id := int32(i + 1)
		kafkaAddrs[id] = freeport.Loopback(t)
		tc.brokers = append(tc.brokers, tc.newMember(i+1, tc.gossip[i], "--kafka-listen", kafkaAddrs[id]))
	}
	tc.start()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(ctx, tc.addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const topic, partitions = "kafka-spread", 6
	if _, err := c.CreateTopic(ctx, topic, partitions, 3, nil); err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int32{} // partition → leader
	for p := range int32(partitions) {
		leaders[p] = tc.leaderOf(ctx, topic, p)
	}
	ledBy := map[int32]int32{} // broker → a partition it leads
	for p, l := range leaders {
		ledBy[l] = p
	}
	if len(ledBy) != 3 {
		t.Fatalf("leaders %v: want every broker to lead a partition", leaders)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddrs[1]), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// Metadata lists all three at their Kafka addresses, wherever asked.
	for id := int32(1); id <= 3; id++ {
		req := kmsg.NewPtrMetadataRequest()
		resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
		if id == 1 && err != nil {
			t.Fatalf("metadata from broker 1: %v", err)
		}
		if err != nil {
			continue // broker 2 and 3 are known only once broker 1 named them
		}
		got := map[int32]string{}
		for _, b := range resp.Brokers {
			got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
		if fmt.Sprint(got) != fmt.Sprint(kafkaAddrs) {
			t.Fatalf("broker %d's Metadata lists brokers %v, want %v", id, got, kafkaAddrs)
		}
	}

	// Produce to every partition through a client that was told one broker.
	want := map[int32][]string{}
	for p := range int32(partitions) {
		for i := range 5 {
			v := fmt.Sprintf("p%d-r%d", p, i)
			r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce to partition %d (leader %d): %v", p, leaders[p], err)
			}
			want[p] = append(want[p], v)
		}
	}
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	for p := range int32(partitions) {
		offsets[topic][p] = kgo.NewOffset().AtStart()
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddrs[1]), kgo.ConsumePartitions(offsets))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	got := map[int32][]string{}
	for n := 0; n < partitions*5; {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", n, partitions*5, err)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Logf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
	for p := range int32(partitions) {
		if !slices.Equal(got[p], want[p]) {
			t.Fatalf("partition %d (leader %d): read %v, want %v", p, leaders[p], got[p], want[p])
		}
	}

	// KIP-951: broker 1 asked about a partition broker 2 leads.
	part := ledBy[2]
	epoch := tc.partition(ctx, topic, part).LeaderEpoch
	batch, err := record.Encode(record.DefaultBatchOptions(), record.Record{Value: []byte("to the wrong broker")})
	if err != nil {
		t.Fatal(err)
	}
	preq := kmsg.NewPtrProduceRequest()
	preq.Acks, preq.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition, pp.Records = part, batch
	pt.Partitions = append(pt.Partitions, pp)
	preq.Topics = append(preq.Topics, pt)
	// kgo sends the highest version both serve: v12 now, v10+ required.
	presp, err := preq.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	if presp.Version < 10 {
		t.Fatalf("produce sent at v%d, want v10+", presp.Version)
	}
	ppr := presp.Topics[0].Partitions[0]
	if ppr.ErrorCode != kerr.NotLeaderForPartition.Code || ppr.CurrentLeader.LeaderID != 2 || ppr.CurrentLeader.LeaderEpoch != int32(epoch) {
		t.Fatalf("produce v10 to broker 1 for partition %d led by 2 (epoch %d): error %d, current leader %+v",
			part, epoch, ppr.ErrorCode, ppr.CurrentLeader)
	}
	if len(presp.Brokers) != 1 || presp.Brokers[0].NodeID != 2 ||
		net.JoinHostPort(presp.Brokers[0].Host, strconv.Itoa(int(presp.Brokers[0].Port))) != kafkaAddrs[2] {
		t.Fatalf("produce v10 node endpoints %+v, want broker 2 at %s", presp.Brokers, kafkaAddrs[2])
	}
	// Fetch v16+, by topic id.
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	freq := kmsg.NewPtrFetchRequest()
	freq.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = mresp.Topics[0].TopicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes = part, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp, err := freq.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	if fresp.Version < 16 {
		t.Fatalf("fetch sent at v%d, want v16+", fresp.Version)
	}
	fpr := fresp.Topics[0].Partitions[0]
	if fpr.ErrorCode != kerr.NotLeaderForPartition.Code || fpr.CurrentLeader.LeaderID != 2 || fpr.CurrentLeader.LeaderEpoch != int32(epoch) {
		t.Fatalf("fetch v16 from broker 1 for partition %d led by 2 (epoch %d): error %d, current leader %+v",
			part, epoch, fpr.ErrorCode, fpr.CurrentLeader)
	}
	if len(fresp.Brokers) != 1 || fresp.Brokers[0].NodeID != 2 ||
		net.JoinHostPort(fresp.Brokers[0].Host, strconv.Itoa(int(fresp.Brokers[0].Port))) != kafkaAddrs[2] {
		t.Fatalf("fetch v16 node endpoints %+v, want broker 2 at %s", fresp.Brokers, kafkaAddrs[2])
	}
}

// TestKafkaBrokerWithoutListener: in a cluster where broker 3 opens no
// Kafka listener, Metadata lists brokers 1 and 2 only, and a partition
// broker 3 leads still names it as leader (a Kafka client then waits and
// refreshes until leadership moves to a broker it can reach).
func TestKafkaBrokerWithoutListener(t *testing.T) {
	tc := &testCluster{t: t}
	for range 3 {
		tc.gossip = append(tc.gossip, freeport.Loopback(t))
	}
	kafkaAddrs := map[int32]string{}
	for i := range 3 {
		id := int32(i + 1)
		var extra []string
		if id != 3 {
			kafkaAddrs[id] = freeport.Loopback(t)
			extra = []string{"--kafka-listen", kafkaAddrs[id]}
		}
		tc.brokers = append(tc.brokers, tc.newMember(i+1, tc.gossip[i], extra...))
	}
	tc.start()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(ctx, tc.addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const topic, partitions = "kafka-partial", 6
	if _, err := c.CreateTopic(ctx, topic, partitions, 1, nil); err != nil {
		t.Fatal(err)
	}
	part := tc.partitionLedBy(ctx, topic, partitions, 3)

	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddrs[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, mt)
	resp, err := req.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32]string{}
	for _, b := range resp.Brokers {
		got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	if fmt.Sprint(got) != fmt.Sprint(kafkaAddrs) {
		t.Fatalf("Metadata lists brokers %v, want %v (broker 3 has no Kafka listener)", got, kafkaAddrs)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.Partition == part && (p.Leader != 3 || p.ErrorCode != 0) {
			t.Fatalf("partition %d led by broker 3: leader %d, error %d; want leader 3", part, p.Leader, p.ErrorCode)
		}
	}
}
