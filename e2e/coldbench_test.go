package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-log/strata/client"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// BenchmarkColdReplay measures replaying about 1 GB of history that lives
// only in MinIO: with a cold cache (a restarted broker), with a warm cache,
// the GET requests it took, and beside them the same history read from the
// hot tier and MinIO's own throughput for parallel GETs of the same
// objects, all in one run. Run it with make bench-cold.
func BenchmarkColdReplay(b *testing.B) {
	const (
		partitions = 4
		recordSize = 1024
		records    = 1 << 20 // 1 GiB of values
	)
	m := miniotest.Start(b)
	admin := freePort(b)
	br := newBroker(b, 1, s3Flags(m, "--admin-listen", admin, "--tiering-cache-bytes", "2GiB", "--tiering-upload-parallelism", "8")...)
	br.start()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{br.addr})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { c.Close() }()
	cold := map[string]string{"segment.bytes": "64MiB", "segment.ms": "1s", "local.retention.bytes": "1", "local.retention.ms": "-1", "retention.ms": "-1"}
	hot := map[string]string{"segment.bytes": "64MiB", "remote.storage.enable": "false", "retention.ms": "-1"}
	for name, cfg := range map[string]map[string]string{"replay": cold, "hot": hot} {
		if _, err := c.CreateTopic(ctx, name, partitions, 1, cfg); err != nil {
			b.Fatal(err)
		}
		fill(ctx, b, c, name, records, recordSize)
	}
	// Everything of "replay" in the bucket and nothing on local disk.
	waitFor(b, 5*time.Minute, "the history to move to the bucket", func() bool {
		d, err := c.DescribeTopic(ctx, "replay")
		if err != nil {
			return false
		}
		for _, p := range d.Partitions {
			if p.ColdEndOffset != p.HighWatermark || p.LocalStartOffset != p.HighWatermark || p.HighWatermark == 0 {
				return false
			}
		}
		return true
	})
	var stored int64
	var keys []string
	for o := range m.Client.ListObjects(ctx, m.Bucket, minio.ListObjectsOptions{Prefix: "replay/", Recursive: true}) {
		if o.Err != nil {
			b.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
		stored += o.Size
	}

	// A restarted broker has an empty cache.
	c.Close()
	br.stop()
	br.start()
	if c, err = client.New(ctx, []string{br.addr}); err != nil {
		b.Fatal(err)
	}
	before := scrape(b, admin)
	if prof := os.Getenv("STRATA_PROFILE"); prof != "" {
		// A CPU profile of the broker during the cold replay.
		go func() {
			resp, err := http.Get("http://" + admin + "/debug/pprof/profile?seconds=3")
			if err == nil {
				data, _ := io.ReadAll(resp.Body)
				os.WriteFile(prof, data, 0o644)
				resp.Body.Close()
			}
		}()
	}
	coldBytes, coldTook := fetchAll(ctx, b, br.addr, "replay", partitions)
	after := scrape(b, admin)
	warmBytes, warmTook := fetchAll(ctx, b, br.addr, "replay", partitions)
	hotBytes, hotTook := fetchAll(ctx, b, br.addr, "hot", partitions)
	consBytes, consTook := replay(ctx, b, c, "replay", partitions)
	rawBytes, rawTook := rawGets(ctx, b, m, keys, 8)

	gets := after["strata_cold_gets_total"] - before["strata_cold_gets_total"]
	for b.Loop() {
		// The measurements above run once; the loop only satisfies the
		// benchmark protocol.
	}
	// Reported after the loop: its first call resets user metrics.
	mbps := func(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(coldBytes, coldTook), "cold-MB/s")
	b.ReportMetric(mbps(warmBytes, warmTook), "warm-MB/s")
	b.ReportMetric(mbps(hotBytes, hotTook), "hot-MB/s")
	b.ReportMetric(mbps(consBytes, consTook), "consumer-MB/s")
	b.ReportMetric(mbps(rawBytes, rawTook), "minio-GET-MB/s")
	b.ReportMetric(gets/(float64(coldBytes)/1e9), "GETs/GB")
	b.Logf("history: %d records of %d B in %d partitions, %d objects of %d bytes in the bucket", records, recordSize, partitions, len(keys), stored)
	b.Logf("fetch streams of raw batches: cold cache %.0f MB/s (%d bytes in %v, %.0f GETs), warm cache %.0f MB/s, hot tier %.0f MB/s",
		mbps(coldBytes, coldTook), coldBytes, coldTook.Round(time.Millisecond), gets, mbps(warmBytes, warmTook), mbps(hotBytes, hotTook))
	b.Logf("Go consumer decoding every record (warm cache) %.0f MB/s of values; MinIO raw parallel GETs %.0f MB/s",
		mbps(consBytes, consTook), mbps(rawBytes, rawTook))
}

// fill produces n records of size bytes across a topic's partitions.
func fill(ctx context.Context, b testing.TB, c *client.Client, topic string, n, size int) {
	p := c.NewProducer(client.WithAcks(stratav1.Acks_ACKS_LEADER))
	defer p.Close()
	var failed atomic.Int64
	v := payload(0, size)
	for i := range n {
		p.Produce(ctx, &client.Record{Topic: topic, Partition: int32(i % 4), Value: v}, func(_ *client.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
		})
	}
	if err := p.Flush(ctx); err != nil || failed.Load() > 0 {
		b.Fatalf("fill %s: %v, %d failed", topic, err, failed.Load())
	}
}

// replay consumes every partition of topic from the start to the end and
// returns the value bytes read and the time it took.
func replay(ctx context.Context, b testing.TB, c *client.Client, topic string, partitions int32) (int64, time.Duration) {
	k := c.NewConsumer(client.WithStopAtEnd(true))
	defer k.Close()
	for p := range partitions {
		if err := k.Assign(topic, p, client.Earliest()); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	var n int64
	for {
		recs, err := k.Poll(ctx)
		if errors.Is(err, io.EOF) {
			return n, time.Since(start)
		}
		if err != nil {
			b.Fatalf("replay %s: %v", topic, err)
		}
		for _, r := range recs {
			n += int64(len(r.Value))
		}
	}
}

// fetchAll reads every partition of topic from the start to its end with
// raw fetch streams, one per partition, all at once, and returns the batch
// bytes received and the time it took: the broker's serving rate, without a
// client decoding records.
func fetchAll(ctx context.Context, b testing.TB, addr, topic string, partitions int32) (int64, time.Duration) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	fetch := stratav1.NewFetchServiceClient(conn)
	var n atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for p := range partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream, err := fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: topic, Partition: p, MaxBytes: 1 << 20, StopAtEnd: true})
			if err != nil {
				b.Error(err)
				return
			}
			for {
				resp, err := stream.Recv()
				if err == io.EOF {
					return
				}
				if err != nil {
					b.Error(err)
					return
				}
				n.Add(int64(len(resp.Batches)))
			}
		}()
	}
	wg.Wait()
	return n.Load(), time.Since(start)
}

// rawGets reads every object with parallel GETs through minio-go: what
// MinIO itself delivers on this machine.
func rawGets(ctx context.Context, b testing.TB, m *miniotest.Server, keys []string, workers int) (int64, time.Duration) {
	var n atomic.Int64
	work := make(chan string)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for key := range work {
				obj, err := m.Client.GetObject(ctx, m.Bucket, key, minio.GetObjectOptions{})
				if err != nil {
					b.Error(err)
					return
				}
				for {
					k, err := obj.Read(buf)
					n.Add(int64(k))
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
				obj.Close()
			}
		}()
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	return n.Load(), time.Since(start)
}
