package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/rpc"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// These tests run the producer against a real broker, in this process, on
// loopback, and lose the answer to a produce that the broker carried out:
// the producer must retry and the batch must still be written once.

// testBroker is one broker serving its API on a fixed loopback address, so
// that it can be restarted where clients expect it.
type testBroker struct {
	cfg config.Broker
	mu  sync.Mutex
	b   *broker.Broker
	srv *rpc.Server
}

func startBroker(t *testing.T) *testBroker {
	cfg := config.DefaultBroker()
	cfg.NodeID = 1
	cfg.DataDir = t.TempDir()
	cfg.Listen = freeport.Loopback(t)
	cfg.Raft.Listen = freeport.Loopback(t)
	cfg.Gossip.Listen = freeport.Loopback(t)
	cfg.Admin.Listen = ""
	cfg.ObjectStore.Type = config.ObjectStoreNone
	tb := &testBroker{cfg: cfg}
	if err := tb.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tb.stop)
	return tb
}

func (tb *testBroker) start() error {
	lis, err := net.Listen("tcp", tb.cfg.Listen)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := broker.Start(ctx, tb.cfg, quiet, rpc.NewPeers(nil, ""))
	if err != nil {
		lis.Close()
		return fmt.Errorf("start broker: %w", err)
	}
	tb.mu.Lock()
	tb.b, tb.srv = b, rpc.NewServer(b, nil)
	go tb.srv.Serve(lis)
	tb.mu.Unlock()
	return nil
}

// stop shuts the broker down gracefully, as SIGTERM would.
func (tb *testBroker) stop() {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.srv == nil {
		return
	}
	tb.srv.GracefulStop()
	tb.b.Close()
	tb.srv, tb.b = nil, nil
}

// loseAnswer returns a client interceptor that lets the first produce of a
// batch with records reach the broker and then reports it failed, as a
// connection dropped before the answer would; before reporting, it runs
// meanwhile (say, a broker restart). It counts the answers flagged
// duplicate.
func loseAnswer(meanwhile func()) (grpc.UnaryClientInterceptor, *atomic.Int32) {
	var lost atomic.Bool
	dups := new(atomic.Int32)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if method != stratav1.ProduceService_Produce_FullMethodName || err != nil {
			return err
		}
		if reply.(*stratav1.ProduceResponse).GetDuplicate() {
			dups.Add(1)
		}
		if lost.CompareAndSwap(false, true) {
			if meanwhile != nil {
				meanwhile()
			}
			return status.Error(codes.Unavailable, "test: the answer was lost")
		}
		return nil
	}, dups
}

// produceAndCheck produces n records to topic/0 through a client with the
// interceptor, then reads the partition back: every record is there once,
// at the offset its producer was told.
func produceAndCheck(t *testing.T, tb *testBroker, icpt grpc.UnaryClientInterceptor, dups *atomic.Int32, topic string, idempotent bool) (duplicates int) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.New(ctx, []string{tb.cfg.Listen}, client.WithDialOptions(grpc.WithUnaryInterceptor(icpt)),
		client.WithRequestTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, topic, 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	p := c.NewProducer(client.WithIdempotence(idempotent), client.WithLinger(0), client.WithRetryBackoff(10*time.Millisecond, 200*time.Millisecond))
	defer p.Close()
	const n = 20
	recs := make([]*client.Record, n)
	for i := range recs {
		recs[i] = &client.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "v%02d", i)}
	}
	// Two rounds: the first batch's answer is lost, the rest go through.
	if err := p.ProduceSync(ctx, recs[:n/2]...); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, recs[n/2:]...); err != nil {
		t.Fatal(err)
	}

	k := c.NewConsumer(client.WithStopAtEnd(true))
	defer k.Close()
	if err := k.Assign(topic, 0, client.Earliest()); err != nil {
		t.Fatal(err)
	}
	var got []*client.Record
	for {
		batch, err := k.Poll(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, batch...)
	}
	if !idempotent {
		return len(got) - n
	}
	if len(got) != n {
		t.Fatalf("read %d records back, produced %d", len(got), n)
	}
	for i, r := range got {
		if string(r.Value) != string(recs[i].Value) || r.Offset != recs[i].Offset {
			t.Fatalf("record %d: %q at offset %d; produced %q, told offset %d", i, r.Value, r.Offset, recs[i].Value, recs[i].Offset)
		}
	}
	if dups.Load() != 1 {
		t.Fatalf("%d answers flagged duplicate, want the one retry", dups.Load())
	}
	return 0
}

// TestProducerLostAnswer: the answer to a written batch is lost; the retry
// is recognised and every record is in the log once. Without idempotence
// the same loss writes the batch twice, which shows the test does lose it.
func TestProducerLostAnswer(t *testing.T) {
	tb := startBroker(t)
	icpt, dups := loseAnswer(nil)
	produceAndCheck(t, tb, icpt, dups, "lost", true)

	icpt, dups = loseAnswer(nil)
	if extra := produceAndCheck(t, tb, icpt, dups, "lost-plain", false); extra <= 0 {
		t.Fatalf("without idempotence the lost answer gave %d extra records, want the batch written again", extra)
	}
}

// TestProducerLostAnswerAcrossRestart: the broker restarts (gracefully, on
// the same data dir and address) after writing a batch and before its
// answer arrives; the restarted broker rebuilds what it knows of producers
// from its log and recognises the retry.
func TestProducerLostAnswerAcrossRestart(t *testing.T) {
	tb := startBroker(t)
	icpt, dups := loseAnswer(func() {
		tb.stop()
		if err := tb.start(); err != nil {
			t.Error(err) // the retries then fail, and the test with them
		}
	})
	produceAndCheck(t, tb, icpt, dups, "restart", true)
}

// countingInits starts a broker and returns a client of it that counts the
// producer id requests it sends.
func countingInits(t *testing.T) (*client.Client, *atomic.Int32) {
	t.Helper()
	tb := startBroker(t)
	inits := new(atomic.Int32)
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == stratav1.ProduceService_InitProducer_FullMethodName {
			inits.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, []string{tb.cfg.Listen}, client.WithDialOptions(grpc.WithUnaryInterceptor(count)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, inits
}

// TestProducerNewIDAfterFailedBatch: a batch refused after it was stamped
// used up its sequence numbers; the producer takes a new producer id, so the
// next batch is not refused for the gap.
func TestProducerNewIDAfterFailedBatch(t *testing.T) {
	c, inits := countingInits(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateTopic(ctx, "small", 1, 1, map[string]string{"max.message.bytes": "1024"}); err != nil {
		t.Fatal(err)
	}
	p := c.NewProducer(client.WithLinger(0), client.WithDeliveryTimeout(5*time.Second))
	defer p.Close()
	if err := p.ProduceSync(ctx, &client.Record{Topic: "small", Value: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	err := p.ProduceSync(ctx, &client.Record{Topic: "small", Value: make([]byte, 2000)})
	if !errors.Is(err, client.ErrRecordTooLarge) {
		t.Fatalf("too large a record: %v", err)
	}
	after := &client.Record{Topic: "small", Value: []byte("b")}
	if err := p.ProduceSync(ctx, after); err != nil {
		t.Fatalf("the batch after a failed one: %v", err)
	}
	if after.Offset != 1 || inits.Load() != 2 {
		t.Fatalf("offset %d after %d producer ids, want offset 1 and a second id", after.Offset, inits.Load())
	}
}

// TestProducerPrepare: Prepare asks for the producer id before anything is
// produced, once, and the records produced after it use that id without
// asking again; without idempotence it asks for nothing.
func TestProducerPrepare(t *testing.T) {
	c, inits := countingInits(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateTopic(ctx, "prepared", 1, 1, nil); err != nil {
		t.Fatal(err)
	}

	p := c.NewProducer(client.WithLinger(0))
	defer p.Close()
	if err := p.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if n := inits.Load(); n != 1 {
		t.Fatalf("after Prepare: %d producer id requests, want 1", n)
	}
	if err := p.Prepare(ctx); err != nil || inits.Load() != 1 {
		t.Fatalf("Prepare again: %v, %d producer id requests; want no error and still 1", err, inits.Load())
	}
	for _, v := range []string{"a", "b"} {
		if err := p.ProduceSync(ctx, &client.Record{Topic: "prepared", Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := inits.Load(); n != 1 {
		t.Fatalf("after producing: %d producer id requests, want the one Prepare made", n)
	}

	plain := c.NewProducer(client.WithIdempotence(false), client.WithAcks(stratav1.Acks_ACKS_LEADER))
	defer plain.Close()
	if err := plain.Prepare(ctx); err != nil || inits.Load() != 1 {
		t.Fatalf("Prepare without idempotence: %v, %d producer id requests; want no error and no request", err, inits.Load())
	}
}
