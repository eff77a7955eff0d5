package kafka

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/internal/testutil"
)

// ask sends req at version on c and decodes the answer.
func (c *rawConn) ask(req kmsg.Request, version int16) kmsg.Response {
	c.t.Helper()
	c.send(frameOf(req, version, 42))
	corr, body := c.recv()
	if corr != 42 {
		c.t.Fatalf("correlation %d, want 42", corr)
	}
	resp := req.ResponseKind()
	resp.SetVersion(version)
	if resp.IsFlexible() && req.Key() != apiVersionsKey {
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		body = r.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("%s v%d answer: %v", kmsg.NameForKey(req.Key()), version, err)
	}
	return resp
}

// epochOf is the partition's leader epoch in tb's metadata.
func (tb *testBroker) epochOf(topic string, p int32) int32 {
	return tb.Cluster([]string{topic}).Topics[0].Partitions[p].LeaderEpoch
}

// bumpEpoch moves topic/0 to its next leader epoch (the broker keeps the
// lead), waits until the leader's log has begun it, and writes value in
// it. Metadata shows the new epoch before the partition takes it up, and
// a write in between is still stamped with the old one.
func (tb *testBroker) bumpEpoch(t *testing.T, cl *kgo.Client, topic, value string) int32 {
	t.Helper()
	ctx := testCtx(t)
	v := tb.Cluster([]string{topic})
	cur := v.Topics[0].Partitions[0].LeaderEpoch
	if _, err := tb.NewLeaderEpoch(ctx, broker.ISRRequest{Topic: topic, TopicID: v.Topics[0].ID, Partition: 0, LeaderID: tb.ID(), LeaderEpoch: cur}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "a new leader epoch in metadata and in the log", func() error {
		if e := tb.epochOf(topic, 0); e == cur {
			return fmt.Errorf("leader epoch in metadata still %d", cur)
		}
		if e := tb.EpochAt(topic, 0, math.MaxInt64); e != cur+1 {
			return fmt.Errorf("leader's log in epoch %d, want %d", e, cur+1)
		}
		return nil
	})
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return cur + 1
}

// TestLeaderEpochs: a log written in three leader epochs. Fetch,
// ListOffsets and OffsetForLeaderEpoch refuse an older current leader
// epoch (FENCED_LEADER_EPOCH) and a newer one (UNKNOWN_LEADER_EPOCH) and
// take -1 unchecked; OffsetForLeaderEpoch answers where each epoch ended;
// a fetch whose last fetched epoch ended before its offset is told the
// diverging epoch and gets no records.
func TestLeaderEpochs(t *testing.T) {
	tb := startBroker(t)
	const topic = "epochs"
	tb.createTopic(t, topic, 1)
	cl := tb.client(t)
	ctx := testCtx(t)
	e0 := tb.epochOf(topic, 0)
	for _, v := range []string{"a", "b", "c"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	e1 := tb.bumpEpoch(t, cl, topic, "d") // offset 3
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("e")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e2 := tb.bumpEpoch(t, cl, topic, "f") // offset 5
	// Epochs: e0 [0,3), e1 [3,5), e2 [5,6).

	c := dialRaw(t, tb.addr)
	fetch := func(current, lastFetched int32, offset int64) kmsg.FetchResponseTopicPartition {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes = 1 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.FetchOffset = 1<<20, current, lastFetched, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.ask(req, 12).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	}
	listOffsetsAt := func(current int32, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.Timestamp = current, ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.ask(req, 7).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	listOffsets := func(current int32) kmsg.ListOffsetsResponseTopicPartition { return listOffsetsAt(current, -1) }
	epochEnd := func(current, epoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = current, epoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.ask(req, 4).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	}

	for _, tc := range []struct {
		current int32
		code    int16
	}{
		{e1, kerr.FencedLeaderEpoch.Code},
		{e2 + 1, kerr.UnknownLeaderEpoch.Code},
		{-1, 0},
		{e2, 0},
	} {
		if p := fetch(tc.current, -1, 0); p.ErrorCode != tc.code || (tc.code == 0) != (len(p.RecordBatches) > 0) {
			t.Errorf("fetch with current leader epoch %d (now %d): error %d, %d bytes; want error %d", tc.current, e2, p.ErrorCode, len(p.RecordBatches), tc.code)
		}
		if p := listOffsets(tc.current); p.ErrorCode != tc.code || (tc.code == 0 && p.Offset != 6) {
			t.Errorf("list offsets with current leader epoch %d (now %d): error %d, offset %d; want error %d", tc.current, e2, p.ErrorCode, p.Offset, tc.code)
		}
		if p := epochEnd(tc.current, e1); p.ErrorCode != tc.code {
			t.Errorf("offset for leader epoch with current leader epoch %d (now %d): error %d; want %d", tc.current, e2, p.ErrorCode, tc.code)
		}
	}

	for _, tc := range []struct {
		epoch, wantEpoch int32
		wantEnd          int64
	}{
		{e0, e0, 3},
		{e1, e1, 5},
		{e2, e2, 6},      // the latest ends at the log end
		{e2 + 7, -1, -1}, // newer than all: unknown
		{-1, -1, -1},
	} {
		p := epochEnd(-1, tc.epoch)
		if p.ErrorCode != 0 || p.LeaderEpoch != tc.wantEpoch || p.EndOffset != tc.wantEnd {
			t.Errorf("offset for leader epoch %d: error %d, epoch %d, end %d; want epoch %d, end %d", tc.epoch, p.ErrorCode, p.LeaderEpoch, p.EndOffset, tc.wantEpoch, tc.wantEnd)
		}
	}

	// The leader epoch of each answer's offset (v4+).
	for _, tc := range []struct {
		ts    int64
		epoch int32
	}{{-2, e0}, {-1, e2}, {-3, -1}} {
		p := listOffsetsAt(-1, tc.ts)
		if tc.epoch < 0 { // the epoch that wrote the offset found
			switch {
			case p.Offset < 3:
				tc.epoch = e0
			case p.Offset < 5:
				tc.epoch = e1
			default:
				tc.epoch = e2
			}
		}
		if p.ErrorCode != 0 || p.LeaderEpoch != tc.epoch {
			t.Errorf("list offsets for %d: error %d, offset %d, leader epoch %d; want epoch %d", tc.ts, p.ErrorCode, p.Offset, p.LeaderEpoch, tc.epoch)
		}
	}

	// A fetcher at offset 5 whose last batch was of epoch e0 diverged: e0
	// ended at 3 in the leader's log.
	if p := fetch(-1, e0, 5); p.ErrorCode != 0 || p.DivergingEpoch.Epoch != e0 || p.DivergingEpoch.EndOffset != 3 || len(p.RecordBatches) != 0 || p.HighWatermark != 6 {
		t.Errorf("diverged fetch: error %d, diverging %+v, %d bytes, hw %d; want epoch %d end 3, no records, hw 6", p.ErrorCode, p.DivergingEpoch, len(p.RecordBatches), p.HighWatermark, e0)
	}
	// At offset 3 after e0, and at 5 after e1, the logs agree.
	for _, at := range []struct {
		epoch  int32
		offset int64
	}{{e0, 3}, {e1, 5}} {
		if p := fetch(-1, at.epoch, at.offset); p.ErrorCode != 0 || p.DivergingEpoch.Epoch != -1 || len(p.RecordBatches) == 0 {
			t.Errorf("fetch at %d after epoch %d: error %d, diverging %+v, %d bytes; want records", at.offset, at.epoch, p.ErrorCode, p.DivergingEpoch, len(p.RecordBatches))
		}
	}
	// A last fetched epoch the leader never had: OFFSET_OUT_OF_RANGE, as Kafka.
	if p := fetch(-1, e2+3, 6); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch after unknown epoch %d: error %d, want OFFSET_OUT_OF_RANGE", e2+3, p.ErrorCode)
	}
}
