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
		fs:     memFS{fsys}, now: func() time.Time { return r.now }, onDurable: func() {},
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
		if err := follower.p.appendAsFollower(1, 0, leaderBatch(t, 0, 0, 1, 10), 0); err != nil {
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
		if err := follower.p.appendAsFollower(1, 0, leaderBatch(t, 0, 0, 1, 10), 0); err != nil {
			t.Fatal(err)
		}
		// AppendReplica waited for the fsync: what it reports is durable.
		if end, durable := follower.p.committedEnd(), follower.p.log.DurableOffset(); end != 10 || durable != 10 {
			t.Fatalf("follower reports %d with %d fsynced; want 10 of 10", end, durable)
		}
	})
}
