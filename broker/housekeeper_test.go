package broker

import (
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/hotlog/memfs"
)

// housedReplica is a test replica tracked by a housekeeper of its own,
// on a virtual clock.
type housedReplica struct {
	*testReplica
	h *housekeeper
}

func newHousedReplica(t *testing.T, dir string, self int32, info cluster.PartitionInfo, segmentMs int64) *housedReplica {
	t.Helper()
	r := &testReplica{t: t, now: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), fs: memfs.New()}
	r.cfg = config.DefaultTopic()
	r.cfg.MinInsyncReplicas = 1
	r.cfg.FlushPolicy = config.FlushNever
	r.cfg.SegmentMs = segmentMs
	h := newHousekeeper()
	p, err := openPartition(replicaSpec{
		dir: dir, topic: "t", topicID: "0123456789abcdef0123456789abcdef", self: self,
		cfg: r.cfg, info: info, lagMax: 10 * time.Second,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		fs:     r.fs, now: func() time.Time { return r.now }, onDurable: func() {},
		house: h,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.close() })
	r.p = p
	h.add(p)
	return &housedReplica{testReplica: r, h: h}
}

// round does what the broker's housekeeping loop does at the replica's
// clock: visits what is due and sets its next deadline. It returns what
// the visits found.
func (r *housedReplica) round() []chores {
	var out []chores
	for _, p := range r.h.take(r.now) {
		c := p.houseVisit(r.now)
		r.h.schedule(p, c.next)
		out = append(out, c)
	}
	return out
}

// An idle replica is visited once after it opens and then never again: no
// deadline, no mark. An append marks it; its only deadline then is the
// roll by segment.ms, at which it is visited and rolled, and it goes idle
// again.
func TestHousekeeperVisitsAnIdleReplicaNever(t *testing.T) {
	lone := cluster.PartitionInfo{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}
	r := newHousedReplica(t, "/data/t/0", 1, lone, time.Minute.Milliseconds())
	if v := r.round(); len(v) != 1 {
		t.Fatalf("first round visited %d replicas; want the new one", len(v))
	}
	for range 100 {
		r.now = r.now.Add(time.Hour)
		if v := r.round(); len(v) != 0 {
			t.Fatalf("an idle replica was visited at %v: %+v", r.now, v)
		}
	}
	if d, dirty := r.h.tracked(); d != 0 || dirty != 0 {
		t.Fatalf("idle housekeeper holds %d deadlines, %d dirty; want none", d, dirty)
	}

	r.produce(0, 3)
	v := r.round()
	if len(v) != 1 || v[0].rolled {
		t.Fatalf("after an append: %+v; want one visit, no roll", v)
	}
	if want := r.now.Add(time.Minute); !v[0].next.Equal(want) {
		t.Fatalf("next deadline %v; want the roll by segment.ms at %v", v[0].next, want)
	}
	r.now = r.now.Add(59 * time.Second)
	if v := r.round(); len(v) != 0 {
		t.Fatalf("visited before the roll was due: %+v", v)
	}
	r.now = r.now.Add(time.Second)
	if v := r.round(); len(v) != 1 || !v[0].rolled || !v[0].next.IsZero() {
		t.Fatalf("at segment.ms: %+v; want one visit that rolled and set no deadline", v)
	}
	if segs := r.p.log.Segments(); len(segs) != 2 {
		t.Fatalf("%d segments after the roll; want 2", len(segs))
	}
	r.now = r.now.Add(time.Hour)
	if v := r.round(); len(v) != 0 {
		t.Fatalf("visited after the roll with nothing due: %+v", v)
	}
}

// A caught-up follower of an idle leader falls behind only when the
// leader appends: it leaves the ISR replica.lag.time.max after that
// append if it does not catch up, not at once because no visit refreshed
// its caught-up time while the partition was idle, and not never because
// nothing visits an idle leader.
func TestHousekeeperDropsALaggingFollowerAtItsDeadline(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1}
	r := newHousedReplica(t, "/data/t/0", 1, info, 0)
	r.produce(0, 2)
	r.p.sentTo(2, 2, true)
	r.p.followerReport(2, 0, 2)
	r.round()
	if d, _ := r.h.tracked(); d != 0 {
		t.Fatalf("a leader whose follower is caught up holds %d deadlines; want none", d)
	}

	r.now = r.now.Add(time.Hour) // idle, no visits
	if v := r.round(); len(v) != 0 {
		t.Fatalf("an idle leader was visited: %+v", v)
	}
	r.produce(2, 2)
	v := r.round()
	if len(v) != 1 || v[0].isr != nil {
		t.Fatalf("visit after an append to an idle leader: %+v; want no ISR change (the follower fell behind just now)", v)
	}
	if want := r.now.Add(10*time.Second + time.Nanosecond); !v[0].next.Equal(want) {
		t.Fatalf("lag deadline %v; want replica.lag.time.max after the append, %v", v[0].next, want)
	}
	r.now = r.now.Add(10 * time.Second)
	if v := r.round(); len(v) != 0 {
		t.Fatalf("visited before the lag deadline: %+v", v)
	}
	r.now = r.now.Add(time.Millisecond)
	v = r.round()
	if len(v) != 1 || v[0].isr == nil || !slices.Equal(v[0].isr.isr, []int32{1}) {
		t.Fatalf("at the lag deadline: %+v; want broker 2 out of the ISR", v)
	}
	// The change is pending: the next look is when it times out, unless
	// the answer (a mark) comes first.
	if want := r.now.Add(isrPendingTimeout); !v[0].next.Equal(want) {
		t.Fatalf("deadline with a pending change %v; want %v", v[0].next, want)
	}
	info.ISR, info.PartitionEpoch = []int32{1}, 1
	r.p.isrAnswered(v[0].isr, info, nil)
	if _, dirty := r.h.tracked(); dirty != 1 {
		t.Fatalf("the answer to an ISR change left %d replicas dirty; want 1", dirty)
	}

	// The follower catches up: its report outside the ISR asks it back at
	// once, and a report while a change is pending is taken up by the
	// visit the answer brings.
	r.p.sentTo(2, 4, true)
	if _, change := r.p.followerReport(2, 0, 4); change == nil || !slices.Equal(change.isr, []int32{1, 2}) {
		t.Fatalf("caught-up report: %+v; want broker 2 asked back", change)
	}
}

// A replica removed from the housekeeper (its topic deleted) is neither
// visited for a deadline it had nor for a mark after.
func TestHousekeeperForgetsARemovedReplica(t *testing.T) {
	lone := cluster.PartitionInfo{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}
	r := newHousedReplica(t, "/data/t/0", 1, lone, time.Minute.Milliseconds())
	r.produce(0, 1)
	r.round()
	if d, _ := r.h.tracked(); d != 1 {
		t.Fatalf("%d deadlines; want the roll's", d)
	}
	r.h.remove(r.p)
	r.p.markDirty()
	r.now = r.now.Add(time.Hour)
	if v := r.round(); len(v) != 0 {
		t.Fatalf("a removed replica was visited: %+v", v)
	}
}
