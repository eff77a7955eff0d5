package broker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/record"
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

// A cleaning reads its dirty segments twice (key map, rewrite) and its
// clean ones once (rewrite): the producers' last batches come from the key
// map's read and from the last cleaning. After a restart, which forgets
// those, the clean segments are read once more for them.
func TestCleaningReadsEachSegmentAtMostTwice(t *testing.T) {
	c := newCleanerHarness(t)
	c.write(0, 200, noProducer)
	if read, cleanSize, dirtySize := c.clean(); cleanSize != 0 || read != 2*dirtySize {
		t.Fatalf("first cleaning read %d bytes of %d dirty and %d clean; want 2x the dirty", read, dirtySize, cleanSize)
	}
	c.write(200, 200, noProducer)
	read, cleanSize, dirtySize := c.clean()
	if cleanSize == 0 {
		t.Fatal("the second cleaning found no clean segment")
	}
	if want := 2*dirtySize + cleanSize; read != want {
		t.Fatalf("second cleaning read %d bytes of %d dirty and %d clean; want %d", read, dirtySize, cleanSize, want)
	}
	c.r.p.lasts.forget() // as a restart does
	c.write(400, 200, noProducer)
	read, cleanSize, dirtySize = c.clean()
	if want := 2*dirtySize + 2*cleanSize; read != want {
		t.Fatalf("cleaning after a restart read %d bytes of %d dirty and %d clean; want %d", read, dirtySize, cleanSize, want)
	}
}

// Every producer's last batch survives cleanings, emptied or not, whether
// the cleaner knew its producers from the last cleaning or read them
// again: idempotence after a restart rebuilds from it.
func TestCleaningsKeepEveryProducersLastBatch(t *testing.T) {
	c := newCleanerHarness(t)
	lastOf := map[int64]int64{}
	note := func(pid int64, from, n int) {
		c.write(from, n, pid)
		lastOf[pid] = c.r.p.log.LogEndOffset() - 1
	}
	note(7, 0, 30)   // producer 7 writes keys 0-9 three times
	note(8, 30, 100) // producer 8 overwrites them all: 7's batches empty
	c.clean()
	c.checkLastBatches(lastOf)
	note(9, 130, 100) // producer 9 overwrites them again: 8's batches empty
	c.clean()
	c.checkLastBatches(lastOf)
	c.r.p.lasts.forget()
	note(10, 230, 100)
	c.clean()
	c.checkLastBatches(lastOf)
}

const noProducer = -1

// cleanerHarness is one replica of a compacted topic with small segments
// and the cleaner's step run on it by hand.
type cleanerHarness struct {
	t       *testing.T
	r       *testReplica
	cleaner *Broker
	seq     map[int64]int32
}

func newCleanerHarness(t *testing.T) *cleanerHarness {
	info := cluster.PartitionInfo{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}
	r := newTestReplica(t, 1, info, 1)
	cfg := r.cfg
	cfg.CleanupPolicy = config.CleanupCompact
	cfg.RemoteStorageEnable = false
	cfg.FlushPolicy = config.FlushAlways
	cfg.SegmentBytes = 4 << 10
	cfg.MinCompactionLagMs = 0
	cfg.MinCleanableDirtyRatio = 0
	cfg.DeleteRetentionMs = 0
	r.cfg = cfg
	r.apply(info)
	return &cleanerHarness{t: t, r: r, cleaner: &Broker{cfg: config.Broker{Cleaner: config.Cleaner{DedupeBufferSize: 1 << 20}}}, seq: map[int64]int32{}}
}

// write appends records from to from+n-1, one a batch, over ten keys, by
// producer pid (noProducer: none).
func (c *cleanerHarness) write(from, n int, pid int64) {
	c.t.Helper()
	value := make([]byte, 200)
	for i := from; i < from+n; i++ {
		opts := record.DefaultBatchOptions()
		if pid != noProducer {
			opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, 0, c.seq[pid]
			c.seq[pid]++
		}
		bl := record.NewBuilder(opts)
		bl.Add(record.Record{Timestamp: c.r.now.UnixMilli(), Key: fmt.Appendf(nil, "key-%d", i%10), Value: value})
		b, err := bl.Build()
		if err != nil {
			c.t.Fatal(err)
		}
		if _, _, err := c.r.p.appendAsLeader(b, AcksLeader); err != nil {
			c.t.Fatal(err)
		}
	}
	c.r.p.advance()
}

// clean runs a cleaning and returns the bytes it read and the sizes of
// the clean and dirty segments it covered.
func (c *cleanerHarness) clean() (read, cleanSize, dirtySize int64) {
	c.t.Helper()
	cl := c.cleaner.cleanableAt(c.r.p, c.r.now.UnixMilli())
	if !cl.eligible {
		c.t.Fatalf("nothing to clean: %+v", cl)
	}
	for _, s := range cl.segs {
		if s.LastOffset < cl.dirty {
			cleanSize += s.Size
		}
	}
	before := c.cleaner.metrics.cleaner.bytesRead.Load()
	if err := c.cleaner.cleanLog(c.r.p, cl, newIOThrottle(0, nil), c.r.now.UnixMilli()); err != nil {
		c.t.Fatal(err)
	}
	return c.cleaner.metrics.cleaner.bytesRead.Load() - before, cleanSize, cl.dirtySize
}

// checkLastBatches fails unless the log holds, for every producer, a batch
// of it ending at its last offset.
func (c *cleanerHarness) checkLastBatches(lastOf map[int64]int64) {
	c.t.Helper()
	found := map[int64]bool{}
	for _, b := range localBatches(c.t, c.r.p.log) {
		if last, ok := lastOf[b.ProducerID()]; ok && b.LastOffset() == last {
			found[b.ProducerID()] = true
		}
	}
	for pid, last := range lastOf {
		if !found[pid] {
			c.t.Errorf("producer %d's last batch (ending at %d) is gone", pid, last)
		}
	}
}
