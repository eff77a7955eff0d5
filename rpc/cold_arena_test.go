package rpc

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/tiering"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// TestColdFetchStreamsThroughRecycledChunks: fetch streams, raw and
// decoded, replay 1.4 MB of history in 16 KiB segments from the cold tier
// all at once through a cache of 256 KiB, so that chunk buffers are
// recycled all the time
// while answers refer to them. Recycled buffers are poisoned: an answer
// sent after its chunk went back to the arena would carry the poison, and
// every byte and record is compared with what was produced.
func TestColdFetchStreamsThroughRecycledChunks(t *testing.T) {
	tiering.PoisonRecycledBuffers()
	m := miniotest.Start(t)
	cfg := withStore(brokerConfig(t, 1, t.TempDir()), m)
	cfg.Tiering.ChunkBytes = 64 << 10
	cfg.Tiering.CacheBytes = 256 << 10
	b := startBroker(t, cfg)
	ctx := testCtx(t)
	if _, err := b.admin.CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "cold", Partitions: 1, Config: map[string]string{
		"segment.bytes": "16KiB", "local.retention.bytes": "16KiB", "retention.ms": "-1"}}); err != nil {
		t.Fatal(err)
	}
	var values []string
	for i := range 200 {
		var batch []string
		for j := range 10 {
			batch = append(batch, fmt.Sprintf("%04d-%s", 10*i+j, strings.Repeat(string(rune('a'+(i+j)%26)), 700)))
		}
		values = append(values, batch...)
		if _, err := b.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "cold", Batch: batchOf(t, batch...)}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 20*time.Second, "history in the cold tier", func() bool {
		d, err := b.admin.DescribeTopic(ctx, &stratav1.DescribeTopicRequest{Name: "cold"})
		if err != nil {
			t.Fatal(err)
		}
		p := d.Topic.Partitions[0]
		return p.LocalStartOffset > 1900 && p.LogStartOffset == 0
	})
	var wg sync.WaitGroup
	for i := range 6 {
		decode := i%2 == 1
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream, err := b.fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: "cold", MaxBytes: int32(8000 + 7000*i), StopAtEnd: true, Decode: decode})
			if err != nil {
				t.Error(err)
				return
			}
			next := 0
			for {
				resp, err := stream.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Error(err)
					return
				}
				var got []record.Record
				if decode {
					for _, r := range resp.Records {
						got = append(got, record.Record{Offset: r.Offset, Value: r.Value})
					}
				} else {
					for rest := resp.Batches; len(rest) > 0; {
						bt, more, err := record.Next(rest)
						if err != nil {
							t.Errorf("stream %d: a batch fails its checks: %v", i, err)
							return
						}
						recs, err := bt.Records()
						if err != nil {
							t.Error(err)
							return
						}
						got, rest = append(got, recs...), more
					}
				}
				for _, r := range got {
					if r.Offset != int64(next) || !bytes.Equal(r.Value, []byte(values[next])) {
						t.Errorf("stream %d (decode %v): record %d is not the one produced at %d", i, decode, r.Offset, next)
						return
					}
					next++
				}
			}
			if next != len(values) {
				t.Errorf("stream %d: %d records of %d", i, next, len(values))
			}
		}()
	}
	wg.Wait()
	var metrics bytes.Buffer
	b.WriteMetrics(&metrics)
	if !strings.Contains(metrics.String(), "strata_cold_arena_reused_buffers_total ") || strings.Contains(metrics.String(), "strata_cold_arena_reused_buffers_total 0\n") {
		t.Fatalf("no chunk buffer was recycled:\n%s", grepLines(metrics.String(), "strata_cold_"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
