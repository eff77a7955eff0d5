package broker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/tiering"
)

func TestRateLimit(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var l rateLimit
	if d := l.take(1e9, t0); d != 0 {
		t.Fatalf("unlimited: wait %v", d)
	}
	l.setRate(100, t0)
	// A tenth of a second's worth at once, then the next must wait.
	for i := range 10 {
		if d := l.take(1, t0); d != 0 {
			t.Fatalf("take %d of a full bucket: wait %v", i, d)
		}
	}
	if d := l.take(1, t0); d != 10*time.Millisecond {
		t.Fatalf("empty bucket: wait %v, want 10ms", d)
	}
	// A request larger than the bucket waits for a full one, then goes
	// into debt.
	t1 := t0.Add(20 * time.Millisecond)
	if d := l.take(25, t1); d != 80*time.Millisecond {
		t.Fatalf("25 with 2 tokens at 100/s: wait %v, want 80ms", d)
	}
	t2 := t0.Add(100 * time.Millisecond)
	if d := l.take(25, t2); d != 0 {
		t.Fatalf("25 with a full bucket: wait %v", d)
	}
	if d := l.take(1, t2); d != 160*time.Millisecond {
		t.Fatalf("15 tokens in debt at 100/s: wait %v, want 160ms", d)
	}
	// A new rate applies at once; unlimited again lets everything through.
	l.setRate(10000, t2)
	if d := l.take(1, t2.Add(100*time.Millisecond)); d != 0 {
		t.Fatalf("after raising the rate: wait %v", d)
	}
	l.setRate(0, t0)
	if d := l.take(1e9, t0); d != 0 {
		t.Fatalf("unlimited again: wait %v", d)
	}
}

// TestColdPacerFollowsTopicSettings: a topic's limits apply from the next
// GET after its settings change, the broker's apply to every topic, and a
// GET held back gives up when its reader goes away.
func TestColdPacerFollowsTopicSettings(t *testing.T) {
	var mu sync.Mutex
	limits := map[string][2]int64{"slow": {config.Unbounded, config.Unbounded}}
	c := newColdPacer(config.Tiering{}, func(topic, id string) (int64, int64, bool) {
		mu.Lock()
		defer mu.Unlock()
		l, ok := limits[topic]
		return l[0], l[1], ok
	})
	set := func(bytes, gets int64) {
		mu.Lock()
		limits["slow"] = [2]int64{bytes, gets}
		mu.Unlock()
	}
	slow := tiering.PartitionRef{Topic: "slow", TopicID: "s1", Partition: 0}
	other := tiering.PartitionRef{Topic: "other", TopicID: "o1", Partition: 0}
	ctx := context.Background()
	quick := func(p tiering.PartitionRef, n int64) error {
		ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		return c.pace(ctx, p, n)
	}
	for range 100 {
		if err := quick(slow, 1<<20); err != nil {
			t.Fatalf("no limits: %v", err)
		}
	}
	// One GET a second for the topic: the second waits, and gives up
	// when its context ends.
	set(config.Unbounded, 1)
	if err := quick(slow, 1); err != nil {
		t.Fatal(err)
	}
	if err := quick(slow, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second GET within the second: %v", err)
	}
	// Other topics are not held back by it.
	if err := quick(other, 1<<20); err != nil {
		t.Fatalf("another topic: %v", err)
	}
	// The limit lifted, the next GET goes at once.
	set(config.Unbounded, config.Unbounded)
	if err := quick(slow, 1); err != nil {
		t.Fatalf("after the limit was lifted: %v", err)
	}
	// Bytes: a 1 MiB/s topic that took 3 MiB is held back.
	set(1<<20, config.Unbounded)
	if err := quick(slow, 3<<20); err != nil {
		t.Fatal(err)
	}
	if err := quick(slow, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a GET after 3 MiB at 1 MiB/s: %v", err)
	}
	if broker, topic, _ := c.throttled(); broker != 0 || topic == 0 {
		t.Fatalf("throttled: broker %v, topic %v", broker, topic)
	}

	// The broker's limit holds every topic back.
	b := newColdPacer(config.Tiering{ColdReadGetsPerSec: 1}, func(string, string) (int64, int64, bool) {
		return config.Unbounded, config.Unbounded, true
	})
	if err := b.pace(ctx, other, 1); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := b.pace(wctx, slow, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second GET within the broker's second: %v", err)
	}
}

// TestColdPacerWaits: a GET over the limit goes once the bucket holds
// tokens again, not before.
func TestColdPacerWaits(t *testing.T) {
	c := newColdPacer(config.Tiering{ColdReadGetsPerSec: 20}, func(string, string) (int64, int64, bool) {
		return config.Unbounded, config.Unbounded, true
	})
	p := tiering.PartitionRef{Topic: "t", TopicID: "t1"}
	start := time.Now()
	// 2 from the full bucket, then 10 more at 20 a second.
	for range 12 {
		if err := c.pace(context.Background(), p, 1); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 450*time.Millisecond {
		t.Fatalf("12 GETs at 20 a second (a tenth of a second's burst) took %v, want at least 0.5s", took)
	}
	if broker, _, _ := c.throttled(); broker < 450*time.Millisecond {
		t.Fatalf("throttled %v", broker)
	}
}

// TestReadLimitsOf: a topic's own cold read limits override the broker's
// defaults, its other overrides do not change them, and a limit that does
// not parse leaves the defaults.
func TestReadLimitsOf(t *testing.T) {
	def := config.DefaultTopic()
	def.RemoteReadBytesPerSec, def.RemoteReadGetsPerSec = 50<<20, 100
	b := &Broker{defaults: def}
	for _, c := range []struct {
		overrides   map[string]string
		bytes, gets int64
	}{
		{nil, 50 << 20, 100},
		{map[string]string{"segment.bytes": "1MiB", "retention.ms": "-1"}, 50 << 20, 100},
		{map[string]string{"remote.read.bytes.per.sec": "10MiB"}, 10 << 20, 100},
		{map[string]string{"remote.read.gets.per.sec": "7", "segment.ms": "1s"}, 50 << 20, 7},
		{map[string]string{"remote.read.bytes.per.sec": "1MiB", "remote.read.gets.per.sec": "-1"}, 1 << 20, -1},
		{map[string]string{"remote.read.bytes.per.sec": "fast"}, 50 << 20, 100},
	} {
		bytes, gets := b.readLimitsOf(c.overrides)
		if bytes != c.bytes || gets != c.gets {
			t.Errorf("overrides %v: limits %d B/s, %d GETs/s, want %d, %d", c.overrides, bytes, gets, c.bytes, c.gets)
		}
	}
}
