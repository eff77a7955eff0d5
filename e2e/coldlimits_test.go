package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// TestColdReadLimitsApplyLive: remote.read.bytes.per.sec bounds the cold
// reads of its topic from the next GET after an alter, holds back no other
// topic, and lifting it frees the topic again; the broker's
// tiering.cold_read_bytes_per_sec, changed in its config file, applies to
// every topic after a SIGHUP, and a config that does not load changes
// nothing. The broker's cache is a few chunks, so every replay reads the
// bucket.
func TestColdReadLimitsApplyLive(t *testing.T) {
	m := miniotest.Start(t)
	admin := freeport.Loopback(t)
	cfgFile := filepath.Join(t.TempDir(), "strata.yaml")
	writeConfig := func(text string) {
		t.Helper()
		if err := os.WriteFile(cfgFile, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig("tiering:\n  cold_read_bytes_per_sec: 0\n")
	b := newBroker(t, 1, s3Flags(m, "--config", cfgFile, "--admin-listen", admin, "--tiering-chunk-bytes", "64KiB", "--tiering-cache-bytes", "256KiB")...)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const records, size = 2048, 1024 // 2 MiB of values a topic
	for _, topic := range []string{"paced", "free"} {
		if _, err := c.CreateTopic(ctx, topic, 1, 1, coldOnly("64KiB")); err != nil {
			t.Fatal(err)
		}
		p := newTieredProducer(c)
		tp := &tieredProducer{acked: map[int64]int64{}}
		tp.produce(ctx, p, topic, 0, records, size, func(int64) time.Time { return time.Now() })
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		p.Close()
		waitOnlyInBucket(ctx, t, c, topic)
	}
	const topicThrottle = `strata_cold_read_throttle_seconds_total{limit="topic"}`
	replayAll := func(topic string) time.Duration {
		t.Helper()
		n, took := replay(ctx, t, c, topic, 1)
		if n != records*size {
			t.Fatalf("replay of %s: %d bytes of values, want %d", topic, n, records*size)
		}
		return took
	}
	replayAll("free")
	if s := scrape(t, admin)[topicThrottle]; s != 0 {
		t.Fatalf("without topic limits, cold reads were held back %vs", s)
	}

	// 512 KiB/s: 2 MiB of values (and batch headers) take at least 3 s
	// after the first second's worth.
	if _, err := c.AlterTopicConfig(ctx, "paced", map[string]string{"remote.read.bytes.per.sec": "512KiB"}, nil); err != nil {
		t.Fatal(err)
	}
	if took := replayAll("paced"); took < 2500*time.Millisecond {
		t.Fatalf("replay of 2 MiB at 512 KiB/s took %v", took)
	}
	held := scrape(t, admin)[topicThrottle]
	if held < 2 {
		t.Fatalf("held back %vs by the topic's limit", held)
	}
	// Another topic is not held back by it.
	replayAll("free")
	if s := scrape(t, admin)[topicThrottle]; s != held {
		t.Fatalf("a replay of another topic was held back %vs", s-held)
	}
	// Lifted, the topic reads freely again.
	if _, err := c.AlterTopicConfig(ctx, "paced", nil, []string{"remote.read.bytes.per.sec"}); err != nil {
		t.Fatal(err)
	}
	replayAll("paced")
	if s := scrape(t, admin)[topicThrottle]; s != held {
		t.Fatalf("after the limit was lifted, cold reads were held back %vs more", s-held)
	}

	// The broker's limit, from its config file on SIGHUP, holds back
	// every topic; a setting that needs a restart is named as such.
	const brokerThrottle = `strata_cold_read_throttle_seconds_total{limit="broker"}`
	if s := scrape(t, admin)[brokerThrottle]; s != 0 {
		t.Fatalf("without a broker limit, cold reads were held back %vs", s)
	}
	sighup := func(logged string) {
		t.Helper()
		before := strings.Count(b.log(), logged)
		if err := b.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 10*time.Second, "the broker to log "+logged, func() bool { return strings.Count(b.log(), logged) > before })
	}
	writeConfig("tiering:\n  cold_read_bytes_per_sec: 512KiB\n  upload_parallelism: 2\n")
	sighup("SIGHUP: settings reloaded")
	if log := b.log(); !strings.Contains(log, "applied=[tiering.cold_read_bytes_per_sec]") || !strings.Contains(log, "need_restart=[tiering.upload_parallelism]") {
		t.Fatalf("the reload's log does not say what it applied and what needs a restart:\n%s", tail(log, 10))
	}
	if took := replayAll("free"); took < 2500*time.Millisecond {
		t.Fatalf("replay of 2 MiB with the broker at 512 KiB/s took %v", took)
	}
	brokerHeld := scrape(t, admin)[brokerThrottle]
	if brokerHeld < 2 {
		t.Fatalf("held back %vs by the broker's limit", brokerHeld)
	}
	// A config that does not load keeps the limit in force.
	writeConfig("tiering:\n  cold_read_bytes_per_sec: lots\n")
	sighup("SIGHUP: settings not reloaded")
	if took := replayAll("paced"); took < 2500*time.Millisecond {
		t.Fatalf("after a bad reload, replay of 2 MiB took %v", took)
	}
}
