package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// TestColdReadLimitsApplyLiveAndPerTopic: remote.read.bytes.per.sec
// bounds the cold reads of its topic from the next GET after an alter,
// holds back no other topic, and lifting it frees the topic again. The
// broker's cache is a few chunks, so every replay reads the bucket.
func TestColdReadLimitsApplyLiveAndPerTopic(t *testing.T) {
	m := miniotest.Start(t)
	admin := freePort(t)
	b := newBroker(t, 1, s3Flags(m, "--admin-listen", admin, "--tiering-chunk-bytes", "64KiB", "--tiering-cache-bytes", "256KiB")...)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const records, size = 2048, 1024 // 2 MiB of values a topic
	cold := map[string]string{"segment.bytes": "64KiB", "segment.ms": "1s", "local.retention.bytes": "1", "local.retention.ms": "-1", "retention.ms": "-1"}
	for _, topic := range []string{"paced", "free"} {
		if _, err := c.CreateTopic(ctx, topic, 1, 1, cold); err != nil {
			t.Fatal(err)
		}
		p := newTieredProducer(c)
		tp := &tieredProducer{acked: map[int64]int64{}}
		tp.produce(ctx, p, topic, 0, records, size, func(int64) time.Time { return time.Now() })
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		p.Close()
		waitFor(t, time.Minute, topic+" only in the bucket", func() bool {
			d, err := c.DescribeTopic(ctx, topic)
			if err != nil {
				return false
			}
			p := d.Partitions[0]
			return p.ColdEndOffset == records && p.LocalStartOffset == records
		})
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
}
