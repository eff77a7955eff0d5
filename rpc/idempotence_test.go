package rpc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// send produces b to partition 0 of topic.
func (tb *testBroker) send(t testing.TB, topic string, b record.Batch, acks stratav1.Acks) (*stratav1.ProduceResponse, error) {
	t.Helper()
	return tb.produce.Produce(testCtx(t), &stratav1.ProduceRequest{Topic: topic, Batch: b, Acks: acks})
}

// values reads a partition's record values from the start.
func (tb *testBroker) values(t testing.TB, topic string) []string {
	t.Helper()
	_, recs := tb.readAll(t, topic, 0, 0)
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

func mustValues(t testing.TB, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("log holds %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("log holds %q, want %q", got, want)
		}
	}
}

func initProducer(t testing.TB, tb *testBroker) int64 {
	t.Helper()
	resp, err := tb.produce.InitProducer(testCtx(t), &stratav1.InitProducerRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProducerEpoch != 0 {
		t.Fatalf("producer epoch %d", resp.ProducerEpoch)
	}
	return resp.ProducerId
}

// TestIdempotentProduce: a batch sent again (a retry after a lost answer)
// gets the first answer's offsets, flagged duplicate, and is stored once,
// under every acks mode and after a restart of the broker (which rebuilds
// the producers' state from the log); a gap in the sequence is refused and
// changes nothing.
func TestIdempotentProduce(t *testing.T) {
	cfg := brokerConfig(t, 1, t.TempDir())
	tb := startBroker(t, cfg)
	tb.createTopic(t, "idem", 1, nil)

	pid := initProducer(t, tb)
	if pid < 1000 {
		t.Fatalf("producer id %d", pid)
	}
	if next := initProducer(t, tb); next <= pid {
		t.Fatalf("second producer id %d after %d", next, pid)
	}

	first := testutil.IdemBatch(t, pid, 0, 0, baseTime, "a", "b")
	res, err := tb.send(t, "idem", first, stratav1.Acks_ACKS_ALL)
	if err != nil || res.BaseOffset != 0 || res.LastOffset != 1 || res.Duplicate {
		t.Fatalf("first send: %v %v", res, err)
	}
	for _, acks := range []stratav1.Acks{stratav1.Acks_ACKS_ALL, stratav1.Acks_ACKS_LEADER, stratav1.Acks_ACKS_NONE} {
		again, err := tb.send(t, "idem", first, acks)
		if err != nil || again.BaseOffset != 0 || again.LastOffset != 1 || !again.Duplicate {
			t.Fatalf("resend with %v: %v %v", acks, again, err)
		}
	}
	// Other producers, with and without idempotence, in between.
	if _, err := tb.send(t, "idem", batchOf(t, "plain"), stratav1.Acks_ACKS_ALL); err != nil {
		t.Fatal(err)
	}
	// A producer the partition does not know starts at sequence 0; at any
	// other sequence it is refused, and nothing is written.
	_, err = tb.send(t, "idem", testutil.IdemBatch(t, pid+1, 0, 7, baseTime, "other"), stratav1.Acks_ACKS_ALL)
	if code, info, _ := errorInfo(err); code != codes.FailedPrecondition || info == nil || info.Reason != "UNKNOWN_PRODUCER_ID" ||
		info.Metadata["retriable"] != "false" || info.Metadata["producer_id"] != strconv.FormatInt(pid+1, 10) || info.Metadata["sequence"] != "7" {
		t.Fatalf("unknown producer at sequence 7: %v", err)
	}
	if _, err := tb.send(t, "idem", testutil.IdemBatch(t, pid+1, 0, 0, baseTime, "other"), stratav1.Acks_ACKS_ALL); err != nil {
		t.Fatal(err)
	}
	second := testutil.IdemBatch(t, pid, 0, 2, baseTime, "c")
	if res, err := tb.send(t, "idem", second, stratav1.Acks_ACKS_ALL); err != nil || res.BaseOffset != 4 || res.Duplicate {
		t.Fatalf("next batch: %v %v", res, err)
	}

	// A gap: batch 3 is missing.
	_, err = tb.send(t, "idem", testutil.IdemBatch(t, pid, 0, 4, baseTime, "e"), stratav1.Acks_ACKS_ALL)
	code, info, _ := errorInfo(err)
	if code != codes.FailedPrecondition || info == nil || info.Reason != "OUT_OF_ORDER_SEQUENCE" ||
		info.Metadata["retriable"] != "true" || info.Metadata["expected_sequence"] != "3" || info.Metadata["sequence"] != "4" {
		t.Fatalf("gap: %v", err)
	}
	want := []string{"a", "b", "plain", "other", "c"}
	mustValues(t, tb.values(t, "idem"), want...)

	// The broker restarts: the state comes back from the log.
	tb.stop(t)
	tb = startBroker(t, cfg)
	for _, b := range []record.Batch{first, second} {
		res, err := tb.send(t, "idem", b, stratav1.Acks_ACKS_ALL)
		if err != nil || !res.Duplicate || res.BaseOffset != map[int32]int64{0: 0, 2: 4}[b.BaseSequence()] {
			t.Fatalf("resend of sequence %d after a restart: %v %v", b.BaseSequence(), res, err)
		}
	}
	if _, err := tb.send(t, "idem", testutil.IdemBatch(t, pid, 0, 4, baseTime, "e"), stratav1.Acks_ACKS_ALL); reasonOf(err) != "OUT_OF_ORDER_SEQUENCE" {
		t.Fatalf("gap after a restart: %v", err)
	}
	res, err = tb.send(t, "idem", testutil.IdemBatch(t, pid, 0, 3, baseTime, "d"), stratav1.Acks_ACKS_ALL)
	if err != nil || res.BaseOffset != 5 || res.Duplicate {
		t.Fatalf("next batch after a restart: %v %v", res, err)
	}
	if next := initProducer(t, tb); next <= pid+1 {
		t.Fatalf("producer id %d after a restart; %d was handed out before", next, pid+1)
	}
	mustValues(t, tb.values(t, "idem"), append(want, "d")...)
}

// partitionDir is where a broker keeps a partition's log.
func partitionDir(cfg config.Broker, topic *stratav1.TopicDescription, p int) string {
	return filepath.Join(cfg.DataDir, "logs", topic.Name+"-"+topic.Id, strconv.Itoa(p))
}

// partitionFiles counts the segment and producer snapshot files of a
// partition's log dir.
func partitionFiles(t *testing.T, cfg config.Broker, topic *stratav1.TopicDescription, p int) (segments, snapshots int) {
	t.Helper()
	entries, err := os.ReadDir(partitionDir(cfg, topic, p))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".log":
			segments++
		case ".producers":
			snapshots++
		}
	}
	return segments, snapshots
}

// TestIdempotentRetryAfterRetentionAndRestart: a producer's batches, many
// segments back and then deleted from the broker's disk by retention, are
// still recognised when retried after the broker restarts: every sealed
// segment got a producer snapshot, and the restarted leader rebuilds the
// state from the newest.
func TestIdempotentRetryAfterRetentionAndRestart(t *testing.T) {
	cfg := brokerConfig(t, 1, t.TempDir())
	tb := startBroker(t, cfg)
	topic := tb.createTopic(t, "far", 1, map[string]string{"segment.bytes": "16KiB"})
	pid := initProducer(t, tb)
	var early []record.Batch
	var answers []*stratav1.ProduceResponse
	for i := range 5 {
		b := testutil.IdemBatch(t, pid, 0, int32(i), baseTime, fmt.Sprintf("early-%d", i))
		res, err := tb.send(t, "far", b, stratav1.Acks_ACKS_ALL)
		if err != nil {
			t.Fatal(err)
		}
		early, answers = append(early, b), append(answers, res)
	}
	other := initProducer(t, tb)
	for i := range 300 {
		if _, err := tb.send(t, "far", testutil.IdemBatch(t, other, 0, int32(i), baseTime, strings.Repeat("x", 600)), stratav1.Acks_ACKS_LEADER); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 20*time.Second, "a producer snapshot for every sealed segment", func() bool {
		segs, snaps := partitionFiles(t, cfg, topic, 0)
		return segs >= 10 && snaps == segs-1
	})
	// Total retention (there is no cold tier) now deletes the oldest
	// segments, those of the early batches among them.
	if _, err := tb.admin.AlterTopicConfig(testCtx(t), &stratav1.AlterTopicConfigRequest{Name: "far", Set: map[string]string{"retention.bytes": "48KiB"}}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "retention to delete the early batches", func() bool {
		res, err := tb.fetch.ListOffsets(testCtx(t), &stratav1.ListOffsetsRequest{Topic: "far", Query: &stratav1.ListOffsetsRequest_Spec{Spec: stratav1.OffsetSpec_OFFSET_SPEC_EARLIEST}})
		return err == nil && res.Offset > answers[len(answers)-1].LastOffset
	})

	tb.stop(t)
	tb = startBroker(t, cfg)
	for i, b := range early {
		res, err := tb.send(t, "far", b, stratav1.Acks_ACKS_ALL)
		if err != nil || !res.Duplicate || res.BaseOffset != answers[i].BaseOffset {
			t.Fatalf("retry of early batch %d after retention and a restart: %v %v, want the duplicate at %d", i, res, err, answers[i].BaseOffset)
		}
	}
	if res, err := tb.send(t, "far", testutil.IdemBatch(t, pid, 0, 5, baseTime, "next"), stratav1.Acks_ACKS_ALL); err != nil || res.Duplicate {
		t.Fatalf("the producer's next batch: %v %v", res, err)
	}
}

// TestIdempotentConcurrentCopies: copies of one batch sent at once are
// written once; every sender gets the same offsets.
func TestIdempotentConcurrentCopies(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	tb.createTopic(t, "race", 1, nil)
	pid := initProducer(t, tb)
	b := testutil.IdemBatch(t, pid, 0, 0, baseTime, "x", "y", "z")
	const copies = 8
	var wg sync.WaitGroup
	answers := make([]*stratav1.ProduceResponse, copies)
	errs := make([]error, copies)
	for i := range copies {
		wg.Go(func() { answers[i], errs[i] = tb.send(t, "race", b, stratav1.Acks_ACKS_ALL) })
	}
	wg.Wait()
	dups := 0
	for i, res := range answers {
		if errs[i] != nil || res.BaseOffset != 0 || res.LastOffset != 2 {
			t.Fatalf("copy %d: %v %v", i, res, errs[i])
		}
		if res.Duplicate {
			dups++
		}
	}
	if dups != copies-1 {
		t.Fatalf("%d of %d copies were duplicates, want all but one", dups, copies)
	}
	mustValues(t, tb.values(t, "race"), "x", "y", "z")
}

// TestIdempotentLogAppendTime: a duplicate carries the original's append
// time.
func TestIdempotentLogAppendTime(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	tb.createTopic(t, "lat", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	b := testutil.IdemBatch(t, initProducer(t, tb), 0, 0, baseTime, "x")
	res, err := tb.send(t, "lat", b, stratav1.Acks_ACKS_ALL)
	if err != nil || res.LogAppendTimeMs <= 0 {
		t.Fatalf("first send: %v %v", res, err)
	}
	again, err := tb.send(t, "lat", b, stratav1.Acks_ACKS_ALL)
	if err != nil || !again.Duplicate || again.LogAppendTimeMs != res.LogAppendTimeMs {
		t.Fatalf("resend: %v %v, first answer %v", again, err, res)
	}
}

// TestInitProducerNeedsTheController: only the controller hands out
// producer ids; a broker that is not the controller passes the call on to
// it, from its own method (any front end) as from its API.
func TestInitProducerNeedsTheController(t *testing.T) {
	dir := t.TempDir()
	b1 := startBroker(t, brokerConfig(t, 1, filepath.Join(dir, "b1")))
	b2 := joinSecondBroker(t, b1, brokerConfig(t, 2, filepath.Join(dir, "b2")))
	first := initProducer(t, b1)

	second, _, err := b2.InitProducer(testCtx(t))
	if err != nil || second <= first {
		t.Fatalf("InitProducer on broker 2: %d, %v; want an id after %d", second, err, first)
	}
	// Marked as passed on already, the call is not passed on again: the
	// refusal names the controller.
	_, _, err = b2.InitProducer(broker.Forwarded(testCtx(t)))
	var be *broker.Error
	if !errors.As(err, &be) || be.Reason != broker.ReasonUnavailable || !be.Retriable() || be.Meta["controller_address"] != b1.addr {
		t.Fatalf("a forwarded InitProducer on broker 2: %v; want UNAVAILABLE naming the controller", err)
	}
	if id := initProducer(t, b2); id <= second {
		t.Fatalf("producer id %d through broker 2's API, after %d", id, second)
	}
}

// TestIdempotentRetryAfterFailover: a producer's batches, many segments
// back and deleted by retention from every replica's disk, are recognised
// when retried at the follower that takes over from a stopped leader: the
// follower wrote producer snapshots for its own sealed segments and
// rebuilds the state from them, and every replica's snapshots hold the
// same state.
func TestIdempotentRetryAfterFailover(t *testing.T) {
	bs := threeBrokers(t)
	ctx := testCtx(t)
	createEverywhere(t, bs, "fo", 1, map[string]string{"replication.factor": "3", "min.insync.replicas": "2", "segment.bytes": "16KiB"})
	waitForISR(t, bs[0], "fo", 0, 3)
	d, err := bs[0].admin.DescribeTopic(ctx, &stratav1.DescribeTopicRequest{Name: "fo"})
	if err != nil {
		t.Fatal(err)
	}
	leader := byID(bs, d.Topic.Partitions[0].Metadata.Leader)
	pid := initProducer(t, leader)
	var early []record.Batch
	var answers []*stratav1.ProduceResponse
	for i := range 5 {
		b := testutil.IdemBatch(t, pid, 0, int32(i), baseTime, fmt.Sprintf("early-%d", i))
		res, err := leader.send(t, "fo", b, stratav1.Acks_ACKS_ALL)
		if err != nil {
			t.Fatal(err)
		}
		early, answers = append(early, b), append(answers, res)
	}
	other := initProducer(t, leader)
	for i := range 200 {
		if _, err := leader.send(t, "fo", testutil.IdemBatch(t, other, 0, int32(i), baseTime, strings.Repeat("x", 600)), stratav1.Acks_ACKS_ALL); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range bs {
		testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("broker %d's producer snapshots", b.ID()), func() bool {
			segs, snaps := partitionFiles(t, b.cfg, d.Topic, 0)
			return segs >= 6 && snaps == segs-1
		})
	}
	// A snapshot depends on the log alone: replicas that have one at the
	// same offset have the same bytes.
	same := 0
	entries, err := os.ReadDir(partitionDir(bs[0].cfg, d.Topic, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".producers" {
			continue
		}
		var first []byte
		for i, b := range bs {
			data, err := os.ReadFile(filepath.Join(partitionDir(b.cfg, d.Topic, 0), e.Name()))
			if err != nil {
				t.Fatalf("broker %d has no snapshot %s: %v", b.ID(), e.Name(), err)
			}
			if i == 0 {
				first = data
			} else if !bytes.Equal(data, first) {
				t.Fatalf("brokers %d and %d have different snapshots %s", bs[0].ID(), b.ID(), e.Name())
			}
		}
		same++
	}
	if same < 5 {
		t.Fatalf("only %d snapshots to compare", same)
	}
	if _, err := bs[0].admin.AlterTopicConfig(ctx, &stratav1.AlterTopicConfigRequest{Name: "fo", Set: map[string]string{"retention.bytes": "48KiB"}}); err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("retention on broker %d", b.ID()), func() bool {
			return partitionState(t, b, "fo", 0).LocalStartOffset > answers[len(answers)-1].LastOffset
		})
	}

	leader.stop(t)
	var next *testBroker
	testutil.WaitFor(t, 20*time.Second, "a new leader", func() bool {
		for _, b := range bs {
			if b != leader {
				if id := partitionState(t, b, "fo", 0).Metadata.Leader; id > 0 && id != leader.ID() {
					next = byID(bs, id)
					return true
				}
			}
		}
		return false
	})
	for i, b := range early {
		var res *stratav1.ProduceResponse
		testutil.WaitFor(t, 20*time.Second, "the new leader to answer", func() bool {
			res, err = next.send(t, "fo", b, stratav1.Acks_ACKS_ALL)
			return reasonOf(err) != "NOT_LEADER" && reasonOf(err) != "LEADER_NOT_AVAILABLE" && reasonOf(err) != "NOT_ENOUGH_REPLICAS"
		})
		if err != nil || !res.Duplicate || res.BaseOffset != answers[i].BaseOffset {
			t.Fatalf("retry of early batch %d at the new leader: %v %v, want the duplicate at %d", i, res, err, answers[i].BaseOffset)
		}
	}
}

// TestIdempotentBatchesArriveOutOfOrder: a producer's batches in flight
// together may reach the leader in any order, since calls on one
// connection are served concurrently. A batch whose producer's earlier
// batches have not arrived yet waits for them rather than being refused as
// out of order, which would send the producer back to retry (and, with
// many in flight, starve it). A gap that stays open is still refused.
func TestIdempotentBatchesArriveOutOfOrder(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	tb.createTopic(t, "inflight", 1, nil)
	waits := func() float64 { return scrapeOf(t, tb.Broker).sum("strata_produce_sequence_waits_total") }
	early := func(b record.Batch) <-chan error {
		before := waits()
		errc := make(chan error, 1)
		go func() {
			_, err := tb.send(t, "inflight", b, stratav1.Acks_ACKS_ALL)
			errc <- err
		}()
		testutil.WaitFor(t, 20*time.Second, "the early batch waiting for its turn", func() bool { return waits() > before })
		return errc
	}

	// A known producer: batch 2 comes before batch 1.
	pid := initProducer(t, tb)
	if _, err := tb.send(t, "inflight", testutil.IdemBatch(t, pid, 0, 0, baseTime, "a"), stratav1.Acks_ACKS_ALL); err != nil {
		t.Fatal(err)
	}
	third := early(testutil.IdemBatch(t, pid, 0, 2, baseTime, "c"))
	if res, err := tb.send(t, "inflight", testutil.IdemBatch(t, pid, 0, 1, baseTime, "b"), stratav1.Acks_ACKS_ALL); err != nil || res.BaseOffset != 1 {
		t.Fatalf("batch 1: %v %v", res, err)
	}
	if err := <-third; err != nil {
		t.Fatalf("batch 2, sent before batch 1: %v", err)
	}

	// A producer the partition does not know yet: batch 1 before batch 0.
	other := initProducer(t, tb)
	second := early(testutil.IdemBatch(t, other, 0, 1, baseTime, "y"))
	if _, err := tb.send(t, "inflight", testutil.IdemBatch(t, other, 0, 0, baseTime, "x"), stratav1.Acks_ACKS_ALL); err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatalf("batch 1 of a new producer, sent before its batch 0: %v", err)
	}
	mustValues(t, tb.values(t, "inflight"), "a", "b", "c", "x", "y")

	// A gap nobody fills is refused once the wait is over; nothing is written.
	if _, err := tb.send(t, "inflight", testutil.IdemBatch(t, pid, 0, 9, baseTime, "z"), stratav1.Acks_ACKS_ALL); reasonOf(err) != "OUT_OF_ORDER_SEQUENCE" {
		t.Fatalf("a gap that stays open: %v", err)
	}
	mustValues(t, tb.values(t, "inflight"), "a", "b", "c", "x", "y")
}
