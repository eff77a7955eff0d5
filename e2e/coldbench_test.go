package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
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
		small      = 1 << 18 // 256 MiB of values, in 1 MiB segments
	)
	m := miniotest.Start(b)
	admin := freePort(b)
	flags := []string{"--admin-listen", admin, "--admin-pprof", "--tiering-cache-bytes", "2GiB", "--tiering-upload-parallelism", "8"}
	br := newBroker(b, 1, s3Flags(m, flags...)...)
	br.start()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{br.addr})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { c.Close() }()
	cold := func(segment string) map[string]string {
		return map[string]string{"segment.bytes": segment, "segment.ms": "1s", "local.retention.bytes": "1", "local.retention.ms": "-1", "retention.ms": "-1"}
	}
	hot := map[string]string{"segment.bytes": "64MiB", "remote.storage.enable": "false", "retention.ms": "-1"}
	topics := []struct {
		name    string
		cfg     map[string]string
		records int
	}{{"replay", cold("64MiB"), records}, {"small", cold("1MiB"), small}, {"hot", hot, records}}
	for _, t := range topics {
		if _, err := c.CreateTopic(ctx, t.name, partitions, 1, t.cfg); err != nil {
			b.Fatal(err)
		}
		fill(ctx, b, c, t.name, t.records, recordSize)
	}
	// Everything of "replay" and "small" in the bucket and nothing on
	// local disk.
	for _, topic := range []string{"replay", "small"} {
		waitFor(b, 5*time.Minute, "the history of "+topic+" to move to the bucket", func() bool {
			d, err := c.DescribeTopic(ctx, topic)
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
	}
	var stored int64
	var keys []string
	smallObjects := 0
	for o := range m.Client.ListObjects(ctx, m.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			b.Fatal(o.Err)
		}
		switch {
		case strings.HasPrefix(o.Key, "replay/"):
			keys = append(keys, o.Key)
			stored += o.Size
		case strings.HasPrefix(o.Key, "small/"):
			smallObjects++
		}
	}

	// A restarted broker has an empty cache.
	c.Close()
	br.stop()
	br.start()
	if c, err = client.New(ctx, []string{br.addr}); err != nil {
		b.Fatal(err)
	}
	// With STRATA_PROFILE=prefix, CPU profiles of the broker during the
	// cold and the warm replay go to prefix-cold.prof and prefix-warm.prof.
	prof := os.Getenv("STRATA_PROFILE")
	profiled := func(phase string, run func() (int64, time.Duration)) (int64, time.Duration) {
		if prof == "" {
			return run()
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := http.Get("http://" + admin + "/debug/pprof/profile?seconds=3")
			if err != nil {
				b.Error(err)
				return
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if err := os.WriteFile(prof+"-"+phase+".prof", data, 0o644); err != nil {
				b.Error(err)
			}
		}()
		n, took := run()
		<-done
		return n, took
	}
	before := scrape(b, admin)
	var hotBytes int64
	var hotTook time.Duration
	coldBytes, coldTook := profiled("cold", func() (int64, time.Duration) { return fetchAll(ctx, b, br.addr, "replay", partitions) })
	after := scrape(b, admin)
	smallBytes, smallTook := fetchAll(ctx, b, br.addr, "small", partitions)
	warmBytes, warmTook := profiled("warm", func() (int64, time.Duration) { return fetchAll(ctx, b, br.addr, "replay", partitions) })
	// Runs from memory vary by ±30% here from one to the next: the warm
	// and hot figures are the best of three, alternating.
	for range 2 {
		if n, took := fetchAll(ctx, b, br.addr, "hot", partitions); hotTook == 0 || took < hotTook {
			hotBytes, hotTook = n, took
		}
		if n, took := fetchAll(ctx, b, br.addr, "replay", partitions); took < warmTook {
			warmBytes, warmTook = n, took
		}
	}
	if n, took := fetchAll(ctx, b, br.addr, "hot", partitions); took < hotTook {
		hotBytes, hotTook = n, took
	}
	consBytes, consTook := replay(ctx, b, c, "replay", partitions)
	rawBytes, rawTook := rawGets(ctx, b, m, keys, 8)

	gets := after["strata_cold_gets_total"] - before["strata_cold_gets_total"]
	for b.Loop() {
		// The measurements above run once; the loop only satisfies the
		// benchmark protocol.
	}
	// Reported after the loop: its first call resets user metrics.
	mbps := func(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }
	coldRate, smallRate, warmRate, hotRate := mbps(coldBytes, coldTook), mbps(smallBytes, smallTook), mbps(warmBytes, warmTook), mbps(hotBytes, hotTook)
	b.ReportMetric(coldRate, "cold-MB/s")
	b.ReportMetric(smallRate, "cold-1MiB-segments-MB/s")
	b.ReportMetric(warmRate, "warm-MB/s")
	b.ReportMetric(hotRate, "hot-MB/s")
	b.ReportMetric(mbps(consBytes, consTook), "consumer-MB/s")
	b.ReportMetric(mbps(rawBytes, rawTook), "minio-GET-MB/s")
	b.ReportMetric(gets/(float64(coldBytes)/1e9), "GETs/GB")
	b.Logf("history: %d records of %d B in %d partitions, %d objects of %d bytes in the bucket; %d records in %d objects of 1 MiB segments",
		records, recordSize, partitions, len(keys), stored, small, smallObjects)
	b.Logf("fetch streams of raw batches: cold cache %.0f MB/s (%d bytes in %v, %.0f GETs), warm cache %.0f MB/s, hot tier %.0f MB/s",
		coldRate, coldBytes, coldTook.Round(time.Millisecond), gets, warmRate, hotRate)
	b.Logf("cold cache, 1 MiB segments: %.0f MB/s (%d bytes in %v)", smallRate, smallBytes, smallTook.Round(time.Millisecond))
	b.Logf("ratios: cold/hot %.2f (aim >= 0.9), warm/hot %.2f (aim >= 1.0), 1 MiB/64 MiB segments cold %.2f (aim >= 0.8), GETs/GB %.0f (aim <= 300)",
		coldRate/hotRate, warmRate/hotRate, smallRate/coldRate, gets/(float64(coldBytes)/1e9))
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
