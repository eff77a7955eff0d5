package broker

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering"
	"github.com/strata-log/strata/tiering/objstore"
)

// coldTestEnv is what taking the cold tier over needs of a broker: an
// object store (in memory) and a logger.
func coldTestEnv() tierEnv {
	return tierEnv{store: objstore.NewMemory(), logger: quietLogger(), orphanGrace: time.Hour,
		topic: func(*partition) (map[string]string, int32) { return nil, 1 }}
}

// takeOver makes p, which leads, take the cold tier over as a new leader
// does before it serves: the fencing write, then align.
func takeOver(t *testing.T, ctx context.Context, p *partition, env tierEnv) {
	t.Helper()
	if _, err := p.takeOverTier(ctx, env); err != nil {
		t.Fatal(err)
	}
}

// testPartition opens a replica of partition 0 of topic "t" in dir, led by
// leader in epoch, with segments of 1 KiB.
func testPartition(t *testing.T, dir string, leader, epoch int32) *partition {
	t.Helper()
	cfg := config.DefaultTopic()
	cfg.SegmentBytes = 1 << 10
	cfg.FlushPolicy = config.FlushNever
	info := cluster.PartitionInfo{Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: leader, LeaderEpoch: epoch}
	p, err := openPartition(replicaSpec{dir: dir, topic: "t", topicID: "c01d0000000000000000000000000002", self: 1,
		cfg: cfg, info: info, lagMax: 10 * time.Second, logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.close() })
	return p
}

// produce appends b as Produce does for an idempotent producer; it fails
// the test on a refusal.
func produce(t *testing.T, p *partition, b record.Batch) (base, last int64, dup bool) {
	t.Helper()
	ar, orig, err := appendIdempotent(p, b, p.view.Load().LeaderEpoch)
	if err != nil {
		t.Fatalf("producer %d sequence %d: %v", b.ProducerID(), b.BaseSequence(), err)
	}
	if orig != nil {
		return orig.baseOffset, orig.lastOffset, true
	}
	return ar.BaseOffset, ar.LastOffset, false
}

// TestProducerStateFromTheColdTier, with the uploader and align as the
// broker runs them over an object store in memory: a leader whose log was
// reset to the cold tier's end recognises retries of batches only the cold
// tier holds; so does a follower that was reset to its leader's log start
// (its own snapshots are partial) once it leads; objects without a
// snapshot leave the producer unknown.
func TestProducerStateFromTheColdTier(t *testing.T) {
	env := coldTestEnv()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	a := testPartition(t, filepath.Join(dir, "a"), 1, 1)
	type sent struct {
		b          record.Batch
		base, last int64
	}
	var early []sent
	for i := range 5 {
		bt := idemBatch(t, 7, 0, int32(2*i), 2)
		base, last, _ := produce(t, a, bt)
		early = append(early, sent{bt, base, last})
	}
	for i := range 300 {
		produce(t, a, idemBatch(t, 8, 0, int32(i), 1))
	}
	settled(t, a.log)
	c, err := tiering.NewCommitter(ctx, env.store, a.ref(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for {
		uploaded, err := tiering.UploadNext(ctx, c, a.uploadLog(), a.log.LogEndOffset(), nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !uploaded {
			break
		}
	}
	h := c.Head()
	if segs, _ := h.Stats(); segs < 10 {
		t.Fatalf("only %d segments in the cold tier", segs)
	}
	// More, not uploaded yet.
	for i := range 100 {
		produce(t, a, idemBatch(t, 8, 0, int32(300+i), 1))
	}
	retry := func(p *partition, when string) {
		t.Helper()
		for i, e := range early {
			if base, last, dup := produce(t, p, e.b); !dup || base != e.base || last != e.last {
				t.Fatalf("%s: retry of producer 7's batch %d: %d-%d dup %v, want the duplicate at %d-%d", when, i, base, last, dup, e.base, e.last)
			}
		}
	}

	// A leader that lost its disk: align resets its log to the cold end.
	fresh := testPartition(t, filepath.Join(dir, "fresh"), 1, 2)
	takeOver(t, ctx, fresh, env)
	if fresh.log.LogStartOffset() != h.EndOffset() {
		t.Fatalf("log starts at %d, the cold tier ends at %d", fresh.log.LogStartOffset(), h.EndOffset())
	}
	retry(fresh, "after a reset to the cold end")

	// A follower far behind was reset to its leader's log start, past
	// producer 7's batches, and replicated from there; its snapshots are
	// partial. Once it leads, the cold tier fills in what it lacks.
	x := h.Tail[3].LastOffset + 1
	f := testPartition(t, filepath.Join(dir, "follower"), 2, 1)
	if err := f.log.ResetTo(x); err != nil {
		t.Fatal(err)
	}
	f.producers.reset()
	for off := x; off < a.log.LogEndOffset(); {
		rr, err := a.log.Read(off, 1<<20, a.log.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.log.AppendReplica(rr.Data); err != nil {
			t.Fatal(err)
		}
		off = rr.NextOffset
	}
	if f.log.LogEndOffset() != a.log.LogEndOffset() || f.log.LogEndOffset() <= h.EndOffset() {
		t.Fatalf("the follower's log ends at %d, the leader's at %d, the cold tier at %d", f.log.LogEndOffset(), a.log.LogEndOffset(), h.EndOffset())
	}
	if err := f.producers.snapshotSealed(); err != nil {
		t.Fatal(err)
	}
	if exact, err := f.producers.snaps.Load().exactAt(); err != nil || exact {
		t.Fatalf("the reset follower's snapshots claim the exact state: %v %v", exact, err)
	}
	// It leads now, in epoch 2 (broker 1 in these tests is every
	// partition's own id).
	if err := f.setState(cluster.PartitionInfo{Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 2}, *f.cfg.Load()); err != nil {
		t.Fatal(err)
	}
	takeOver(t, ctx, f, env)
	if f.log.LogStartOffset() != x {
		t.Fatalf("align moved the follower's log start from %d to %d", x, f.log.LogStartOffset())
	}
	if exact, err := f.producers.snaps.Load().exactAt(); err != nil || !exact {
		t.Fatalf("after align the follower's snapshots are still partial: %v %v", exact, err)
	}
	retry(f, "at a follower reset to its leader's start")
	// The cold snapshot (of the last cold segment, which ends inside the
	// follower's log) is now the follower's; the partial snapshots above
	// it were dropped and are written again from it, whole.
	if err := f.producers.snapshotSealed(); err != nil {
		t.Fatal(err)
	}
	offs := snapshotFiles(t, f.log.Dir())
	if !slices.Contains(offs, h.EndOffset()) {
		t.Fatalf("the follower's snapshots %v lack the cold one at %d", offs, h.EndOffset())
	}
	for _, off := range offs {
		if snap, _ := readSnapshot(t, f.log.Dir(), off); off >= h.EndOffset() && snap.partial {
			t.Fatalf("the snapshot at %d is still partial", off)
		}
	}

	// Objects uploaded without a snapshot (before objects carried one)
	// leave producer 7 unknown: its retry is refused, not written again.
	bare := objstore.NewMemory()
	env.store = bare
	c2, err := tiering.NewCommitter(ctx, bare, a.ref(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for {
		uploaded, err := tiering.UploadNext(ctx, c2, a.log, a.log.LogEndOffset(), nil, 1) // the log alone offers no snapshots
		if err != nil {
			t.Fatal(err)
		}
		if !uploaded {
			break
		}
	}
	old := testPartition(t, filepath.Join(dir, "old"), 1, 2)
	takeOver(t, ctx, old, env)
	_, _, err = appendIdempotent(old, early[4].b, 2)
	if ReasonOf(err) != ReasonUnknownProducerID {
		t.Fatalf("retry at a leader whose cold tier has no snapshots: %v, want UNKNOWN_PRODUCER_ID", err)
	}
	if _, err := tiering.ReadProducerSnapshot(ctx, bare, c2.Head().Tail[0]); !errors.Is(err, tiering.ErrNoProducerSnapshot) {
		t.Fatalf("an object uploaded without a snapshot: %v", err)
	}
}

// Retention of a topic without a cold tier writes the producer snapshot at
// the new log start before the segments below it go, however soon after
// their roll it runs: the state stays exact, with no wait for the broker's
// snapshot loop.
func TestLocalRetentionKeepsProducerStateExact(t *testing.T) {
	p := testPartition(t, t.TempDir(), 1, 1)
	for i := range 200 {
		produce(t, p, idemBatch(t, 7, 0, int32(i), 1))
	}
	settled(t, p.log)
	if len(p.log.Segments()) < 5 {
		t.Fatalf("only %d segments", len(p.log.Segments()))
	}
	p.log.SetHighWatermark(p.log.LogEndOffset()) // as the followers would acknowledge
	cfg := *p.cfg.Load()
	cfg.RetentionBytes = 4 << 10
	p.cfg.Store(&cfg)
	p.localRetention(quietLogger())
	if p.log.LogStartOffset() == 0 {
		t.Fatal("retention deleted nothing")
	}
	if exact, err := p.producers.files(p.log).exactAt(); err != nil || !exact {
		t.Fatalf("after retention the producer state is exact: %v (%v)", exact, err)
	}
}

// Under cleanup.policy compact retention deletes nothing, as in Kafka: the
// cleaner keeps each key's last record however old or large the log;
// compact,delete applies retention as delete does.
func TestLocalRetentionSparesCompactOnlyTopics(t *testing.T) {
	for _, tc := range []struct {
		policy  config.CleanupPolicy
		deletes bool
	}{{config.CleanupCompact, false}, {config.CleanupCompactDelete, true}} {
		p := testPartition(t, t.TempDir(), 1, 1)
		for i := range 200 {
			produce(t, p, idemBatch(t, 7, 0, int32(i), 1))
		}
		settled(t, p.log)
		p.log.SetHighWatermark(p.log.LogEndOffset())
		cfg := *p.cfg.Load()
		cfg.CleanupPolicy, cfg.RemoteStorageEnable = tc.policy, false
		cfg.RetentionBytes, cfg.RetentionMs = 4<<10, 1
		p.cfg.Store(&cfg)
		p.localRetention(quietLogger())
		if deleted := p.log.LogStartOffset() > 0; deleted != tc.deletes {
			t.Errorf("%s: retention deleted segments %v, want %v", tc.policy, deleted, tc.deletes)
		}
	}
}
