package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// sent is a produce request as the tap saw it, with the broker's answer.
type sent struct {
	partition int32
	id        int64
	epoch     int16
	seq       int32
	first     string // the first record's value, which names the batch
	reason    string // of the refusal, if the broker refused it
	swallowed bool
}

// produceTap sits between a client and a real broker. It records every
// produce request and its answer, counts producer id requests, and can
// stand in for what a failover does to a producer: swallow answers a
// request as written without it reaching the broker (a batch a leader
// acknowledged under acks=leader and lost in a failover), after runs once
// the broker answered and may replace its answer with an error (the
// answer was lost).
type produceTap struct {
	swallow func(sent) bool
	after   func(sent) error
	// firstEpoch, when set, replaces the epoch of the first producer id
	// handed out.
	firstEpoch int16
	inits      atomic.Int32
	mu         sync.Mutex
	sent       []sent
}

func (tap *produceTap) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	switch method {
	case stratav1.ProduceService_InitProducer_FullMethodName:
		err := invoker(ctx, method, req, reply, cc, opts...)
		if tap.inits.Add(1) == 1 && err == nil && tap.firstEpoch != 0 {
			reply.(*stratav1.InitProducerResponse).ProducerEpoch = int32(tap.firstEpoch)
		}
		return err
	case stratav1.ProduceService_Produce_FullMethodName:
	default:
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	r := req.(*stratav1.ProduceRequest)
	b := record.Batch(r.Batch)
	recs, err := b.Records()
	if err != nil {
		return err
	}
	s := sent{partition: r.Partition, id: b.ProducerID(), epoch: b.ProducerEpoch(), seq: b.BaseSequence(), first: string(recs[0].Value)}
	if tap.swallow != nil && tap.swallow(s) {
		s.swallowed = true
		tap.record(s)
		resp := reply.(*stratav1.ProduceResponse)
		resp.BaseOffset, resp.LastOffset = 1<<40, 1<<40+int64(len(recs))-1
		return nil
	}
	err = invoker(ctx, method, req, reply, cc, opts...)
	if e, ok := client.AsError(err); ok {
		s.reason = e.Reason
	}
	tap.record(s)
	if err == nil && tap.after != nil {
		return tap.after(s)
	}
	return err
}

func (tap *produceTap) record(s sent) {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	tap.sent = append(tap.sent, s)
}

// sendsOf returns the requests that carried the batch whose first record
// is first, in order.
func (tap *produceTap) sendsOf(first string) []sent {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	var out []sent
	for _, s := range tap.sent {
		if s.first == first {
			out = append(out, s)
		}
	}
	return out
}

// batchRecords are the records of test batch i of a partition: one, so
// that each batch the test produces is one batch on the wire.
func batchRecords(topic string, partition int32, i int) []*client.Record {
	return []*client.Record{{Topic: topic, Partition: partition, Value: fmt.Appendf(nil, "p%d-b%d-0", partition, i)}}
}

// readBack reads a partition from its start to its end.
func readBack(t *testing.T, ctx context.Context, c *client.Client, topic string, partition int32) []*client.Record {
	t.Helper()
	k := c.NewConsumer(client.WithStopAtEnd(true))
	defer k.Close()
	if err := k.Assign(topic, partition, client.Earliest()); err != nil {
		t.Fatal(err)
	}
	var got []*client.Record
	for {
		batch, err := k.Poll(ctx)
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, batch...)
	}
}

// mustHold checks that a partition read back holds the records produced,
// each once, in order, at the offsets their producer was told.
func mustHold(t *testing.T, got, want []*client.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("the partition holds %d records, %d were produced and not lost: one was written twice, or lost", len(got), len(want))
	}
	for i, r := range got {
		if string(r.Value) != string(want[i].Value) || r.Offset != want[i].Offset {
			t.Fatalf("record %d: %q at %d; produced %q, told offset %d", i, r.Value, r.Offset, want[i].Value, want[i].Offset)
		}
	}
}

// patientProducer retries only after a minute and delivers for ten: a
// record that waits for a retry backoff, or for its delivery timeout, is
// not answered within the test's contexts.
func patientProducer(c *client.Client) *client.Producer {
	return c.NewProducer(client.WithLinger(0), client.WithRetryBackoff(time.Minute, time.Minute), client.WithDeliveryTimeout(10*time.Minute))
}

// TestProducerEpochBump: a leader lost a batch it had acknowledged (the
// tap swallows it) or never saw the producer's first batch; the next batch
// is refused (OUT_OF_ORDER_SEQUENCE or UNKNOWN_PRODUCER_ID) and the producer
// moves to its next epoch on its own (or, at the epoch's limit, to a new
// producer id): the refused batch is numbered again from 0 and written at
// once (no retry backoff), and every batch but the lost one is in the log
// once, in order.
func TestProducerEpochBump(t *testing.T) {
	tb := startBroker(t)
	for _, c := range []struct {
		name       string
		lose       int
		reason     string
		firstEpoch int16 // of the producer's first id
		newID      bool  // the producer moves to a new id, at epoch 0
	}{
		{"out of order sequence", 2, "OUT_OF_ORDER_SEQUENCE", 0, false},
		{"unknown producer", 0, "UNKNOWN_PRODUCER_ID", 0, false},
		{"at the epoch limit", 1, "OUT_OF_ORDER_SEQUENCE", math.MaxInt16, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			topic := fmt.Sprintf("bump-%d-%d", c.lose, c.firstEpoch)
			lost := fmt.Sprintf("p0-b%d-0", c.lose)
			var swallowed atomic.Bool
			tap := &produceTap{firstEpoch: c.firstEpoch, swallow: func(s sent) bool { return s.first == lost && swallowed.CompareAndSwap(false, true) }}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cl, err := client.New(ctx, []string{tb.cfg.Listen}, client.WithDialOptions(grpc.WithUnaryInterceptor(tap.intercept)))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if _, err := cl.CreateTopic(ctx, topic, 1, 1, nil); err != nil {
				t.Fatal(err)
			}
			p := patientProducer(cl)
			defer p.Close()
			var want []*client.Record
			for i := range 6 {
				recs := batchRecords(topic, 0, i)
				if err := p.ProduceSync(ctx, recs...); err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
				if i != c.lose {
					want = append(want, recs...)
				}
			}

			wantEpoch, wantInits := c.firstEpoch+1, int32(1)
			if c.newID {
				wantEpoch, wantInits = 0, 2
			}
			refused := tap.sendsOf(fmt.Sprintf("p0-b%d-0", c.lose+1))
			if len(refused) != 2 || refused[0].reason != c.reason || refused[0].epoch != c.firstEpoch ||
				refused[1].reason != "" || refused[1].epoch != wantEpoch || refused[1].seq != 0 || (refused[1].id != refused[0].id) != c.newID {
				t.Fatalf("the batch after the lost one was sent as %+v; want refused with %s at epoch %d, then written at epoch %d from sequence 0 (new id: %v)",
					refused, c.reason, c.firstEpoch, wantEpoch, c.newID)
			}
			for i := c.lose + 2; i < 6; i++ {
				s := tap.sendsOf(fmt.Sprintf("p0-b%d-0", i))
				if len(s) != 1 || s[0].id != refused[1].id || s[0].epoch != wantEpoch || s[0].seq != int32(i-c.lose-1) || s[0].reason != "" {
					t.Fatalf("batch %d was sent as %+v; want once, at epoch %d, sequence %d", i, s, wantEpoch, i-c.lose-1)
				}
			}
			if n := tap.inits.Load(); n != wantInits {
				t.Fatalf("%d producer ids taken, want %d", n, wantInits)
			}
			mustHold(t, readBack(t, ctx, cl, topic, 0), want)
		})
	}
}

// TestProducerEpochBumpKeepsUnansweredBatches: while one partition's
// refusal moves the producer to its next epoch, another partition's batch
// whose answer was lost (the broker wrote it) is resent unchanged, under the
// old epoch, and recognised as a duplicate, not numbered again and written
// twice; that partition moves to the new epoch with its next batch.
func TestProducerEpochBumpKeepsUnansweredBatches(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bumped := make(chan struct{})
	var once, lostOnce sync.Once
	var swallowed atomic.Bool
	tap := &produceTap{
		// Partition 0 loses its first batch: its second is refused.
		swallow: func(s sent) bool { return s.first == "p0-b0-0" && swallowed.CompareAndSwap(false, true) },
		after: func(s sent) error {
			if s.partition == 0 && s.epoch == 1 {
				once.Do(func() { close(bumped) })
			}
			if s.first == "p1-b0-0" {
				var lost bool
				lostOnce.Do(func() { lost = true })
				if lost {
					// Written; the answer is lost once the producer has
					// moved to its next epoch.
					select {
					case <-bumped:
					case <-ctx.Done():
					}
					return status.Error(codes.Unavailable, "test: the answer was lost")
				}
			}
			return nil
		},
	}
	cl, err := client.New(ctx, []string{tb.cfg.Listen}, client.WithDialOptions(grpc.WithUnaryInterceptor(tap.intercept)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, "two", 2, 1, nil); err != nil {
		t.Fatal(err)
	}
	// The lost answer's retry waits a backoff: keep it short here.
	p := cl.NewProducer(client.WithLinger(0), client.WithRetryBackoff(10*time.Millisecond, 10*time.Millisecond), client.WithDeliveryTimeout(10*time.Minute))
	defer p.Close()

	if err := p.ProduceSync(ctx, batchRecords("two", 0, 0)...); err != nil {
		t.Fatal(err)
	}
	p1first := batchRecords("two", 1, 0)
	p1done := make(chan error, 1)
	go func() { p1done <- p.ProduceSync(ctx, p1first...) }()
	// Partition 1's batch is on the wire, not yet answered, when partition
	// 0's next batch is refused.
	testutil.WaitFor(t, 20*time.Second, "partition 1's batch at the broker", func() bool { return len(tap.sendsOf("p1-b0-0")) == 1 })
	if err := p.ProduceSync(ctx, batchRecords("two", 0, 1)...); err != nil {
		t.Fatal(err)
	}
	if err := <-p1done; err != nil {
		t.Fatal(err)
	}
	p1next := batchRecords("two", 1, 1)
	if err := p.ProduceSync(ctx, p1next...); err != nil {
		t.Fatal(err)
	}

	s := tap.sendsOf("p1-b0-0")
	if len(s) != 2 || s[0].epoch != 0 || s[1].epoch != 0 || s[1].seq != s[0].seq {
		t.Fatalf("partition 1's unanswered batch was sent as %+v; want it resent unchanged", s)
	}
	if s := tap.sendsOf("p1-b1-0"); len(s) != 1 || s[0].epoch != 1 || s[0].seq != 0 {
		t.Fatalf("partition 1's next batch was sent as %+v; want epoch 1, sequence 0", s)
	}
	got := readBack(t, ctx, cl, "two", 1)
	mustHold(t, got, append(p1first, p1next...))
}

// TestProducerEpochBumpManyInFlight: with several batches of a partition
// in flight when the leader loses one, those after it are all refused; the
// producer moves to its next epoch once and numbers them again, and every
// record but the lost batch's is written once.
func TestProducerEpochBumpManyInFlight(t *testing.T) {
	tb := startBroker(t)
	var swallowed atomic.Bool
	tap := &produceTap{swallow: func(s sent) bool {
		return s.seq >= 20 && swallowed.CompareAndSwap(false, true)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.New(ctx, []string{tb.cfg.Listen}, client.WithDialOptions(grpc.WithUnaryInterceptor(tap.intercept)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, "many", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducer(client.WithLinger(time.Millisecond), client.WithBatchBytes(200), client.WithMaxInFlightPerPartition(5),
		client.WithRetryBackoff(5*time.Millisecond, 20*time.Millisecond), client.WithDeliveryTimeout(10*time.Minute))
	defer p.Close()
	const n = 400
	recs := make([]*client.Record, n)
	for i := range recs {
		recs[i] = &client.Record{Topic: "many", Partition: 0, Value: fmt.Appendf(nil, "r%04d", i)}
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	lost := map[string]bool{}
	for _, r := range recs {
		if r.Offset >= 1<<40 {
			lost[string(r.Value)] = true
		}
	}
	if len(lost) == 0 {
		t.Fatal("no batch was lost")
	}
	seen := map[string]int{}
	for _, r := range readBack(t, ctx, cl, "many", 0) {
		seen[string(r.Value)]++
	}
	for _, r := range recs {
		v := string(r.Value)
		if want := map[bool]int{true: 0, false: 1}[lost[v]]; seen[v] != want {
			t.Fatalf("record %s is in the log %d times, want %d", v, seen[v], want)
		}
	}
	if tap.inits.Load() != 1 {
		t.Fatalf("%d producer ids taken, want 1", tap.inits.Load())
	}
	tap.mu.Lock()
	defer tap.mu.Unlock()
	epochs := map[int16]int{}
	for _, s := range tap.sent {
		epochs[s.epoch]++
	}
	if len(epochs) != 2 || epochs[1] == 0 {
		t.Fatalf("batches were sent under epochs %v, want 0 and then 1", epochs)
	}
}

// TestProducerInFlightRetryStaysInTheLeadersWindow: a leader remembers a
// producer's last five batches of a partition, which is what lets it
// recognise a resent batch. With several batches in flight, one whose
// answer was lost (the leader wrote it) is retried while the others go on;
// the producer must not send batches so far past it that the leader
// forgets it, or the retry is refused as out of order, numbered again and
// written twice. The tap loses the first batch's answer and holds its
// retry until six more batches are written, or half a second: every record
// must be in the log once, in the order produced.
func TestProducerInFlightRetryStaysInTheLeadersWindow(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var written atomic.Int32 // batches after the first one the broker wrote
	var firstSends atomic.Int32
	tap := &produceTap{after: func(s sent) error {
		if s.first != "r000" {
			if s.reason == "" {
				written.Add(1)
			}
			return nil
		}
		if firstSends.Add(1) == 1 {
			return status.Error(codes.Unavailable, "test: the answer was lost")
		}
		return nil
	}}
	hold := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*stratav1.ProduceRequest); ok && firstSends.Load() == 1 {
			if recs, err := record.Batch(r.Batch).Records(); err == nil && string(recs[0].Value) == "r000" {
				// The retry of the first batch: held until the producer
				// has written six batches past it, or cannot.
				deadline := time.Now().Add(500 * time.Millisecond)
				for written.Load() < 6 && time.Now().Before(deadline) {
					<-time.After(5 * time.Millisecond)
				}
			}
		}
		return tap.intercept(ctx, method, req, reply, cc, invoker, opts...)
	}
	cl, err := client.New(ctx, []string{tb.cfg.Listen}, client.WithDialOptions(grpc.WithUnaryInterceptor(hold)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, "window", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducer(client.WithLinger(time.Millisecond), client.WithBatchBytes(200), client.WithMaxInFlightPerPartition(5),
		client.WithRetryBackoff(5*time.Millisecond, 20*time.Millisecond), client.WithDeliveryTimeout(10*time.Minute))
	defer p.Close()
	recs := make([]*client.Record, 60)
	for i := range recs {
		recs[i] = &client.Record{Topic: "window", Partition: 0, Value: fmt.Appendf(nil, "r%03d", i)}
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	if n := firstSends.Load(); n < 2 {
		t.Fatalf("the first batch was sent %d times: the test wants its answer lost and a retry", n)
	}
	mustHold(t, readBack(t, ctx, cl, "window", 0), recs)
}

// TestProducerInFlightKeepsOrder: with several batches of a partition in
// flight, an idempotent producer numbers them in the order they were
// produced, whatever order their senders run in, and the leader takes
// sequences only in order: the log holds the records as produced.
func TestProducerInFlightKeepsOrder(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.New(ctx, []string{tb.cfg.Listen})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, "order", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducer(client.WithLinger(0), client.WithBatchBytes(200), client.WithMaxInFlightPerPartition(5))
	defer p.Close()
	recs := make([]*client.Record, 300)
	for i := range recs {
		recs[i] = &client.Record{Topic: "order", Partition: 0, Value: fmt.Appendf(nil, "r%03d", i)}
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	mustHold(t, readBack(t, ctx, cl, "order", 0), recs)
}

// TestProducerWrittenBeforeIsNotNumberedAgain: a refusal that says the
// leader is past a batch's sequence (it wrote the batch before, and no
// longer remembers it) fails the batch with an error saying so; the
// producer does not number it again, which would write it twice. The tap
// loses the first answer and turns the retry's into such a refusal.
func TestProducerWrittenBeforeIsNotNumberedAgain(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var sends atomic.Int32
	tap := &produceTap{after: func(s sent) error {
		if s.first != "p0-b0-0" {
			return nil
		}
		if sends.Add(1) == 1 {
			return status.Error(codes.Unavailable, "test: the answer was lost")
		}
		st, err := status.New(codes.FailedPrecondition, "producer: batch starts at sequence 0, expected 40").WithDetails(&errdetails.ErrorInfo{
			Domain: client.ErrorDomain, Reason: "OUT_OF_ORDER_SEQUENCE",
			Metadata: map[string]string{"retriable": "true", "producer_id": strconv.FormatInt(s.id, 10), "sequence": "0", "expected_sequence": "40"},
		})
		if err != nil {
			t.Error(err)
		}
		return st.Err()
	}}
	cl, err := client.New(ctx, []string{tb.cfg.Listen}, client.WithDialOptions(grpc.WithUnaryInterceptor(tap.intercept)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, "before", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducer(client.WithLinger(0), client.WithRetryBackoff(5*time.Millisecond, 5*time.Millisecond), client.WithDeliveryTimeout(time.Minute))
	defer p.Close()
	err = p.ProduceSync(ctx, batchRecords("before", 0, 0)...)
	if !errors.Is(err, client.ErrOutOfOrderSequence) || !strings.Contains(err.Error(), "wrote this batch before") {
		t.Fatalf("got %v, want the batch failed as written before", err)
	}
	if n := sends.Load(); n != 2 {
		t.Fatalf("the batch was sent %d times, want twice (the first answer lost, then refused)", n)
	}
	// The producer goes on, under a new producer id.
	if err := p.ProduceSync(ctx, batchRecords("before", 0, 1)...); err != nil {
		t.Fatal(err)
	}
	got := readBack(t, ctx, cl, "before", 0)
	if len(got) != 2 || string(got[0].Value) != "p0-b0-0" || string(got[1].Value) != "p0-b1-0" {
		t.Fatalf("the log holds %d records (%v), want the first batch once, then the second", len(got), got)
	}
	if n := tap.inits.Load(); n != 2 {
		t.Fatalf("%d producer ids taken, want 2", n)
	}
}

// TestProducerRetriesOnceTheLeaderMoves: a produce that failed because its
// leader went away is sent again as soon as the metadata names a new
// leader (or a new leader epoch), not at the end of its retry backoff,
// which has grown while the cluster elected one. The tap fails the first
// attempt as a dead broker would, and the metadata shows a new leader
// epoch from the second fetch after that on; the backoff is a minute.
func TestProducerRetriesOnceTheLeaderMoves(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var failed atomic.Bool
	var fetchesAfter atomic.Int32
	intercept := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		switch method {
		case stratav1.ProduceService_Produce_FullMethodName:
			if failed.CompareAndSwap(false, true) {
				return status.Error(codes.Unavailable, "test: connection refused")
			}
		case stratav1.MetadataService_GetMetadata_FullMethodName:
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil && failed.Load() && fetchesAfter.Add(1) > 1 {
				resp := reply.(*stratav1.GetMetadataResponse)
				resp.Version++
				for _, tm := range resp.Topics {
					for _, pm := range tm.Partitions {
						pm.LeaderEpoch++
					}
				}
			}
			return err
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cl, err := client.New(ctx, []string{tb.cfg.Listen}, client.WithDialOptions(grpc.WithUnaryInterceptor(intercept)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, "moved", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducer(client.WithLinger(0), client.WithRetryBackoff(time.Minute, time.Minute))
	defer p.Close()
	if err := p.ProduceSync(ctx, batchRecords("moved", 0, 0)...); err != nil {
		t.Fatalf("the produce was not sent again once the leader moved: %v", err)
	}
	if !failed.Load() || fetchesAfter.Load() < 2 {
		t.Fatalf("failed %v, metadata fetched %d times after: the test wants the retry to wait for a second fetch", failed.Load(), fetchesAfter.Load())
	}
}

// TestProducerForgottenAfterALostAnswerIsNotNumberedAgain: a batch was
// written but its answer lost, and before its retry the leader forgot the
// producer (it remembers a bounded number per partition, and 10,000 others
// wrote since). The retry is refused UNKNOWN_PRODUCER_ID, which cannot tell
// a forgotten producer from one whose batches the leader never had: the
// batch fails with its outcome unknown instead of being numbered again
// under a new epoch and written twice.
func TestProducerForgottenAfterALostAnswerIsNotNumberedAgain(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var sends atomic.Int32
	tap := &produceTap{after: func(s sent) error {
		if s.first != "p0-b1-0" || sends.Add(1) != 1 {
			return nil
		}
		crowdOut(t, ctx, tb.cfg.Listen, "forgot", 0, 10_000)
		return status.Error(codes.Unavailable, "test: the answer was lost")
	}}
	cl, err := client.New(ctx, []string{tb.cfg.Listen}, client.WithDialOptions(grpc.WithUnaryInterceptor(tap.intercept)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, "forgot", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducer(client.WithLinger(0), client.WithRetryBackoff(5*time.Millisecond, 5*time.Millisecond), client.WithDeliveryTimeout(time.Minute))
	defer p.Close()
	if err := p.ProduceSync(ctx, batchRecords("forgot", 0, 0)...); err != nil {
		t.Fatal(err)
	}
	err = p.ProduceSync(ctx, batchRecords("forgot", 0, 1)...)
	if !errors.Is(err, client.ErrUnknownProducerID) || !strings.Contains(err.Error(), "may have been written") {
		t.Fatalf("got %v, want the batch failed with its outcome unknown", err)
	}
	if s := tap.sendsOf("p0-b1-0"); len(s) != 2 || s[1].reason != "UNKNOWN_PRODUCER_ID" || s[1].seq != s[0].seq || s[1].epoch != s[0].epoch {
		t.Fatalf("the batch was sent as %+v, want twice as first numbered (the answer lost, then refused)", s)
	}
	// The producer goes on, under a new producer id.
	if err := p.ProduceSync(ctx, batchRecords("forgot", 0, 2)...); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range readBack(t, ctx, cl, "forgot", 0) {
		if v := string(r.Value); strings.HasPrefix(v, "p0-") {
			got = append(got, v)
		}
	}
	if want := []string{"p0-b0-0", "p0-b1-0", "p0-b2-0"}; !slices.Equal(got, want) {
		t.Fatalf("the partition holds %v of the producer's records, want %v: each once", got, want)
	}
}

// crowdOut writes one record to the partition from each of n producers
// that have not written there before, with ids no cluster hands out, so
// that it forgets the producers it saw least recently.
func crowdOut(t *testing.T, ctx context.Context, addr, topic string, partition int32, n int) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Error(err)
		return
	}
	defer cc.Close()
	ps := stratav1.NewProduceServiceClient(cc)
	template, err := record.Encode(record.DefaultBatchOptions(), record.Record{Value: []byte("crowd")})
	if err != nil {
		t.Error(err)
		return
	}
	const workers = 8
	var wg sync.WaitGroup
	var failed atomic.Value
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n && failed.Load() == nil; i += workers {
				b := record.Batch(slices.Clone(template))
				b.SetProducer(1<<40+int64(i), 0, 0)
				if _, err := ps.Produce(ctx, &stratav1.ProduceRequest{Topic: topic, Partition: partition, Acks: stratav1.Acks_ACKS_LEADER, Batch: b, TimeoutMs: 10_000}); err != nil {
					failed.Store(err)
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Errorf("crowding out producers: %v", err)
	}
}
