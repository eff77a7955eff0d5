package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// BenchmarkColdReplayKafka replays the same history, 512 MiB of 1 KiB
// values in four partitions that live only in MinIO, through both front
// ends with `strata bench consume`: over gRPC (Strata's consumer) and
// through the Kafka listener (--kafka: franz-go's kgo), each with a cold
// cache (the broker restarted just before) and then a warm one. Both
// clients decode every record and check batch CRCs. It reports each
// replay's MB/s of keys and values and the CPU seconds per GB of them
// that the broker and the client spent (the broker's from /proc, the
// client's from its rusage once it exits), and the chunk GETs it sent to
// MinIO. Run it with make
// bench-cold-kafka; STRATA_BENCH_BROKER_FLAGS adds broker flags.
func BenchmarkColdReplayKafka(b *testing.B) {
	const (
		partitions = 4
		recordSize = 1024
		records    = 1 << 19 // 512 MiB of values
	)
	m := miniotest.Start(b)
	admin, kafkaAddr := freeport.Loopback(b), freeport.Loopback(b)
	br := startBenchBroker(b, m, "--admin-listen", admin, "--kafka-listen", kafkaAddr, "--tiering-cache-bytes", "2GiB", "--tiering-upload-parallelism", "8")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{br.addr})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, "replay", partitions, 1, coldOnlyFull("64MiB")); err != nil {
		b.Fatal(err)
	}
	fill(ctx, b, c, "replay", records, recordSize)
	sealTails(ctx, b, c, "replay")
	waitOnlyInBucket(ctx, b, c, "replay")
	c.Close()

	type result struct {
		name       string
		mbps       float64
		bytes      int64
		brokerCPU  time.Duration
		clientCPU  time.Duration
		elapsedSec float64
		chunkGets  float64 // GETs of chunks from MinIO, read-ahead's included
	}
	consume := func(name string, args ...string) result {
		b.Helper()
		gets := scrape(b, admin)["strata_cold_chunk_gets_total"]
		brokerBefore, err := cpuTime(br.cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, strataBin(b), append([]string{"bench", "consume", "--broker", br.addr, "--topic", "replay", "--json"}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("bench consume %v: %v\n%s%s", args, err, out, stderr.String())
		}
		brokerAfter, err := cpuTime(br.cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		var s struct {
			Records int64   `json:"records"`
			Bytes   int64   `json:"bytes"`
			Elapsed float64 `json:"elapsed_s"`
			MBPerS  float64 `json:"mb_per_s"`
			Errors  int64   `json:"errors"`
		}
		if err := json.Unmarshal(out, &s); err != nil {
			b.Fatalf("bench consume output %q: %v", out, err)
		}
		if s.Records != records || s.Errors != 0 {
			b.Fatalf("%s: bench consume read %d records with %d errors, want %d", name, s.Records, s.Errors, records)
		}
		return result{name: name, mbps: s.MBPerS, bytes: s.Bytes, elapsedSec: s.Elapsed,
			brokerCPU: brokerAfter - brokerBefore, clientCPU: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(),
			chunkGets: scrape(b, admin)["strata_cold_chunk_gets_total"] - gets}
	}
	var results []result
	for _, fe := range []struct {
		name string
		args []string
	}{{"grpc", nil}, {"kafka", []string{"--kafka", kafkaAddr}}} {
		// A restarted broker has an empty cache.
		br.stop()
		br.start()
		results = append(results, consume(fe.name+"-cold", fe.args...), consume(fe.name+"-warm", fe.args...))
	}
	for b.Loop() {
		// Measured once above; the loop only satisfies the protocol.
	}
	perGB := func(d time.Duration, n int64) float64 { return d.Seconds() / (float64(n) / 1e9) }
	b.Logf("replay of %d records of %d B in %d partitions, only in MinIO, with strata bench consume (both clients decode every record):", records, recordSize, partitions)
	b.Logf("  %-11s %8s %10s %18s %18s %12s", "", "MB/s", "seconds", "broker CPU-s/GB", "client CPU-s/GB", "chunk GETs")
	for _, r := range results {
		b.ReportMetric(r.mbps, r.name+"-MB/s")
		b.ReportMetric(perGB(r.brokerCPU, r.bytes), r.name+"-broker-CPU-s/GB")
		b.ReportMetric(perGB(r.clientCPU, r.bytes), r.name+"-client-CPU-s/GB")
		b.Logf("  %-11s %8.0f %10.2f %18.2f %18.2f %12.0f", r.name, r.mbps, r.elapsedSec, perGB(r.brokerCPU, r.bytes), perGB(r.clientCPU, r.bytes), r.chunkGets)
	}
	b.Logf("  kafka/grpc MB/s: cold %.2f, warm %.2f", results[2].mbps/results[0].mbps, results[3].mbps/results[1].mbps)
}
