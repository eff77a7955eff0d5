package rpc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// TestColdReadsYieldToWriters: on a broker with the default
// tiering.cold_read_yield, a replay of history from the bucket is slowed to
// the least rate while produces wait (batches of an idempotent producer
// left waiting for their turn), still progresses while it is, and is free
// again once the writers stop.
func TestColdReadsYieldToWriters(t *testing.T) {
	cfg := brokerConfig(t, 1, t.TempDir())
	cfg.ObjectStore.Type = config.ObjectStoreFS
	cfg.Tiering.ChunkBytes = 64 << 10  // many GETs, through a cache that
	cfg.Tiering.CacheBytes = 128 << 10 // holds almost none of the history
	tb := startBroker(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	within := func(what string, cond func() bool) {
		t.Helper()
		testutil.Eventually(t, time.Minute, what, func() error {
			if cond() {
				return nil
			}
			return fmt.Errorf("metrics:\n%s", yieldMetrics(tb))
		})
	}

	// 4 MiB of history, only in the bucket but for the active segment.
	tb.createTopic(t, "history", 1, map[string]string{"segment.bytes": "256KiB", "segment.ms": "1s",
		"local.retention.bytes": "1", "local.retention.ms": "-1", "retention.ms": "-1"})
	value := strings.Repeat("h", 8<<10)
	for i := range 512 {
		if _, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "history", Batch: batchOf(t, fmt.Sprint(i, value))}); err != nil {
			t.Fatal(err)
		}
	}
	within("the history in the bucket", func() bool {
		d, err := tb.admin.DescribeTopic(ctx, &stratav1.DescribeTopicRequest{Name: "history"})
		if err != nil {
			t.Fatal(err)
		}
		p := d.Topic.Partitions[0]
		return p.ColdEndOffset == p.HighWatermark && p.LocalStartOffset == p.HighWatermark
	})

	// Writers alone teach the broker their latency.
	tb.createTopic(t, "live", 1, nil)
	within("the writers' own latency learned", func() bool {
		if _, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "live", Batch: batchOf(t, "fast")}); err != nil {
			t.Fatal(err)
		}
		return yieldMetric(t, tb, `strata_cold_read_yield_produce_latency_seconds{quantile="0.99"}`) > 0
	})

	// A replay in a loop.
	var replayed atomic.Int64
	stopReplay := make(chan struct{})
	var replays sync.WaitGroup
	replays.Add(1)
	go func() {
		defer replays.Done()
		for {
			select {
			case <-stopReplay:
				return
			default:
			}
			stream, err := tb.fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: "history", MaxBytes: 64 << 10, StopAtEnd: true})
			if err != nil {
				t.Error(err)
				return
			}
			for {
				resp, err := stream.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Error(err)
					return
				}
				replayed.Add(int64(len(resp.Batches)))
			}
		}
	}()
	defer func() { close(stopReplay); replays.Wait() }()

	// Writers whose batches wait: each producer's next batch leaves a gap
	// in its sequences, so it waits for its turn (up to a second) and is
	// refused; then it sends another.
	stopWriters := make(chan struct{})
	var writers sync.WaitGroup
	for range 4 {
		init, err := tb.produce.InitProducer(ctx, &stratav1.InitProducerRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tb.send(t, "live", testutil.IdemBatch(t, init.ProducerId, 0, 0, baseTime, "first"), stratav1.Acks_ACKS_ALL); err != nil {
			t.Fatal(err)
		}
		writers.Add(1)
		go func() {
			defer writers.Done()
			for {
				select {
				case <-stopWriters:
					return
				default:
				}
				if _, err := tb.send(t, "live", testutil.IdemBatch(t, init.ProducerId, 0, 7, baseTime, "gap"), stratav1.Acks_ACKS_ALL); reasonOf(err) != "OUT_OF_ORDER_SEQUENCE" {
					t.Errorf("a batch after a gap: %v", err)
					return
				}
			}
		}()
	}
	within("cold reads at the least rate while produces wait", func() bool {
		return yieldMetric(t, tb, "strata_cold_read_yield_bytes_per_second") == 1<<20
	})
	// They still progress.
	from := replayed.Load()
	within("the replay to progress while it yields", func() bool {
		return replayed.Load() > from+256<<10
	})
	if held := yieldMetric(t, tb, `strata_cold_read_throttle_seconds_total{limit="writers"}`); held <= 0 {
		t.Fatalf("cold GETs held back for the writers for %v s", held)
	}

	// The writers stop: cold reads are free again.
	close(stopWriters)
	writers.Wait()
	within("cold reads free again once the writers stop", func() bool {
		return yieldMetric(t, tb, "strata_cold_read_yield_bytes_per_second") == 0
	})
	from = replayed.Load()
	within("the replay to go on", func() bool { return replayed.Load() > from+1<<20 })
}

// yieldMetrics is the broker's metrics text.
func yieldMetrics(tb *testBroker) string {
	var buf bytes.Buffer
	tb.WriteMetrics(&buf)
	return buf.String()
}

// yieldMetric is the value of one sample of the broker's metrics, by its
// name and labels.
func yieldMetric(t *testing.T, tb *testBroker, sample string) float64 {
	t.Helper()
	for _, line := range strings.Split(yieldMetrics(tb), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %q: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no metric %s in:\n%s", sample, yieldMetrics(tb))
	return 0
}
