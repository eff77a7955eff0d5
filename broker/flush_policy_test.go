package broker

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/hotlog/memfs"
)

// openPolicyReplica opens a replica of a topic under flush policy fp whose
// fsyncs happen only when the test asks (hotlog's FlushInline, as in the
// simulation).
func openPolicyReplica(t *testing.T, fsys *memfs.FS, self int32, info cluster.PartitionInfo, fp config.FlushPolicy) *testReplica {
	t.Helper()
	r := &testReplica{t: t, now: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), fs: fsys}
	r.cfg = config.DefaultTopic()
	r.cfg.MinInsyncReplicas = 1
	r.cfg.FlushPolicy = fp
	p, err := openPartition(replicaSpec{
		dir: "/data/t/0", topic: "t", topicID: "0123456789abcdef0123456789abcdef", self: self,
		cfg: r.cfg, info: info, lagMax: 10 * time.Second,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		fs:     fsys, now: func() time.Time { return r.now }, onDurable: func() {},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.close() })
	r.p = p
	return r
}

// Under flush.policy=interval a write is acknowledged once every in-sync
// replica has written it, before any fsync; the fsync follows on the
// interval. Under always it is acknowledged only once fsynced.
func TestIntervalAcknowledgesWrittenRecords(t *testing.T) {
	single := cluster.PartitionInfo{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}
	t.Run("interval RF=1", func(t *testing.T) {
		r := openPolicyReplica(t, memfs.New(), 1, single, config.FlushInterval)
		res, w := r.produce(1, 10)
		if err, ok := ended(w); !ok || err != nil {
			t.Fatalf("acks=all wait of a written record under interval: ended %v, err %v", ok, err)
		}
		if hw, durable := r.p.log.HighWatermark(), r.p.log.DurableOffset(); hw != res.LastOffset+1 || durable > res.BaseOffset {
			t.Fatalf("high watermark %d, durable end %d; want the high watermark at %d before any fsync", hw, durable, res.LastOffset+1)
		}
		// The fsync comes later, off the acknowledgement's path.
		if err := r.p.log.Flush(); err != nil {
			t.Fatal(err)
		}
		if durable := r.p.log.DurableOffset(); durable != res.LastOffset+1 {
			t.Fatalf("durable end %d after the flush; want %d", durable, res.LastOffset+1)
		}
	})
	t.Run("always RF=1", func(t *testing.T) {
		r := openPolicyReplica(t, memfs.New(), 1, single, config.FlushAlways)
		res, w := r.produce(1, 10)
		if _, ok := ended(w); ok {
			t.Fatal("acks=all wait ended under always before the fsync")
		}
		if err := r.p.log.WaitDurable(res.LastOffset + 1); err != nil {
			t.Fatal(err)
		}
		r.p.advance()
		if err, ok := ended(w); !ok || err != nil {
			t.Fatalf("acks=all wait after the fsync: ended %v, err %v", ok, err)
		}
	})
	t.Run("interval RF=2", func(t *testing.T) {
		info := cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1}
		leader := openPolicyReplica(t, memfs.New(), 1, info, config.FlushInterval)
		follower := openPolicyReplica(t, memfs.New(), 2, info, config.FlushInterval)
		_, w := leader.produce(1, 10)
		leader.p.sentTo(2, 10, true)
		if err := follower.p.appendAsFollower(1, 0, NoReadFrom, leaderBatch(t, 0, 0, 1, 10), 0); err != nil {
			t.Fatal(err)
		}
		// The follower reports what it wrote, not what it fsynced.
		if end, durable := follower.p.committedEnd(), follower.p.log.DurableOffset(); end != 10 || durable != 0 {
			t.Fatalf("follower reports %d with %d fsynced; want 10 reported before any fsync", end, durable)
		}
		if _, ok := ended(w); ok {
			t.Fatal("acks=all wait ended before the follower reported")
		}
		leader.p.followerReport(2, 0, follower.p.committedEnd())
		if err, ok := ended(w); !ok || err != nil {
			t.Fatalf("acks=all wait once every in-sync replica wrote the batch: ended %v, err %v", ok, err)
		}
	})
	t.Run("always RF=2", func(t *testing.T) {
		info := cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1}
		follower := openPolicyReplica(t, memfs.New(), 2, info, config.FlushAlways)
		if err := follower.p.appendAsFollower(1, 0, NoReadFrom, leaderBatch(t, 0, 0, 1, 10), 0); err != nil {
			t.Fatal(err)
		}
		// AppendReplica waited for the fsync: what it reports is durable.
		if end, durable := follower.p.committedEnd(), follower.p.log.DurableOffset(); end != 10 || durable != 10 {
			t.Fatalf("follower reports %d with %d fsynced; want 10 of 10", end, durable)
		}
	})
}

// A leader that restarted unnoticed may have lost, in a power cut, records
// its followers hold. Under flush.policy interval some were acknowledged:
// it must not tell a follower where its epoch ends (the follower would cut
// its log to it), and the lead goes to another in-sync replica. Under
// always what it acknowledged was fsynced, and it keeps the lead.
func TestRestartedLeaderAfterAPowerCut(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 3}
	fsys := memfs.New()
	r := openPolicyReplica(t, fsys, 1, info, config.FlushInterval)
	r.produce(1, 5)
	r.p.sentTo(2, 5, true)
	r.p.sentTo(3, 5, true)
	r.p.followerReport(2, 3, 5)
	if err := r.p.log.Flush(); err != nil {
		t.Fatal(err)
	}
	_, w := r.produce(6, 5) // unsynced, and acknowledged once both followers have it
	r.p.sentTo(2, 10, true)
	r.p.sentTo(3, 10, true)
	r.p.followerReport(2, 3, 10)
	r.p.followerReport(3, 3, 10)
	if err, ok := ended(w); !ok || err != nil {
		t.Fatalf("acks=all wait: ended %v, err %v", ok, err)
	}
	// A power cut: the restarted leader's log ends where its last fsync did.
	files := fsys.Fork()
	files.Crash(nil)
	r.p.close()
	again := openPolicyReplica(t, files, 1, info, config.FlushInterval)
	if end := again.p.log.LogEndOffset(); end != 5 {
		t.Fatalf("log end %d after the power cut; the test needs the acknowledged records lost", end)
	}
	if _, err := again.p.leaderEndOffsetForEpoch(3); ReasonOf(err) != ReasonLeaderNotAvailable {
		t.Fatalf("epoch query to the restarted leader: %v, want LEADER_NOT_AVAILABLE", err)
	}
	for _, c := range []struct {
		policy config.FlushPolicy
		isr    []int32
		want   int32
	}{
		{config.FlushInterval, []int32{1, 2, 3}, 2},
		{config.FlushNever, []int32{2, 1, 3}, 2},
		{config.FlushInterval, []int32{1}, 1},
		{config.FlushAlways, []int32{1, 2, 3}, 1},
	} {
		in := info
		in.ISR = c.isr
		if got := restartSuccessor(in, 1, c.policy); got != c.want {
			t.Errorf("successor of restarted leader 1 with ISR %v under %s: %d, want %d", c.isr, c.policy, got, c.want)
		}
	}
}

// A follower whose report goes below what it acknowledged before in the
// epoch lost records it had (a power cut under interval): it may lack
// committed ones, so the leader asks at once for it to leave the ISR.
func TestFollowerThatLostRecordsLeavesTheISR(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}
	r := openPolicyReplica(t, memfs.New(), 1, info, config.FlushInterval)
	r.produce(1, 10)
	r.p.sentTo(2, 10, true)
	r.p.sentTo(3, 10, true)
	if _, change := r.p.followerReport(2, 0, 10); change != nil {
		t.Fatalf("an ISR change for a caught-up member: %+v", change)
	}
	r.p.followerReport(3, 0, 10)
	verdict, change := r.p.followerReport(2, 0, 4)
	if verdict != reportCounted || change == nil || len(change.isr) != 2 || change.isr[0] != 1 || change.isr[1] != 3 {
		t.Fatalf("report below the follower's acknowledged end: %v, change %+v; want the ISR [1 3] asked for", verdict, change)
	}
	if hw := r.p.log.HighWatermark(); hw != 10 {
		t.Fatalf("high watermark %d; it never goes back", hw)
	}
}

// A replica that restarted under interval may have lost acknowledged
// records in a power cut, and nobody noticed its restart: named the leader
// of a new epoch while other in-sync replicas exist, it asks for another
// epoch (which the controller gives to one of them) instead of leading,
// until it has shown as a follower that it holds everything committed
// before it started. Alone in the ISR it leads.
func TestRestartedFollowerDoesNotLeadUntilCaughtUp(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 2, PartitionEpoch: 2}
	fsys := memfs.New()
	f := openPolicyReplica(t, fsys, 2, info, config.FlushInterval)
	if err := f.p.appendAsFollower(1, 2, NoReadFrom, leaderBatch(t, 0, 2, 1, 10), 10); err != nil {
		t.Fatal(err)
	}
	files := fsys.Fork()
	files.Crash(nil)
	f.p.close()

	again := openPolicyReplica(t, files, 2, info, config.FlushInterval)
	elected := info
	elected.Leader, elected.LeaderEpoch, elected.PartitionEpoch = 2, 3, 3
	again.apply(elected)
	if epoch, asks := again.p.needsNewEpoch(); !asks || epoch != 3 {
		t.Fatalf("restarted follower named the leader with another ISR member: asks %v (epoch %d), want to ask to leave 3", asks, epoch)
	}
	alone := elected
	alone.ISR, alone.LeaderEpoch, alone.PartitionEpoch = []int32{2}, 4, 4
	again.apply(alone)
	if _, asks := again.p.needsNewEpoch(); asks {
		t.Fatal("alone in the ISR it still asks for a new epoch")
	}

	// A restarted follower that caught up with its leader's high watermark
	// in the leader's epoch may lead again.
	files2 := files.Fork()
	again.p.close()
	third := openPolicyReplica(t, files2, 2, info, config.FlushInterval)
	end := third.p.log.LogEndOffset()
	if err := third.p.appendAsFollower(1, 2, NoReadFrom, leaderBatch(t, end, 2, 100, 10-int(end)), 10); err != nil {
		t.Fatal(err)
	}
	third.apply(elected)
	if _, asks := third.p.needsNewEpoch(); asks {
		t.Fatal("a follower that caught up with its leader's high watermark still refuses the lead")
	}
}
