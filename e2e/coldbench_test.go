package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// BenchmarkColdReplay measures replaying about 1 GB of history that lives
// only in MinIO: with a cold cache (a restarted broker), with a warm cache,
// the GET requests it took, and beside them the same history read from the
// hot tier and MinIO's own throughput for parallel GETs of the same
// objects, all in one run. The cache holds all of it (2 GiB), so that the
// warm replay is one; STRATA_BENCH_BROKER_FLAGS adds broker flags
// ("--tiering-cache-bytes 256MiB" measures the default cache). Run it
// with make bench-cold.
//
// It also reports the CPU time each GB costs the broker, MinIO and the
// reading client, cold and hot: where all three share the machine's
// cores, that is about the cold/hot ratio the CPU allows.
func BenchmarkColdReplay(b *testing.B) {
	const (
		partitions = 4
		recordSize = 1024
		records    = 1 << 20 // 1 GiB of values
		small      = 1 << 18 // 256 MiB of values, in 1 MiB segments
	)
	m := miniotest.Start(b)
	admin := freeport.Loopback(b)
	br := startBenchBroker(b, m, "--admin-listen", admin, "--admin-pprof", "--tiering-cache-bytes", "2GiB", "--tiering-upload-parallelism", "8")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{br.addr})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { c.Close() }()
	hot := map[string]string{"segment.bytes": "64MiB", "remote.storage.enable": "false", "retention.ms": "-1"}
	topics := []struct {
		name    string
		cfg     map[string]string
		records int
	}{{"replay", coldOnlyFull("64MiB"), records}, {"small", coldOnlyFull("1MiB"), small}, {"hot", hot, records}}
	for _, t := range topics {
		if _, err := c.CreateTopic(ctx, t.name, partitions, 1, t.cfg); err != nil {
			b.Fatal(err)
		}
		fill(ctx, b, c, t.name, t.records, recordSize)
	}
	sealTails(ctx, b, c, "replay", "small")
	waitOnlyInBucket(ctx, b, c, "replay")
	waitOnlyInBucket(ctx, b, c, "small")
	var stored int64
	var keys, smallKeys []string
	for o := range m.Client.ListObjects(ctx, m.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			b.Fatal(o.Err)
		}
		switch {
		case strings.HasPrefix(o.Key, "replay/"):
			keys = append(keys, o.Key)
			stored += o.Size
		case strings.HasPrefix(o.Key, "small/"):
			smallKeys = append(smallKeys, o.Key)
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
	// cold, the 1 MiB segments' and the warm replay go to
	// prefix-cold.prof, prefix-small.prof and prefix-warm.prof (the first
	// seconds of each), and what it allocated in the same seconds to
	// prefix-cold-allocs.prof and so on (go tool pprof -sample_index
	// alloc_space).
	prof := os.Getenv("STRATA_PROFILE")
	profiled := func(phase string, seconds int, run func() (int64, time.Duration)) (int64, time.Duration) {
		if prof == "" {
			return run()
		}
		var wg sync.WaitGroup
		for kind, file := range map[string]string{"profile": ".prof", "allocs": "-allocs.prof"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", admin, kind, seconds))
				if err != nil {
					b.Error(err)
					return
				}
				defer resp.Body.Close()
				data, _ := io.ReadAll(resp.Body)
				if err := os.WriteFile(prof+"-"+phase+file, data, 0o644); err != nil {
					b.Error(err)
				}
			}()
		}
		n, took := run()
		wg.Wait()
		return n, took
	}
	// The CPU time each GB costs, cold and hot, of each process: the broker,
	// MinIO, and this one (the fetch streams' client).
	procs := map[string]int{"broker": br.cmd.Process.Pid, "MinIO": m.Pid(), "consumer": os.Getpid()}
	coldCPU, hotCPU := newCPUMeter(b, procs), newCPUMeter(b, procs)
	before := scrape(b, admin)
	var hotBytes, hotBytesAll int64
	var hotTook time.Duration
	coldCPU.begin()
	coldBytes, coldTook := profiled("cold", 4, func() (int64, time.Duration) { return fetchAll(ctx, b, br.addr, "replay", partitions) })
	coldCPU.end()
	after := scrape(b, admin)
	hotRun := func() (int64, time.Duration) {
		hotCPU.begin()
		n, took := fetchAll(ctx, b, br.addr, "hot", partitions)
		hotCPU.end()
		hotBytesAll += n
		return n, took
	}
	smallBytes, smallTook := profiled("small", 1, func() (int64, time.Duration) { return fetchAll(ctx, b, br.addr, "small", partitions) })
	warmBytes, warmTook := profiled("warm", 1, func() (int64, time.Duration) { return fetchAll(ctx, b, br.addr, "replay", partitions) })
	// Runs from memory vary by ±30% here from one to the next: the warm
	// and hot figures are the best of three, alternating.
	for range 2 {
		if n, took := hotRun(); hotTook == 0 || took < hotTook {
			hotBytes, hotTook = n, took
		}
		if n, took := fetchAll(ctx, b, br.addr, "replay", partitions); took < warmTook {
			warmBytes, warmTook = n, took
		}
	}
	if n, took := hotRun(); took < hotTook {
		hotBytes, hotTook = n, took
	}
	consBytes, consTook := replay(ctx, b, c, "replay", partitions)
	rawBytes, rawTook := rawGets(ctx, b, m, keys, 8)
	// The store's own rate for the 1 MiB objects, as many GETs at once as
	// the cold reader may send (tiering.cold_read_max_gets).
	rawSmallBytes, rawSmallTook := rawGets(ctx, b, m, smallKeys, 16)

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
	b.ReportMetric(mbps(rawSmallBytes, rawSmallTook), "minio-GET-1MiB-objects-MB/s")
	b.ReportMetric(gets/(float64(coldBytes)/1e9), "GETs/GB")
	b.ReportMetric(coldCPU.perGB("", coldBytes), "cold-CPU-s/GB")
	b.ReportMetric(hotCPU.perGB("", hotBytesAll), "hot-CPU-s/GB")
	brokerCold, brokerHot := coldCPU.perGB("broker", coldBytes), hotCPU.perGB("broker", hotBytesAll)
	heapPerGB := (after["go_memstats_alloc_bytes_total"] - before["go_memstats_alloc_bytes_total"]) / (float64(coldBytes) / 1e9)
	b.ReportMetric(brokerCold, "broker-cold-CPU-s/GB")
	b.ReportMetric(brokerHot, "broker-hot-CPU-s/GB")
	b.ReportMetric(heapPerGB, "broker-cold-heap-B/GB")
	b.Logf("history: %d records of %d B in %d partitions, %d objects of %d bytes in the bucket; %d records in %d objects of 1 MiB segments",
		records, recordSize, partitions, len(keys), stored, small, len(smallKeys))
	b.Logf("fetch streams of raw batches: cold cache %.0f MB/s (%d bytes in %v, %.0f GETs; %.0f reads from the cache, %.0f waited for a GET), warm cache %.0f MB/s, hot tier %.0f MB/s",
		coldRate, coldBytes, coldTook.Round(time.Millisecond), gets,
		after["strata_cold_chunk_hits_total"]-before["strata_cold_chunk_hits_total"],
		after["strata_cold_chunk_misses_total"]-before["strata_cold_chunk_misses_total"], warmRate, hotRate)
	b.Logf("cold cache, 1 MiB segments: %.0f MB/s (%d bytes in %v)", smallRate, smallBytes, smallTook.Round(time.Millisecond))
	b.Logf("ratios: cold/hot %.2f (aim >= 0.9), warm/hot %.2f (aim >= 1.0), 1 MiB/64 MiB segments cold %.2f (aim >= 0.8), GETs/GB %.0f (aim <= 300)",
		coldRate/hotRate, warmRate/hotRate, smallRate/coldRate, gets/(float64(coldBytes)/1e9))
	b.Logf("broker: CPU-s per GB cold %.2f, hot %.2f, cold/hot %.2f (aim <= 2); heap allocated per cold GB %.0f MB, %.1f%% of the bytes replayed (aim <= 5%%)",
		brokerCold, brokerHot, brokerCold/brokerHot, heapPerGB/1e6, heapPerGB/1e9*100)
	b.Logf("CPU seconds per GB fetched: cold cache %.2f (broker %.2f, MinIO %.2f, consumer %.2f) with %.2f cores busy; hot tier %.2f (broker %.2f, consumer %.2f) with %.2f cores busy. With the same cores busy in both phases, the CPU alone gives cold/hot %.2f; were the broker's cold reads free, MinIO's CPU alone would cap it at %.2f",
		coldCPU.perGB("", coldBytes), coldCPU.perGB("broker", coldBytes), coldCPU.perGB("MinIO", coldBytes), coldCPU.perGB("consumer", coldBytes), coldCPU.cores(),
		hotCPU.perGB("", hotBytesAll), hotCPU.perGB("broker", hotBytesAll), hotCPU.perGB("consumer", hotBytesAll), hotCPU.cores(),
		hotCPU.perGB("", hotBytesAll)/coldCPU.perGB("", coldBytes),
		hotCPU.perGB("", hotBytesAll)/(hotCPU.perGB("", hotBytesAll)+coldCPU.perGB("MinIO", coldBytes)))
	b.Logf("Go consumer decoding every record (warm cache) %.0f MB/s of values; MinIO raw parallel GETs %.0f MB/s of the 64 MiB objects, %.0f MB/s of the 1 MiB ones",
		mbps(consBytes, consTook), mbps(rawBytes, rawTook), mbps(rawSmallBytes, rawSmallTook))
}

// coldOnly is the configuration of a topic whose history leaves local
// disk as soon as it is in the bucket, in segments of the size given.
func coldOnly(segment string) map[string]string {
	return map[string]string{"segment.bytes": segment, "segment.ms": "1s", "local.retention.bytes": "1", "local.retention.ms": "-1", "retention.ms": "-1"}
}

// coldOnlyFull is coldOnly for a fill that must land in full segments
// whatever its rate: segments roll on size alone (segment.ms is an hour)
// until sealTails shortens segment.ms. With segment.ms=1s from the start,
// a fill slowed by a loaded machine rolls segments early, and the same GB
// lands in two or three times the objects, which moves every per-object
// cost of a replay.
func coldOnlyFull(segment string) map[string]string {
	cfg := coldOnly(segment)
	cfg["segment.ms"] = "1h"
	return cfg
}

// sealTails sets segment.ms=1s on topics created with coldOnlyFull once
// they are filled, so their last, partial segments roll and go to the
// bucket too.
func sealTails(ctx context.Context, b testing.TB, c *client.Client, topics ...string) {
	b.Helper()
	for _, t := range topics {
		if _, err := c.AlterTopicConfig(ctx, t, map[string]string{"segment.ms": "1s"}, nil); err != nil {
			b.Fatalf("seal the tails of %s: %v", t, err)
		}
	}
}

// waitOnlyInBucket waits until every partition of topic has records and
// all of them are in the bucket and none on local disk.
func waitOnlyInBucket(ctx context.Context, b testing.TB, c *client.Client, topic string) {
	b.Helper()
	testutil.WaitFor(b, 5*time.Minute, "the history of "+topic+" only in the bucket", func() bool {
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
	var n atomic.Int64
	took := fetchAllCounting(ctx, b, addr, topic, partitions, &n)
	return n.Load(), took
}

// fetchAllCounting is fetchAll adding the bytes to n as they come.
func fetchAllCounting(ctx context.Context, b testing.TB, addr, topic string, partitions int32, n *atomic.Int64) time.Duration {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	fetch := stratav1.NewFetchServiceClient(conn)
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
	return time.Since(start)
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

// startBenchBroker starts a broker on MinIO m with flags, then those in
// STRATA_BENCH_BROKER_FLAGS, which a benchmark run may add.
func startBenchBroker(b *testing.B, m *miniotest.Server, flags ...string) *brokerProc {
	flags = append(flags, strings.Fields(os.Getenv("STRATA_BENCH_BROKER_FLAGS"))...)
	br := newBroker(b, 1, s3Flags(m, flags...)...)
	br.start()
	return br
}

// BenchmarkColdReplayIsolation measures what a full-speed cold replay
// costs writers: the produce latency of another topic at a fixed rate
// (open loop, strata bench produce --rate: 50 MB/s of 1 KiB records,
// acks=all, flush.policy=always, the first second of each run left out as
// warm-up) alone and while raw fetch streams replay
// 1 GB of history from MinIO in a loop through the default 256 MiB cache,
// so that nearly every read is a GET; and the replay's own rate alone and
// under the writes, with the broker's CPU in each phase. The written topic
// keeps its segments local (remote.storage.enable=false): its own uploads
// of 128 MiB segments to MinIO, on this machine's one disk, put its p99 at
// 250-350 ms alone, which would hide what the replay costs.
// STRATA_BENCH_BROKER_FLAGS adds flags to the broker's command line
// (STRATA_BENCH_BROKER_FLAGS="--tiering-cold-read-bytes-per-sec 50MiB",
// say), so the same run measures a limit. With STRATA_PROFILE=prefix, CPU
// profiles and execution traces of the broker in the first seconds of the
// replay alone and of the produce during it go to prefix-*.prof and
// prefix-*.trace. Run it with make bench-cold-isolation.
func BenchmarkColdReplayIsolation(b *testing.B) {
	const (
		partitions = 4
		recordSize = 1024
		records    = 1 << 20
		rate       = "51200" // records/s: 50 MiB/s
		duration   = "10s"
		// Each run is a new client process: its first records wait for its
		// connections and the broker's first writes after an idle spell,
		// which decided the p99 of a 10 s run (1% is its first 100 ms of
		// records) and is not what the replay costs the writers.
		warmup = "1s"
	)
	m := miniotest.Start(b)
	admin := freeport.Loopback(b)
	br := startBenchBroker(b, m, "--admin-listen", admin, "--admin-pprof", "--tiering-upload-parallelism", "8")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{br.addr})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "history", partitions, 1, coldOnly("64MiB")); err != nil {
		b.Fatal(err)
	}
	fill(ctx, b, c, "history", records, recordSize)
	waitOnlyInBucket(ctx, b, c, "history")
	if _, err := c.CreateTopic(ctx, "live", 3, 1, map[string]string{"flush.policy": "always", "remote.storage.enable": "false"}); err != nil {
		b.Fatal(err)
	}
	// The CPU of the broker, of MinIO and of this process (the replay's
	// fetch streams); the writers' client is a process of its own.
	broker := map[string]int{"broker": br.cmd.Process.Pid, "MinIO": m.Pid(), "consumer": os.Getpid()}
	produce := func(d string) benchSummary {
		out, err := exec.CommandContext(ctx, strataBin(b), "bench", "produce", "--broker", br.addr, "--topic", "live",
			"--rate", rate, "--record-size", strconv.Itoa(recordSize), "--acks", "all", "--duration", d, "--warmup", warmup, "--json").Output()
		if err != nil {
			b.Fatalf("bench produce: %v\n%s", err, out)
		}
		var s benchSummary
		if err := json.Unmarshal(out, &s); err != nil {
			b.Fatalf("bench produce output %q: %v", out, err)
		}
		return s
	}
	prof := os.Getenv("STRATA_PROFILE")
	profile := func(phase string) (wait func()) {
		if prof == "" {
			return func() {}
		}
		var wg sync.WaitGroup
		for _, p := range []struct{ path, ext string }{{"profile?seconds=5", "prof"}, {"trace?seconds=2", "trace"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/%s", admin, p.path))
				if err != nil {
					b.Error(err)
					return
				}
				defer resp.Body.Close()
				data, _ := io.ReadAll(resp.Body)
				if err := os.WriteFile(prof+"-"+phase+"."+p.ext, data, 0o644); err != nil {
					b.Error(err)
				}
			}()
		}
		return wg.Wait
	}
	// replaying reads history in a loop until stop is closed, adding the
	// bytes to n.
	replaying := func(n *atomic.Int64) (stop func()) {
		done := make(chan struct{})
		var replays sync.WaitGroup
		replays.Add(1)
		go func() {
			defer replays.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				fetchAllCounting(ctx, b, br.addr, "history", partitions, n)
			}
		}()
		return func() { close(done); replays.Wait() }
	}
	produce("3s") // warm-up
	aloneCPU := newCPUMeter(b, broker)
	aloneCPU.begin()
	m0 := scrape(b, admin)
	alone := produce(duration)
	m1 := scrape(b, admin)
	aloneCPU.end()

	// The replay alone, for as long as a produce run.
	var replayedAlone atomic.Int64
	replayCPU := newCPUMeter(b, broker)
	replayCPU.begin()
	start := time.Now()
	stop := replaying(&replayedAlone)
	profiled := profile("replay")
	d, _ := time.ParseDuration(duration)
	time.Sleep(d) // a measurement period, not a wait for a condition
	replayAlone := float64(replayedAlone.Load()) / 1e6 / time.Since(start).Seconds()
	stop()
	replayCPU.end()
	profiled()

	// Both: the replay is running before the writes begin.
	var replayed atomic.Int64
	stop = replaying(&replayed)
	testutil.WaitFor(b, time.Minute, "the replay to read", func() bool { return replayed.Load() > 64<<20 })
	bothCPU := newCPUMeter(b, broker)
	profiled = profile("during")
	bothCPU.begin()
	from, start := replayed.Load(), time.Now()
	m2 := scrape(b, admin)
	during := produce(duration)
	m3 := scrape(b, admin)
	replayDuring := float64(replayed.Load()-from) / 1e6 / time.Since(start).Seconds()
	bothCPU.end()
	stop()
	profiled()

	for b.Loop() {
		// Measured once above; the loop only satisfies the protocol.
	}
	ratio := during.Latency.P99 / alone.Latency.P99
	b.ReportMetric(alone.Latency.P99, "p99-alone-ms")
	b.ReportMetric(during.Latency.P99, "p99-during-replay-ms")
	b.ReportMetric(ratio, "p99-ratio")
	b.ReportMetric(replayAlone, "replay-alone-MB/s")
	b.ReportMetric(replayDuring, "replay-during-MB/s")
	b.Logf("produce %s records/s of %d B, acks=all, flush always, for %s (latency after a %s warm-up):", rate, recordSize, duration, warmup)
	b.Logf("  alone:          p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms, %.1f MB/s; broker %.2f cores, MinIO %.2f, replay client %.2f",
		alone.Latency.P50, alone.Latency.P99, alone.Latency.P999, alone.Latency.Max, alone.MBPerS, aloneCPU.coresOf("broker"), aloneCPU.coresOf("MinIO"), aloneCPU.coresOf("consumer"))
	b.Logf("  during replay:  p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms, %.1f MB/s; broker %.2f cores, MinIO %.2f, replay client %.2f",
		during.Latency.P50, during.Latency.P99, during.Latency.P999, during.Latency.Max, during.MBPerS, bothCPU.coresOf("broker"), bothCPU.coresOf("MinIO"), bothCPU.coresOf("consumer"))
	b.Logf("  during / alone: p50 %.2f, p99 %.2f (aim <= 1.5), p99.9 %.2f",
		during.Latency.P50/alone.Latency.P50, ratio, during.Latency.P999/alone.Latency.P999)
	aloneMean, aloneP99 := produceLatency(m0, m1, "live")
	duringMean, duringP99 := produceLatency(m2, m3, "live")
	yielded := `strata_cold_read_throttle_seconds_total{limit="writers"}`
	b.Logf("  in the broker (strata_produce_latency_seconds): alone mean %.2f ms, p99 <= %.4g ms; during replay mean %.2f ms, p99 <= %.4g ms; cold GETs held back for the writers %.1f s in all",
		aloneMean, aloneP99, duringMean, duringP99, m3[yielded]-m2[yielded])
	b.Logf("replay from the bucket: alone %.0f MB/s (broker %.2f cores, %.2f CPU-s/GB; MinIO %.2f CPU-s/GB, replay client %.2f), under the writes %.0f MB/s (%.2f of alone)",
		replayAlone, replayCPU.coresOf("broker"), replayCPU.perGB("broker", replayedAlone.Load()), replayCPU.perGB("MinIO", replayedAlone.Load()),
		replayCPU.perGB("consumer", replayedAlone.Load()), replayDuring, replayDuring/replayAlone)
	b.ReportMetric(bothCPU.coresOf("broker"), "broker-cores-during")
}

// produceLatency is the mean produce latency of topic in the broker
// between two scrapes, and the upper bound of the histogram bucket its 99th
// percentile falls in, both in milliseconds.
func produceLatency(before, after map[string]float64, topic string) (mean, p99 float64) {
	const name = "strata_produce_latency_seconds"
	sel := `topic="` + topic + `"`
	count := after[name+"_count{"+sel+"}"] - before[name+"_count{"+sel+"}"]
	if count == 0 {
		return 0, 0
	}
	mean = (after[name+"_sum{"+sel+"}"] - before[name+"_sum{"+sel+"}"]) / count * 1e3
	p99 = -1 // beyond the last bound
	var bounds []float64
	for k := range after {
		if rest, ok := strings.CutPrefix(k, name+"_bucket{"+sel+`,le="`); ok {
			if le, err := strconv.ParseFloat(strings.TrimSuffix(rest, `"}`), 64); err == nil {
				bounds = append(bounds, le)
			}
		}
	}
	slices.Sort(bounds)
	for _, le := range bounds {
		k := fmt.Sprintf(`%s_bucket{%s,le="%s"}`, name, sel, strconv.FormatFloat(le, 'g', -1, 64))
		if after[k]-before[k] >= 0.99*count {
			return mean, le * 1e3
		}
	}
	return mean, p99
}

// benchSummary is what strata bench produce --json prints, the part read
// here.
type benchSummary struct {
	MBPerS  float64 `json:"mb_per_s"`
	Latency struct {
		P50  float64 `json:"p50"`
		P99  float64 `json:"p99"`
		P999 float64 `json:"p99_9"`
		Max  float64 `json:"max"`
	} `json:"latency_ms"`
}
