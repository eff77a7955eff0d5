package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
)

// BenchmarkCleanerIsolation measures what the log cleaner costs writers and
// what it costs itself. One broker holds a compacted topic filled with
// 384 MiB of 1 KiB updates of 2,000 keys, kept dirty by
// min.compaction.lag.ms=1h; a writer to another topic (strata bench produce
// --rate, open loop: 5,000 records/s of 1 KiB, acks=all, flush.policy
// always) runs alone, then the lag is set to 0 and, once the cleaner is
// reading, the same writer runs again while it cleans. It reports both
// produce p99s and their ratio (aim <= 1.2), and the cleaner's MB/s
// (strata_cleaner_bytes_cleaned_total over _seconds_total, throttle
// included) and CPU-s per GB cleaned: the broker's CPU from the change of
// lag to the end of the pass, less what the writer alone cost it over the
// time it ran in that span. A last run of the writer alone, after the
// cleaning, shows how much the machine's noise moves the p99. The cleaner keeps its default throttle, 50 MiB/s
// of reads and writes; STRATA_BENCH_BROKER_FLAGS adds flags to the broker
// ("--cleaner-io-max-bytes-per-second 0", say). Run it with make
// bench-compact.
func BenchmarkCleanerIsolation(b *testing.B) {
	const (
		keys       = 2000
		records    = 384 << 10
		recordSize = 1024
		rate       = "5000"
		duration   = 10 * time.Second
	)
	admin := freeport.Loopback(b)
	flags := append([]string{"--admin-listen", admin, "--cleaner-backoff", "100ms"}, strings.Fields(os.Getenv("STRATA_BENCH_BROKER_FLAGS"))...)
	br := newBroker(b, 1, flags...)
	br.start()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{br.addr})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "dirty", 1, 1, map[string]string{
		"cleanup.policy": "compact", "remote.storage.enable": "false",
		"segment.bytes": "16MiB", "min.compaction.lag.ms": "3600000",
	}); err != nil {
		b.Fatal(err)
	}
	fillKeyed(ctx, b, c, "dirty", records, recordSize, keys)
	if _, err := c.CreateTopic(ctx, "live", 3, 1, map[string]string{"flush.policy": "always", "remote.storage.enable": "false"}); err != nil {
		b.Fatal(err)
	}
	produce := func(d time.Duration) benchSummary {
		out, err := exec.CommandContext(ctx, strataBin(b), "bench", "produce", "--broker", br.addr, "--topic", "live",
			"--rate", rate, "--record-size", strconv.Itoa(recordSize), "--acks", "all", "--duration", d.String(), "--json").Output()
		if err != nil {
			b.Fatalf("bench produce: %v\n%s", err, out)
		}
		var s benchSummary
		if err := json.Unmarshal(out, &s); err != nil {
			b.Fatalf("bench produce output %q: %v", out, err)
		}
		return s
	}
	pids := map[string]int{"broker": br.cmd.Process.Pid}
	produce(3 * time.Second) // warm-up
	if m := scrape(b, admin); m["strata_cleaner_bytes_read_total"] != 0 {
		b.Fatalf("the cleaner read %v bytes before the lag was lifted", m["strata_cleaner_bytes_read_total"])
	}
	aloneCPU := newCPUMeter(b, pids)
	aloneCPU.begin()
	alone := produce(duration)
	aloneCPU.end()

	cleanCPU := newCPUMeter(b, pids)
	cleanCPU.begin()
	if _, err := c.AlterTopicConfig(ctx, "dirty", map[string]string{"min.compaction.lag.ms": "0"}, nil); err != nil {
		b.Fatal(err)
	}
	testutil.WaitFor(b, time.Minute, "the cleaner reading", func() bool {
		return scrape(b, admin)["strata_cleaner_bytes_read_total"] > 0
	})
	during := produce(duration)
	still := scrape(b, admin)["strata_cleaner_passes_total"] == 0
	// The cleaner counts its seconds once it has cleaned the whole log,
	// after the pass's count.
	testutil.WaitFor(b, 10*time.Minute, "the cleaner done with the log", func() bool {
		m := scrape(b, admin)
		return m["strata_cleaner_passes_total"] >= 1 && m["strata_cleaner_seconds_total"] > 0
	})
	cleanCPU.end()
	m := scrape(b, admin)
	// The writer alone once more, as a measure of this machine's noise.
	after := produce(duration)
	for b.Loop() {
		// Measured once above; the loop only satisfies the protocol.
	}
	cleaned := int64(m["strata_cleaner_bytes_cleaned_total"])
	cleanerCPU := cleanCPU.used["broker"] - time.Duration(float64(aloneCPU.used["broker"])*duration.Seconds()/aloneCPU.wall.Seconds())
	mbps := float64(cleaned) / 1e6 / m["strata_cleaner_seconds_total"]
	cpuPerGB := cleanerCPU.Seconds() / (float64(cleaned) / 1e9)
	ratio := during.Latency.P99 / alone.Latency.P99
	b.ReportMetric(alone.Latency.P99, "p99-alone-ms")
	b.ReportMetric(during.Latency.P99, "p99-cleaning-ms")
	b.ReportMetric(ratio, "p99-ratio")
	b.ReportMetric(mbps, "cleaner-MB/s")
	b.ReportMetric(cpuPerGB, "cleaner-CPU-s/GB")
	b.Logf("produce %s records/s of %d B to another topic, acks=all, flush always, for %v:", rate, recordSize, duration)
	b.Logf("  alone:            p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms, %.1f MB/s; broker %.2f cores",
		alone.Latency.P50, alone.Latency.P99, alone.Latency.P999, alone.Latency.Max, alone.MBPerS, aloneCPU.coresOf("broker"))
	b.Logf("  while cleaning:   p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms, %.1f MB/s",
		during.Latency.P50, during.Latency.P99, during.Latency.P999, during.Latency.Max, during.MBPerS)
	b.Logf("  alone, after:     p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms, %.1f MB/s",
		after.Latency.P50, after.Latency.P99, after.Latency.P999, after.Latency.Max, after.MBPerS)
	b.Logf("  cleaning / alone: p50 %.2f, p99 %.2f (aim <= 1.2), p99.9 %.2f; alone after / alone before: p99 %.2f",
		during.Latency.P50/alone.Latency.P50, ratio, during.Latency.P999/alone.Latency.P999, after.Latency.P99/alone.Latency.P99)
	if !still {
		b.Logf("  the pass ended before the writer did: the p99 while cleaning covers part of its run only")
	}
	b.Logf("cleaner: %d passes, %.0f MB cleaned into %.1f MB, %.0f MB read, in %.1f s: %.1f MB/s; broker CPU over the cleaning %.1f s (wall %.1f s), %.1f s of it the cleaner's: %.2f CPU-s/GB cleaned",
		int(m["strata_cleaner_passes_total"]), float64(cleaned)/1e6, m["strata_cleaner_bytes_written_total"]/1e6, m["strata_cleaner_bytes_read_total"]/1e6,
		m["strata_cleaner_seconds_total"], mbps, cleanCPU.used["broker"].Seconds(), cleanCPU.wall.Seconds(), cleanerCPU.Seconds(), cpuPerGB)
}

// fillKeyed writes n records of size bytes to partition 0 of topic, keys
// cycling over keys distinct ones, and waits for every acknowledgement.
func fillKeyed(ctx context.Context, b *testing.B, c *client.Client, topic string, n, size, keys int) {
	b.Helper()
	p := c.NewProducer(client.WithLinger(5 * time.Millisecond))
	defer p.Close()
	var (
		mu     sync.Mutex
		failed error
	)
	value := make([]byte, size)
	for i := range n {
		p.Produce(ctx, &client.Record{Topic: topic, Partition: 0, Key: []byte(fmt.Sprintf("key-%05d", i%keys)), Value: value}, func(_ *client.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && failed == nil {
				failed = err
			}
		})
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if failed != nil {
		b.Fatalf("fill %s: %v", topic, failed)
	}
}
