package kafka

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
)

// TestCreatePartitions: kadm adds partitions; validate-only and refusals
// change nothing and carry Kafka's codes; existing partitions keep their
// records; a producer that was running before the increase sees the new
// count at its next metadata refresh and its keys spread over the new
// partitions, which read back.
func TestCreatePartitions(t *testing.T) {
	tb := startBroker(t)
	adm := adminOf(t, tb)
	ctx := testCtx(t)
	tb.createTopic(t, "grow", 2)

	cl := tb.client(t, kgo.ProducerLinger(0), kgo.MetadataMaxAge(200*time.Millisecond), kgo.MetadataMinAge(50*time.Millisecond))
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "grow", Key: fmt.Appendf(nil, "before-%d", i), Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	hw := func(p int32) int64 {
		ans, err := tb.ListOffsets(ctx, "grow", p, broker.OffsetQuery{Latest: true})
		if err != nil {
			t.Fatal(err)
		}
		return ans.HighWatermark
	}
	before := []int64{hw(0), hw(1)}
	partitions := func() int {
		d, err := tb.DescribeTopic("grow")
		if err != nil {
			t.Fatal(err)
		}
		return len(d.Partitions)
	}

	vres, err := adm.ValidateCreatePartitions(ctx, 3, "grow")
	if err != nil || vres["grow"].Err != nil {
		t.Fatalf("validate: %v %+v", err, vres["grow"])
	}
	if n := partitions(); n != 2 {
		t.Fatalf("validate-only changed the count to %d", n)
	}
	res, err := adm.UpdatePartitions(ctx, 2, "grow")
	if err != nil {
		t.Fatal(err)
	}
	if r := res["grow"]; !errors.Is(r.Err, kerr.InvalidPartitions) || !strings.Contains(r.ErrMessage, "must be more") {
		t.Fatalf("same count: %v %q", r.Err, r.ErrMessage)
	}
	res, _ = adm.UpdatePartitions(ctx, 3, "nosuch")
	if !errors.Is(res["nosuch"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("add partitions to an unknown topic: %v", res["nosuch"].Err)
	}

	res, err = adm.CreatePartitions(ctx, 3, "grow")
	if err != nil || res["grow"].Err != nil {
		t.Fatalf("add 3: %v %+v", err, res["grow"])
	}
	if n := partitions(); n != 5 {
		t.Fatalf("%d partitions after adding 3 to 2", n)
	}
	if got := []int64{hw(0), hw(1)}; got[0] != before[0] || got[1] != before[1] {
		t.Fatalf("existing partitions' high watermarks moved: %v -> %v", before, got)
	}
	md, err := adm.Metadata(ctx, "grow")
	if err != nil || len(md.Topics["grow"].Partitions) != 5 {
		t.Fatalf("metadata after the increase: %v %+v", err, md.Topics["grow"])
	}

	// The producer from before: its partitioner maps keys over 5 once it
	// has refreshed, so some keys land in a new partition.
	landed := map[int32]int{}
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; landed[2]+landed[3]+landed[4] == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("no record reached a new partition within 20s: %v", landed)
		}
		r := &kgo.Record{Topic: "grow", Key: fmt.Appendf(nil, "after-%d", i), Value: fmt.Appendf(nil, "after %d", i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		landed[r.Partition]++
	}
	var target int32 = 2
	for p := int32(2); p < 5; p++ {
		if landed[p] > 0 {
			target = p
		}
	}
	cons := tb.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"grow": {target: kgo.NewOffset().AtStart()}}))
	got := 0
	for got < landed[target] {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Partition != target || !strings.HasPrefix(string(r.Value), "after ") {
				t.Fatalf("read %s/%d: %q", r.Topic, r.Partition, r.Value)
			}
			got++
		})
	}

	// Assignments: honoured when right, INVALID_REPLICA_ASSIGNMENT when
	// not; a name twice is INVALID_REQUEST.
	raw := func(validate bool, topics ...kmsg.CreatePartitionsRequestTopic) []kmsg.CreatePartitionsResponseTopic {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.Topics, req.ValidateOnly, req.TimeoutMillis = topics, validate, 10000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics
	}
	topic := func(count int32, assignment ...[]int32) kmsg.CreatePartitionsRequestTopic {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "grow", count
		for _, replicas := range assignment {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = replicas
			rt.Assignment = append(rt.Assignment, a)
		}
		return rt
	}
	for _, c := range []struct {
		rt   kmsg.CreatePartitionsRequestTopic
		want *kerr.Error
	}{
		{topic(7, []int32{1}), kerr.InvalidReplicaAssignment},    // one list for two partitions
		{topic(6, []int32{9}), kerr.InvalidReplicaAssignment},    // no broker 9
		{topic(6, []int32{1, 1}), kerr.InvalidReplicaAssignment}, // not the topic's replication factor
		{topic(10001), kerr.InvalidPartitions},                   // above the bound
		{topic(4), kerr.InvalidPartitions},                       // a decrease
		{topic(6, []int32{1}), nil},                              // validate only
	} {
		for _, validate := range []bool{true, false} {
			if c.want == nil && !validate {
				continue
			}
			out := raw(validate, c.rt)
			if len(out) != 1 || kerr.ErrorForCode(out[0].ErrorCode) != c.want && !(c.want == nil && out[0].ErrorCode == 0) {
				t.Fatalf("count %d, assignment %v, validate %v: %+v, want %v", c.rt.Count, c.rt.Assignment, validate, out, c.want)
			}
		}
	}
	if n := partitions(); n != 5 {
		t.Fatalf("refusals changed the count to %d", n)
	}
	out := raw(false, topic(6), topic(7))
	if len(out) != 2 || out[0].ErrorCode != kerr.InvalidRequest.Code || out[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("a topic named twice: %+v", out)
	}
	if out := raw(false, topic(6, []int32{1})); out[0].ErrorCode != 0 || out[0].ErrorMessage != nil {
		t.Fatalf("add with an assignment: %+v", out)
	}
	if n := partitions(); n != 6 {
		t.Fatalf("%d partitions after adding one with an assignment", n)
	}
}
