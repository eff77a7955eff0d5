package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/tiering"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// TestCLIAddPartitions: strata topic add-partitions on a real broker with
// a real MinIO. The topic grows from 1 to 3 partitions; a decrease or the
// same count fails with a clear message and changes nothing; records
// produced to a new partition read back, are uploaded to the bucket, and
// every partition's manifest (the old one's too) records the new count by
// the time the command answers; a read replica of the bucket serves the
// new partition.
func TestCLIAddPartitions(t *testing.T) {
	m := miniotest.Start(t)
	b := newBroker(t, 1, s3Flags(m)...)
	b.start()

	out := mustStrata(t, b, "", "topic", "create", "grow", "-p", "1", "-r", "1",
		"--config", "retention.ms=-1,remote.max.lag.ms=1s,segment.bytes=64KiB")
	if !slices.Contains(rowsOf(out), "Partitions: 1") {
		t.Fatalf("topic create -p 1:\n%s", out)
	}
	mustStrata(t, b, "a\nb\n", "produce", "grow", "--partition", "0")

	help := mustStrata(t, b, "", "topic", "add-partitions", "--help")
	if !strings.Contains(help, "hash(key) mod N") {
		t.Errorf("add-partitions --help does not say keys move:\n%s", help)
	}
	out = mustStrata(t, b, "", "topic", "add-partitions", "grow", "--to", "3")
	rows := rowsOf(out)
	if !slices.Contains(rows, "Partitions: 3") {
		t.Fatalf("add-partitions --to 3:\n%s", out)
	}
	wantFailure(t, strata(t, b, "", "topic", "add-partitions", "grow", "--to", "3"), `topic "grow" has 3 partitions; the count asked for, 3, must be more`)
	wantFailure(t, strata(t, b, "", "topic", "add-partitions", "grow", "--count", "2"), "must be more")
	wantFailure(t, strata(t, b, "", "topic", "add-partitions", "nosuch", "--to", "2"), "not found")
	wantFailure(t, strata(t, b, "", "topic", "add-partitions", "grow"), "--to is required")
	if got, want := rowsOf(mustStrata(t, b, "", "topic", "list")), []string{"NAME PARTITIONS REPLICATION", "grow 3 1"}; !slices.Equal(got, want) {
		t.Errorf("topic list: %q, want %q", got, want)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := c.DescribeTopic(ctx, "grow")
	if err != nil {
		t.Fatal(err)
	}
	bucket := minioReader{c: m.Client, bucket: m.Bucket}
	for p := range int32(3) {
		h, _, err := tiering.LoadHead(ctx, bucket, tiering.PartitionRef{Topic: "grow", TopicID: d.Id, Partition: p})
		if err != nil || h == nil || h.Partitions != 3 {
			t.Fatalf("partition %d's manifest when add-partitions answered: %+v, %v; want one recording 3 partitions", p, h, err)
		}
	}

	var lines []string
	for i := range 200 {
		lines = append(lines, fmt.Sprintf("new-%03d-%s", i, strings.Repeat("x", 500)))
	}
	mustStrata(t, b, strings.Join(lines, "\n")+"\n", "produce", "grow", "--partition", "2")
	got := strings.Fields(mustStrata(t, b, "", "consume", "grow", "--partition", "2"))
	if !slices.Equal(got, lines) {
		t.Fatalf("partition 2 read back %d records, want %d", len(got), len(lines))
	}
	testutil.WaitFor(t, time.Minute, "partition 2 uploaded to the bucket", func() bool {
		d, err := c.DescribeTopic(ctx, "grow")
		return err == nil && d.Partitions[2].ColdEndOffset == int64(len(lines))
	})

	r := newBroker(t, 9, s3Flags(m, "--read-replica", "--read-replica-refresh", "200ms")...)
	r.start()
	testutil.WaitFor(t, time.Minute, "the read replica to serve 3 partitions", func() bool {
		out, err := r.tryRun(nil, "topic", "list")
		return err == nil && slices.Contains(rowsOf(out), "grow 3 1")
	})
	got = strings.Fields(mustStrata(t, r, "", "consume", "grow", "--partition", "2"))
	if !slices.Equal(got, lines) {
		t.Fatalf("the read replica served %d records of partition 2, want %d", len(got), len(lines))
	}
}

// TestKafkaAddPartitionsCluster: three `strata serve` processes. kadm,
// talking to broker 3 (the increase is passed on to the controller), adds
// two partitions to a topic replicated on all three; kgo produces to a
// new partition with acks=all; its leader is killed with SIGKILL, another
// in-sync replica takes over the new partition in a later epoch, takes
// more records, and every acknowledged record reads back once, in order.
func TestKafkaAddPartitionsCluster(t *testing.T) {
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
	if _, err := c.CreateTopic(ctx, "grow", 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	tc.leaderOf(ctx, "grow", 0) // every broker knows the topic
	seeds := []string{kafkaAddrs[3], kafkaAddrs[2], kafkaAddrs[1]}
	adm := kadm.NewClient(newKgo(t, kgo.SeedBrokers(seeds...)))
	res, err := adm.CreatePartitions(ctx, 2, "grow")
	if err != nil || res["grow"].Err != nil {
		t.Fatalf("add 2 partitions: %v %+v", err, res["grow"])
	}
	leader := tc.leaderOf(ctx, "grow", 2)
	before := tc.partition(ctx, "grow", 2)
	if len(before.Isr) != 3 {
		t.Fatalf("new partition 2: %+v, want all three replicas in sync", before)
	}

	cl := newKgo(t, kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	var acked []string
	produce := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			v := fmt.Sprintf("r%03d", i)
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "grow", Partition: 2, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s to partition 2: %v", v, err)
			}
			acked = append(acked, v)
		}
	}
	produce(0, 20)
	tc.byID(leader).kill9()
	next := tc.leaderOf(ctx, "grow", 2, leader)
	after := tc.partition(ctx, "grow", 2, leader)
	if next == leader || after.LeaderEpoch <= before.LeaderEpoch {
		t.Fatalf("after killing broker %d: leader %d in epoch %d (was %d)", leader, next, after.LeaderEpoch, before.LeaderEpoch)
	}
	produce(20, 20)

	consumer := newKgo(t, kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"grow": {2: kgo.NewOffset().AtStart()}}))
	var got []string
	for len(got) < len(acked) {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records: %v", len(got), len(acked), ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if !slices.Equal(got, acked) {
		t.Fatalf("partition 2 holds %v, want %v", got, acked)
	}
}

func newKgo(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
