package kafka

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/internal/testutil"
)

// TestClientProduceConsume: kgo produces idempotently (acks all, through
// InitProducerId), and not (acks all, leader and none), and reads every
// record back unchanged, once, at the offsets the produces answered; a raw
// Fetch returns the very bytes the broker stores.
func TestClientProduceConsume(t *testing.T) {
	tb := startBroker(t)
	desc := tb.createTopic(t, "orders", 2)
	ctx := testCtx(t)

	type sent struct {
		r         *kgo.Record
		partition int32
		offset    int64
		answered  bool // acks=0 answers no offsets
	}
	var all []sent
	for round, acks := range []kgo.Acks{kgo.AllISRAcks(), kgo.AllISRAcks(), kgo.LeaderAck(), kgo.NoAck()} {
		answered := round < 3
		opts := []kgo.Opt{kgo.RequiredAcks(acks), kgo.ProducerLinger(0)}
		if round > 0 {
			opts = append(opts, kgo.DisableIdempotentWrite()) // kgo needs it off for acks other than all
		}
		cl := tb.client(t, opts...)
		for i := range 20 {
			r := &kgo.Record{
				Topic:     "orders",
				Key:       fmt.Appendf(nil, "k%d", i),
				Value:     fmt.Appendf(nil, "value %d round %d", i, round),
				Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i), 0, 0xff}}},
				Timestamp: time.UnixMilli(time.Now().UnixMilli() - 1000 + int64(i)),
			}
			if i%5 == 0 {
				r.Key = nil
			}
			res := cl.ProduceSync(ctx, r)
			if err := res.FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			all = append(all, sent{r, r.Partition, r.Offset, answered})
		}
		cl.Flush(ctx)
	}

	// acks=0 answers nothing: wait until the broker has them all.
	testutil.Eventually(t, 20*time.Second, "the broker to hold every acks=0 record", func() error {
		var n int64
		for p := range int32(2) {
			ans, err := tb.ListOffsets(ctx, "orders", p, broker.OffsetQuery{Latest: true})
			if err != nil {
				t.Fatal(err)
			}
			n += ans.HighWatermark
		}
		if n != int64(len(all)) {
			return fmt.Errorf("high watermarks sum to %d, want %d", n, len(all))
		}
		return nil
	})

	cons := tb.client(t, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	type at struct {
		p int32
		o int64
	}
	got := map[string]*kgo.Record{}
	gotAt := map[at]*kgo.Record{}
	for len(gotAt) < len(all) {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", len(gotAt), len(all), err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if _, dup := got[string(r.Value)]; dup {
				t.Errorf("record %q consumed twice", r.Value)
			}
			got[string(r.Value)] = r
			gotAt[at{r.Partition, r.Offset}] = r
		})
	}
	for _, s := range all {
		r, ok := got[string(s.r.Value)]
		if !ok {
			t.Fatalf("record %q not consumed", s.r.Value)
		}
		if !bytes.Equal(r.Key, s.r.Key) || (r.Key == nil) != (s.r.Key == nil) || len(r.Headers) != 1 ||
			r.Headers[0].Key != "h" || !bytes.Equal(r.Headers[0].Value, s.r.Headers[0].Value) ||
			r.Timestamp.UnixMilli() != s.r.Timestamp.UnixMilli() {
			t.Errorf("record %q came back as key %q headers %v time %v", s.r.Value, r.Key, r.Headers, r.Timestamp)
		}
		if idem := r.ProducerID >= 0; idem != (strings.HasSuffix(string(r.Value), "round 0")) {
			t.Errorf("record %q: producer id %d, want one only from the idempotent round", r.Value, r.ProducerID)
		}
		if s.answered && gotAt[at{s.partition, s.offset}] != r {
			t.Errorf("record %q produced at %d/%d, consumed at %d/%d", s.r.Value, s.partition, s.offset, r.Partition, r.Offset)
		}
	}

	// A transactional producer is refused at once, saying why.
	txn := kmsg.NewPtrInitProducerIDRequest()
	txn.TransactionalID = kmsg.StringPtr("txn")
	raw := dialRaw(t, tb.addr) // kgo would first look for a transaction coordinator
	raw.send(frameOf(txn, 5, 9))
	_, body := raw.recv() // a flexible response header: one byte of tagged fields first
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.Version = 5
	if err := resp.ReadFrom(body[1:]); err != nil || resp.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code || resp.ProducerID != -1 {
		t.Errorf("transactional InitProducerId: %+v, %v", resp, err)
	}

	// A raw Fetch answers the stored batches byte for byte.
	for p := range int32(2) {
		stored, err := tb.Fetch(ctx, broker.FetchRequest{Topic: "orders", Partition: p, Offset: 0, MaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrFetchRequest() // kgo sends it at the newest version both serve: by topic id
		req.MaxBytes, req.MaxWaitMillis = 1<<20, 0
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = "orders", topicID(desc.ID)
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = p, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cons)
		if err != nil {
			t.Fatal(err)
		}
		fp := resp.Topics[0].Partitions[0]
		if fp.ErrorCode != 0 || !bytes.Equal(fp.RecordBatches, stored.Batches) || fp.HighWatermark != stored.HighWatermark {
			t.Errorf("partition %d: Kafka fetch (error %d, %d bytes, hw %d) differs from the stored batches (%d bytes, hw %d)",
				p, fp.ErrorCode, len(fp.RecordBatches), fp.HighWatermark, len(stored.Batches), stored.HighWatermark)
		}
	}
}

// TestListOffsetsAndMetadata: earliest, latest and by time through kadm,
// and metadata's leaders, epochs and stable non-zero topic id.
func TestListOffsetsAndMetadata(t *testing.T) {
	tb := startBroker(t)
	desc := tb.createTopic(t, "events", 1)
	ctx := testCtx(t)
	cl := tb.client(t, kgo.ProducerLinger(0))
	adm := kadm.NewClient(cl)
	base := time.Now().Add(-time.Minute).UnixMilli()
	for i := range 10 {
		r := &kgo.Record{Topic: "events", Value: []byte{byte(i)}, Timestamp: time.UnixMilli(base + int64(i)*10)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	start, err := adm.ListStartOffsets(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	end, err := adm.ListEndOffsets(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	at, err := adm.ListOffsetsAfterMilli(ctx, base+35, "events")
	if err != nil {
		t.Fatal(err)
	}
	after, err := adm.ListOffsetsAfterMilli(ctx, base+time.Hour.Milliseconds(), "events")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		got  kadm.ListedOffsets
		want int64
	}{"earliest": {start, 0}, "latest": {end, 10}, "by time": {at, 4}} {
		o, ok := c.got.Lookup("events", 0)
		if !ok || o.Err != nil || o.Offset != c.want {
			t.Errorf("%s: %+v, want offset %d", name, o, c.want)
		}
	}
	// kadm reads Kafka's "no record at or after that time" (-1) as the end.
	if o, _ := after.Lookup("events", 0); o.Err != nil || o.Offset != 10 {
		t.Errorf("after every record: %+v, want 10", o)
	}

	md, err := adm.Metadata(ctx, "events", "missing")
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].NodeID != tb.ID() || fmt.Sprintf("%s:%d", md.Brokers[0].Host, md.Brokers[0].Port) != tb.addr {
		t.Errorf("brokers = %+v, want broker %d at %s", md.Brokers, tb.ID(), tb.addr)
	}
	td := md.Topics["events"]
	if td.Err != nil || td.ID != kadm.TopicID(topicID(desc.ID)) || td.ID == (kadm.TopicID{}) || len(td.Partitions) != 1 {
		t.Fatalf("events = %+v (err %v), want id %x", td, td.Err, topicID(desc.ID))
	}
	view := tb.Cluster([]string{"events"}).Topics[0].Partitions[0]
	if p := td.Partitions[0]; p.Leader != view.Leader || p.LeaderEpoch != view.LeaderEpoch || len(p.Replicas) != 1 || len(p.ISR) != 1 {
		t.Errorf("partition = %+v, want leader %d epoch %d", p, view.Leader, view.LeaderEpoch)
	}
	if m := md.Topics["missing"]; m.Err != kerr.UnknownTopicOrPartition {
		t.Errorf("missing topic: %v, want UNKNOWN_TOPIC_OR_PARTITION", m.Err)
	}
}
