package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// These tests use the real network code against brokers that are not
// there: a loopback port nobody listens on refuses every connection at
// once. They check what must hold when the cluster is unreachable: calls
// end in time with the right errors, and nothing is left running.

// deadAddr returns a loopback address that refuses connections: no
// listener of this test binary is given it.
func deadAddr(t testing.TB) string {
	t.Helper()
	return freeport.Loopback(t)
}

// offlineClient returns a client whose metadata says broker 1, at a dead
// address, leads the three partitions of topic "t".
func offlineClient(t testing.TB, opts ...Option) *Client {
	t.Helper()
	cfg := defaultClientConfig()
	cfg.requestTimeout = 300 * time.Millisecond
	cfg.metadataMinRefresh = 5 * time.Millisecond
	for _, o := range opts {
		o.applyClient(&cfg)
	}
	addr := deadAddr(t)
	c := newClient(cfg, []string{addr})
	md := testMetadata(1)
	md.Brokers = md.Brokers[:1]
	md.Brokers[0].Address = addr
	for _, p := range md.Topics[0].Partitions {
		p.Leader = 1
	}
	c.meta.install(md)
	t.Cleanup(func() { c.Close() })
	return c
}

// waitGoroutines fails the test unless the goroutine count comes back to
// baseline (taken at the start of the test) soon after every Close.
func waitGoroutines(t *testing.T, baseline int) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, "the goroutines to end", func() error {
		if n := runtime.NumGoroutine(); n > baseline {
			buf := make([]byte, 1<<20)
			return fmt.Errorf("%d goroutines left, %d before:\n%s", n, baseline, buf[:runtime.Stack(buf, true)])
		}
		return nil
	})
}

func TestNewUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := New(ctx, []string{deadAddr(t), deadAddr(t)})
	if err == nil {
		t.Fatal("New succeeded without brokers")
	}
	if !strings.HasPrefix(err.Error(), "strata: load metadata") || !IsRetriable(err) {
		t.Errorf("error %v: want a retriable transport error", err)
	}
	if time.Since(start) > 3*time.Second {
		t.Errorf("refused connections took %s", time.Since(start))
	}
}

func TestAdminUnreachable(t *testing.T) {
	c := offlineClient(t)
	_, err := c.CreateTopic(context.Background(), "x", 3, 1, nil)
	if err == nil || !strings.HasPrefix(err.Error(), `strata: create topic "x": `) || !IsRetriable(err) {
		t.Errorf("CreateTopic: %v", err)
	}
	// A deadline shorter than the retries ends the call with the context
	// error and the last broker error.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = c.ListTopics(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ListTopics with a short deadline: %v", err)
	}
	if _, err := c.ListOffsets(context.Background(), "t", 0, Latest()); !IsRetriable(err) {
		t.Errorf("ListOffsets: %v", err)
	}
}

func TestProducerDeliveryTimeout(t *testing.T) {
	baseline := runtime.NumGoroutine()
	c := offlineClient(t)
	p := c.NewProducer(WithDeliveryTimeout(400*time.Millisecond), WithRetryBackoff(10*time.Millisecond, 50*time.Millisecond), WithLinger(0))
	r := &Record{Topic: "t", Partition: AnyPartition, Key: []byte("user-1"), Value: []byte("v")}
	start := time.Now()
	err := p.ProduceSync(context.Background(), r)
	el := time.Since(start)
	if !errors.Is(err, ErrDeliveryTimeout) || !strings.HasPrefix(err.Error(), "strata: produce to t/") {
		t.Fatalf("ProduceSync: %v", err)
	}
	// It may fail up to one backoff early: a retry that cannot start
	// before the deadline is not waited for.
	if el < 400*time.Millisecond-60*time.Millisecond || el > 3*time.Second {
		t.Errorf("delivery timeout of 400ms took %s", el)
	}
	if r.Partition != KeyPartition(r.Key, 3) {
		t.Errorf("partition %d, key hashes to %d", r.Partition, KeyPartition(r.Key, 3))
	}
	if r.Timestamp.IsZero() {
		t.Error("timestamp not set")
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close with nothing left: %v", err)
	}
	c.Close()
	waitGoroutines(t, baseline)
}

func TestProducerRetriesBound(t *testing.T) {
	c := offlineClient(t)
	p := c.NewProducer(WithRetries(2), WithRetryBackoff(time.Millisecond, time.Millisecond), WithLinger(0))
	defer p.Close()
	err := p.ProduceSync(context.Background(), &Record{Topic: "t", Partition: 1, Value: []byte("v")})
	if err == nil || !strings.Contains(err.Error(), "gave up after 3 attempts") || !IsRetriable(err) {
		t.Errorf("ProduceSync: %v", err)
	}
}

func TestProducerRecordContext(t *testing.T) {
	c := offlineClient(t)
	p := c.NewProducer(WithRetryBackoff(10*time.Millisecond, 20*time.Millisecond), WithLinger(0))
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	got := make(chan error, 1)
	p.Produce(ctx, &Record{Topic: "t", Partition: 0, Value: []byte("v")}, func(_ *Record, err error) { got <- err })
	select {
	case err := <-got:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("record whose ctx ended: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("record outlived its context")
	}
	// ProduceSync returns when its ctx ends even if a record is still
	// being retried.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if err := p.ProduceSync(ctx2, &Record{Topic: "t", Partition: 0}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ProduceSync: %v", err)
	}
}

func TestProducerCloseAnswersEveryRecord(t *testing.T) {
	baseline := runtime.NumGoroutine()
	c := offlineClient(t)
	p := c.NewProducer(WithDeliveryTimeout(300*time.Millisecond), WithRetryBackoff(5*time.Millisecond, 20*time.Millisecond),
		WithLinger(time.Hour), WithMaxInFlightPerPartition(3))
	const n = 500
	var answered atomic.Int32
	var mu sync.Mutex
	counts := map[*Record]int{}
	for i := range n {
		r := &Record{Topic: "t", Partition: AnyPartition, Value: []byte{byte(i)}}
		p.Produce(context.Background(), r, func(r *Record, err error) {
			if err == nil {
				t.Errorf("record written to a dead broker")
			}
			mu.Lock()
			counts[r]++
			mu.Unlock()
			answered.Add(1)
		})
	}
	start := time.Now()
	p.Close() // flushes (the linger is an hour), waits at most the delivery timeout
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("Close took %s", el)
	}
	if answered.Load() != n || len(counts) != n {
		t.Fatalf("%d answers for %d records (%d distinct)", answered.Load(), n, len(counts))
	}
	for _, k := range counts {
		if k != 1 {
			t.Fatalf("a record was answered %d times", k)
		}
	}
	var after error
	p.Produce(context.Background(), &Record{Topic: "t"}, func(_ *Record, err error) { after = err })
	if !errors.Is(after, ErrClosed) {
		t.Errorf("Produce after Close: %v", after)
	}
	if err := p.Flush(context.Background()); err != nil {
		t.Errorf("Flush after Close: %v", err)
	}
	c.Close()
	waitGoroutines(t, baseline)
}

// Produce blocks while the buffer is full, and gives up when its context
// ends.
func TestProducerBufferFull(t *testing.T) {
	c := offlineClient(t)
	p := c.NewProducer(WithMaxBufferedBytes(1000), WithLinger(time.Hour), WithDeliveryTimeout(time.Hour))
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		p.Flush(ctx)
		cancel()
	}()
	var first error
	p.Produce(context.Background(), &Record{Topic: "t", Partition: 0, Value: make([]byte, 900)}, func(_ *Record, err error) { first = err })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	got := make(chan error, 1)
	p.Produce(ctx, &Record{Topic: "t", Partition: 0, Value: make([]byte, 900)}, func(_ *Record, err error) { got <- err })
	if err := <-got; !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "buffer") {
		t.Errorf("second record into a full buffer: %v", err)
	}
	if p.buffer.used() > 1000 {
		t.Errorf("buffer holds %d bytes", p.buffer.used())
	}
	_ = first
}

func TestProduceUnknownTopicOrPartition(t *testing.T) {
	c := offlineClient(t, WithRequestTimeout(100*time.Millisecond))
	p := c.NewProducer()
	defer p.Close()
	err := p.ProduceSync(context.Background(), &Record{Topic: "nope", Partition: AnyPartition})
	if !errors.Is(err, ErrTopicNotFound) {
		t.Errorf("unknown topic: %v", err)
	}
	err = p.ProduceSync(context.Background(), &Record{Topic: "t", Partition: 3})
	if !errors.Is(err, ErrPartitionNotFound) {
		t.Errorf("partition 3 of 3: %v", err)
	}
	for _, r := range []*Record{{Topic: "", Partition: 0}, {Topic: "t", Partition: -2}} {
		if err := p.ProduceSync(context.Background(), r); err == nil || IsRetriable(err) {
			t.Errorf("%+v: %v", r, err)
		}
	}
	var nilErr error
	p.Produce(context.Background(), nil, func(_ *Record, err error) { nilErr = err })
	if !errors.Is(nilErr, ErrInvalidRequest) {
		t.Errorf("nil record: %v", nilErr)
	}
}

func TestConsumerUnreachable(t *testing.T) {
	baseline := runtime.NumGoroutine()
	c := offlineClient(t)
	k := c.NewConsumer()
	if err := k.Assign("t", 0, AtOffset(5)); err != nil {
		t.Fatal(err)
	}
	if err := k.Assign("t", 1, Earliest()); err != nil {
		t.Fatal(err)
	}
	if got := k.Position("t", 0); got != 5 {
		t.Errorf("Position of AtOffset(5) = %d", got)
	}
	if got := k.Position("t", 1); got != -1 {
		t.Errorf("Position of an unresolved Earliest() = %d", got)
	}
	if got := k.HighWatermark("t", 0); got != -1 {
		t.Errorf("HighWatermark before a fetch = %d", got)
	}
	if got := k.Position("t", 2); got != -1 {
		t.Errorf("Position of an unassigned partition = %d", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	recs, err := k.Poll(ctx)
	if len(recs) != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Poll with no reachable broker: %d records, %v", len(recs), err)
	}
	k.Unassign("t", 1)
	if got := k.Position("t", 1); got != -1 {
		t.Errorf("Position after Unassign = %d", got)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Poll(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Poll after Close: %v", err)
	}
	if err := k.Assign("t", 0, Earliest()); !errors.Is(err, ErrClosed) {
		t.Errorf("Assign after Close: %v", err)
	}
	c.Close()
	waitGoroutines(t, baseline)
}

func TestConsumerUnknownTopic(t *testing.T) {
	c := offlineClient(t, WithRequestTimeout(100*time.Millisecond))
	k := c.NewConsumer(WithStopAtEnd(true))
	defer k.Close()
	// Nothing assigned: with WithStopAtEnd everything assigned is read.
	if _, err := k.Poll(context.Background()); err != io.EOF {
		t.Errorf("Poll with nothing assigned: %v", err)
	}
	if err := k.Assign("nope", 0, Earliest()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := k.Poll(ctx)
	if !errors.Is(err, ErrTopicNotFound) || !strings.HasPrefix(err.Error(), "strata: fetch nope/0: ") {
		t.Errorf("Poll of an unknown topic: %v", err)
	}
	// The failed partition counts as finished.
	if _, err := k.Poll(ctx); err != io.EOF {
		t.Errorf("Poll after the only partition failed: %v", err)
	}
}

// BenchmarkProduceRefused measures the whole Produce path (metadata lookup,
// partitioner, buffer accounting, accumulator, sender goroutine, callbacks)
// with a leader that refuses connections and no retries: every batch fails
// at once, so what is measured is the client's own cost per record.
func BenchmarkProduceRefused(b *testing.B) {
	c := offlineClient(b)
	p := c.NewProducer(WithRetries(0), WithLinger(time.Hour))
	defer p.Close()
	value := bytes.Repeat([]byte("0123456789abcdef"), 6) // 96 bytes
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user-%06d", i)
	}
	// Reused: Produce copies records into batches as they come, and with
	// no retries none is read again (callers must not do this).
	recs := make([]Record, 1<<20)
	ctx := context.Background()
	noop := func(*Record, error) {}
	b.SetBytes(int64(len(value) + len(keys[0])))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := &recs[i%len(recs)]
		*r = Record{Topic: "t", Partition: AnyPartition, Key: keys[i%len(keys)], Value: value}
		p.Produce(ctx, r, noop)
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// An admin call tries the known brokers in turn: with two of three gone, it
// reaches the third within its attempts every time. (Each attempt used to
// draw a broker at random, and missed the live one in about one call in
// five here, one in eighty with one broker of three gone.)
func TestAdminCallTriesEachBroker(t *testing.T) {
	cfg := defaultClientConfig()
	cfg.requestTimeout = 300 * time.Millisecond
	c := newClient(cfg, []string{"127.0.0.1:1001"})
	t.Cleanup(func() { c.Close() })
	c.meta.install(testMetadata(1)) // brokers at 127.0.0.1:1001, 1002 and 1003
	const live = "127.0.0.1:1003"
	for i := range 30 {
		var tried []string
		err := c.callAny(context.Background(), "test", func(ctx context.Context, cc *grpc.ClientConn) error {
			tried = append(tried, cc.Target())
			if cc.Target() != live {
				return status.Error(codes.Unavailable, "connection refused")
			}
			return nil
		})
		if err != nil {
			t.Fatalf("call %d failed after trying %v: %v", i, tried, err)
		}
	}
}
