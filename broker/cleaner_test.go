package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/hotlog"
)

// TestCleanableOf: the cleaner takes only sealed segments wholly below the
// high watermark, before the active one and before the first segment
// younger than min.compaction.lag.ms; it counts dirty bytes from where the
// last cleaning stopped and wants min.cleanable.dirty.ratio of them, or a
// dirty record past max.compaction.lag.ms.
func TestCleanableOf(t *testing.T) {
	const now = 1_000_000
	seg := func(base, last, size, minTs, maxTs int64) hotlog.SegmentInfo {
		return hotlog.SegmentInfo{BaseOffset: base, LastOffset: last, Size: size, MinTimestamp: minTs, MaxTimestamp: maxTs, Sealed: true}
	}
	segs := []hotlog.SegmentInfo{
		seg(0, 99, 1000, 100, 200),
		seg(100, 199, 1000, 200, 300),
		seg(200, 299, 1000, 300, now-10),
		{BaseOffset: 300, LastOffset: 349, Size: 500}, // active
	}
	base := config.DefaultTopic()
	base.CleanupPolicy = config.CleanupCompact
	base.MinCleanableDirtyRatio = 0.5
	cases := []struct {
		name      string
		hw        int64
		cleanedTo int64
		edit      func(*config.Topic)
		end       int64
		ratio     float64
		eligible  bool
	}{
		{"all dirty", 350, 0, nil, 300, 1, true},
		{"the high watermark stops it", 150, 0, nil, 100, 1, true},
		{"nothing below the high watermark", 50, 0, nil, 0, 0, false},
		{"the lag stops it", 350, 0, func(c *config.Topic) { c.MinCompactionLagMs = 100 }, 200, 1, true},
		{"a third dirty", 350, 200, nil, 300, 1.0 / 3, false},
		{"a third dirty, low ratio wanted", 350, 200, func(c *config.Topic) { c.MinCleanableDirtyRatio = 0.3 }, 300, 1.0 / 3, true},
		{"a third dirty, overdue", 350, 200, func(c *config.Topic) { c.MaxCompactionLagMs = 100 }, 300, 1.0 / 3, true},
		{"all clean", 350, 300, nil, 300, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			if c.edit != nil {
				c.edit(&cfg)
			}
			got := cleanableOf(segs, c.hw, c.cleanedTo, &cfg, now)
			if got.end != c.end || got.eligible != c.eligible || (got.end > 0 && got.ratio != c.ratio) {
				t.Fatalf("end %d ratio %v eligible %v; want end %d ratio %v eligible %v", got.end, got.ratio, got.eligible, c.end, c.ratio, c.eligible)
			}
		})
	}
}

// TestIOThrottle: bytes charged past the rate wait until the rate allows
// them, and a stop ends the wait at once.
func TestIOThrottle(t *testing.T) {
	stop := make(chan struct{})
	th := newIOThrottle(1<<20, stop) // 1 MiB/s
	start := time.Now()
	for range 4 {
		if err := th.wait(128 << 10); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 450*time.Millisecond {
		t.Fatalf("512KiB at 1MiB/s took %v, want at least 0.5s", took)
	}
	close(stop)
	if err := th.wait(100 << 20); !errors.Is(err, errStopped) {
		t.Fatalf("after stop: %v", err)
	}
	if err := newIOThrottle(0, make(chan struct{})).wait(1 << 40); err != nil {
		t.Fatalf("unlimited: %v", err)
	}
}

// TestCleanerStateHorizon: tombstones may go below the furthest pass that
// is delete.retention.ms old, never below a younger one, never with an
// unbounded retention; the state reads back what it wrote, forgets only
// passes no horizon needs, and bad bytes are an error.
func TestCleanerStateHorizon(t *testing.T) {
	var s cleanerState
	s.record(100, 1000, 5000)
	s.record(250, 1400, 5000)
	s.record(400, 2000, 5000)
	for _, c := range []struct{ now, retention, want int64 }{
		{2000, 5000, 0},   // no pass 5s old yet
		{6000, 5000, 100}, // the first pass is
		{6500, 5000, 250}, // the second too
		{9999, 5000, 400}, // all of them
		{9999, -1, 0},     // unbounded: tombstones stay
	} {
		if got := s.horizon(c.now, c.retention); got != c.want {
			t.Errorf("horizon(%d, %d) = %d, want %d", c.now, c.retention, got, c.want)
		}
	}
	back, err := parseCleanerState(s.encode())
	if err != nil || back.cleanedTo != 400 || len(back.passes) != 3 {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	// At 6500 the passes of 1000 and 1400 are expired: only the newer
	// stays, as the horizon's anchor.
	s.record(500, 6500, 5000)
	if len(s.passes) != 3 || s.passes[0].end != 250 || s.horizon(6500, 5000) != 250 {
		t.Fatalf("after pruning: %+v", s.passes)
	}
	for _, bad := range []string{"", "v2 1", "v1 x", "v1 5\n1", "v1 5\n-1 3", "v1 -4"} {
		if _, err := parseCleanerState([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
