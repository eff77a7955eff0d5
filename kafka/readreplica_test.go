package kafka

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
)

// TestReadReplica: the Kafka front end over a read-only replica of the
// bucket a broker writes serves Metadata (itself the leader), ListOffsets
// and Fetch from the bucket, and refuses Produce with the read-replica
// error (POLICY_VIOLATION and the broker's message), as it does over the
// writing broker with no code of its own for the mode.
func TestReadReplica(t *testing.T) {
	objects := filepath.Join(t.TempDir(), "objects")
	w := startBrokerWith(t, func(c *config.Broker) {
		c.ObjectStore.Type = config.ObjectStoreFS
		c.ObjectStore.Path = objects
	})
	const topic, n = "rr", 20
	if _, err := w.CreateTopic(testCtx(t), topic, 1, 1, map[string]string{"remote.max.lag.ms": "1s", "retention.ms": "-1"}); err != nil {
		t.Fatal(err)
	}
	wcl := w.client(t)
	for i := range n {
		if err := wcl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("v%02d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, time.Minute, "the cold tier of "+topic, func() error {
		d, err := w.DescribeTopic(topic)
		if err != nil {
			t.Fatal(err)
		}
		if d.Partitions[0].ColdEndOffset != n {
			return fmt.Errorf("the cold tier of %s did not reach %d: %+v", topic, n, d.Partitions[0])
		}
		return nil
	})

	r := startBrokerWith(t, func(c *config.Broker) {
		c.NodeID = 9
		c.ReadReplica = true
		c.ReadReplicaRefresh = config.Duration(100 * time.Millisecond)
		c.ObjectStore.Type = config.ObjectStoreFS
		c.ObjectStore.Path = objects
	})
	if !r.ReadReplica() {
		t.Fatal("the second broker is not a read replica")
	}
	c := dialRaw(t, r.addr)

	// Metadata: the replica alone, leading the topic it found in the
	// bucket, at its Kafka listener.
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	md := c.ask(mreq, 12).(*kmsg.MetadataResponse)
	host, port, _ := net.SplitHostPort(r.addr)
	if len(md.Brokers) != 1 || md.Brokers[0].NodeID != 9 || md.Brokers[0].Host != host || strconv.Itoa(int(md.Brokers[0].Port)) != port {
		t.Fatalf("metadata brokers %+v; want the replica alone, 9 at %s", md.Brokers, r.addr)
	}
	if len(md.Topics) != 1 || md.Topics[0].ErrorCode != 0 || len(md.Topics[0].Partitions) != 1 || md.Topics[0].Partitions[0].Leader != 9 {
		t.Fatalf("metadata topics %+v; want %s with one partition led by 9", md.Topics, topic)
	}

	// ListOffsets: earliest and latest are the bucket's.
	list := func(ts int64) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.ask(req, 7).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	if e, l := list(-2), list(-1); e.ErrorCode != 0 || e.Offset != 0 || l.ErrorCode != 0 || l.Offset != n {
		t.Fatalf("earliest %+v, latest %+v; want 0 and %d", e, l, n)
	}

	// Fetch: a consumer reads every record the writer uploaded.
	rcl := r.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < n {
		fs := rcl.PollFetches(testCtx(t))
		if err := fs.Err0(); err != nil {
			t.Fatalf("fetch from the replica after %d records: %v", len(got), err)
		}
		fs.EachRecord(func(rec *kgo.Record) { got = append(got, fmt.Sprintf("%d:%s", rec.Offset, rec.Value)) })
	}
	for i, g := range got {
		if want := fmt.Sprintf("%d:v%02d", i, i); g != want {
			t.Fatalf("record %d from the replica is %s, want %s", i, g, want)
		}
	}

	// Produce: refused with the read-replica error. Raw, so that nothing
	// else (an idempotent producer's InitProducerID) is what is refused.
	batch, err := broker.BatchOf([]record.Record{{Value: []byte("x")}}, record.CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	preq := kmsg.NewPtrProduceRequest()
	preq.Acks, preq.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = batch
	pt.Partitions = append(pt.Partitions, pp)
	preq.Topics = append(preq.Topics, pt)
	p := c.ask(preq, 9).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if p.ErrorCode != kerr.PolicyViolation.Code || p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "read-only replica") {
		msg := "<none>"
		if p.ErrorMessage != nil {
			msg = *p.ErrorMessage
		}
		t.Fatalf("produce to the replica: error %d (%s), want POLICY_VIOLATION saying it is a read-only replica", p.ErrorCode, msg)
	}
	if l := list(-1); l.Offset != n {
		t.Fatalf("latest after the refused produce %d, want %d", l.Offset, n)
	}
}
