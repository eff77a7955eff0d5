package broker

// The leader's tiering passes on one partition, on a real hot log and the
// in-memory bucket, with a clock the test moves: what reaches the manifest
// after an alter on a quiet partition, and when a quiet tail reaches the
// bucket.

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering"
	"github.com/strata-log/strata/tiering/objstore"
)

// tieredLeader is broker 1 leading a tiered partition, and the bucket.
type tieredLeader struct {
	t     *testing.T
	p     *partition
	store objstore.Bucket
	info  cluster.PartitionInfo
	now   time.Time
	// overrides is the topic's override map as the metadata holds it:
	// what its manifests must record.
	overrides map[string]string
	ids       uint64
}

// newTieredLeader opens a partition with replicas 1..replicas, all in the
// ISR, led by broker 1, with its log in a temp dir.
func newTieredLeader(t *testing.T, overrides map[string]string, replicas int) *tieredLeader {
	t.Helper()
	l := &tieredLeader{t: t, store: objstore.NewMemory(), now: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), overrides: overrides}
	cfg, err := config.DefaultTopic().With(overrides)
	if err != nil {
		t.Fatal(err)
	}
	cfg.FlushPolicy = config.FlushNever // durable on write: the high watermark moves on advance
	l.info = cluster.PartitionInfo{Partition: 0, Leader: 1, LeaderEpoch: 1}
	for id := int32(1); id <= int32(replicas); id++ {
		l.info.Replicas = append(l.info.Replicas, id)
		l.info.ISR = append(l.info.ISR, id)
	}
	p, err := openPartition(replicaSpec{
		dir: t.TempDir(), topic: "quiet", topicID: "0123456789abcdef0123456789abcdef", partition: 0, self: 1,
		cfg: cfg, info: l.info, lagMax: time.Hour, logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		now: func() time.Time { return l.now }, onDurable: func() {},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.close() })
	l.p = p
	return l
}

func (l *tieredLeader) env() tierEnv {
	return tierEnv{store: l.store, logger: slog.New(slog.NewTextHandler(io.Discard, nil)), orphanGrace: time.Hour,
		topic: func(*partition) (map[string]string, int32) { return maps.Clone(l.overrides), 1 }}
}

// alter changes the topic's settings as a reconcile after an alter does.
func (l *tieredLeader) alter(overrides map[string]string) {
	l.t.Helper()
	cfg, err := config.DefaultTopic().With(overrides)
	if err != nil {
		l.t.Fatal(err)
	}
	cfg.FlushPolicy = config.FlushNever
	l.overrides = overrides
	if err := l.p.setState(l.info, cfg); err != nil {
		l.t.Fatal(err)
	}
}

// produce appends n records stamped with the test's clock and moves the
// high watermark as far as the in-sync replicas allow.
func (l *tieredLeader) produce(n int) {
	l.t.Helper()
	bl := record.NewBuilder(record.DefaultBatchOptions())
	for range n {
		v := make([]byte, 100)
		binary.BigEndian.PutUint64(v, l.ids)
		l.ids++
		bl.Add(record.Record{Timestamp: l.now.UnixMilli(), Value: v})
	}
	b, err := bl.Build()
	if err != nil {
		l.t.Fatal(err)
	}
	if _, _, err := l.p.appendAsLeader(b, AcksLeader); err != nil {
		l.t.Fatal(err)
	}
	l.p.advance()
}

// pass runs one tiering pass at the test's clock; it must succeed.
func (l *tieredLeader) pass() {
	l.t.Helper()
	if err := l.p.tierPassErr(context.Background(), l.env(), l.now); err != nil {
		l.t.Fatal(err)
	}
}

// head reads the manifest head from the bucket.
func (l *tieredLeader) head() *tiering.Head {
	l.t.Helper()
	h, _, err := tiering.LoadHead(context.Background(), l.store, l.p.ref())
	if err != nil || h == nil {
		l.t.Fatalf("manifest head: %v, %v", h, err)
	}
	return h
}

// An alter on a partition that uploads nothing more reaches its manifest
// by the next pass: a restore reads the settings from there.
func TestAnAlterReachesTheManifestOfAQuietPartition(t *testing.T) {
	l := newTieredLeader(t, map[string]string{"retention.ms": "7776000000"}, 1)
	l.produce(10)
	if err := l.p.log.Roll(); err != nil {
		t.Fatal(err)
	}
	l.pass()
	if h := l.head(); h.EndOffset() != 10 || h.Config["retention.ms"] != "7776000000" {
		t.Fatalf("after the upload: cold end %d, settings %v", h.EndOffset(), h.Config)
	}
	gen := l.head().Generation
	l.alter(map[string]string{"retention.ms": "8640000000"})
	l.now = l.now.Add(time.Second)
	l.pass()
	h := l.head()
	if h.Config["retention.ms"] != "8640000000" || h.Partitions != 1 {
		t.Fatalf("after an alter and a pass: settings %v, %d partitions", h.Config, h.Partitions)
	}
	if h.EndOffset() != 10 {
		t.Fatalf("a settings commit changed the cold tier: it ends at %d", h.EndOffset())
	}
	// Nothing changed since: the next pass writes nothing.
	l.pass()
	if again := l.head(); again.Generation != h.Generation || h.Generation != gen+1 {
		t.Fatalf("generations %d, %d after the upload %d: want one commit for the alter and none after", h.Generation, again.Generation, gen)
	}
}

// A retention pass after an alter writes the new settings: the manifest
// generation it commits never carries the settings of the last upload.
func TestRetentionAfterAnAlterWritesTheNewSettings(t *testing.T) {
	l := newTieredLeader(t, map[string]string{"retention.ms": "7776000000", "local.retention.ms": "3600000"}, 1)
	for range 3 {
		l.produce(10)
		if err := l.p.log.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	l.pass()
	if h := l.head(); h.EndOffset() != 30 {
		t.Fatalf("cold tier ends at %d, want 30", h.EndOffset())
	}
	// Shorten retention to a minute and let two hours pass: the pass
	// removes every uploaded segment.
	l.alter(map[string]string{"retention.ms": "60000", "local.retention.ms": "60000"})
	l.now = l.now.Add(2 * time.Hour)
	l.pass()
	h := l.head()
	if !h.Empty() {
		t.Fatalf("retention left %d..%d in the cold tier", h.StartOffset(), h.EndOffset())
	}
	if h.Config["retention.ms"] != "60000" || h.Config["local.retention.ms"] != "60000" {
		t.Fatalf("the manifest retention committed carries %v", h.Config)
	}
}

// An idle partition's acknowledged records reach the bucket within
// remote.max.lag.ms of their commit although its segment would not roll
// for an hour, and not at once: the leader seals the active segment only
// once its oldest committed record has waited part of the bound.
func TestAQuietTailReachesTheBucketWithinTheBound(t *testing.T) {
	l := newTieredLeader(t, map[string]string{"remote.max.lag.ms": "2000", "segment.ms": "3600000"}, 1)
	start := l.now
	l.produce(10)
	l.pass()
	if h := l.head(); !h.Empty() {
		t.Fatalf("fresh records went to the bucket at once: cold end %d", h.EndOffset())
	}
	for l.now.Sub(start) < 2*time.Second {
		l.now = l.now.Add(tierInterval)
		l.pass()
		if l.head().EndOffset() == 10 {
			break
		}
	}
	if end := l.head().EndOffset(); end != 10 {
		t.Fatalf("2s after the commit the cold tier ends at %d, want 10", end)
	}
	t.Logf("in the bucket %v after the commit", l.now.Sub(start))
	if age, ok := l.p.uploadLagAge(l.now); !ok || age != 0 {
		t.Fatalf("everything committed is in the bucket, yet the oldest record not in it is %v old", age)
	}
	// More records later: the bound counts from their commit, not from the
	// previous upload.
	l.now = l.now.Add(time.Minute)
	l.pass()
	l.produce(5)
	second := l.now
	for l.head().EndOffset() != 15 {
		if l.now.Sub(second) > 2*time.Second {
			t.Fatalf("the second tail is not in the bucket 2s after its commit")
		}
		l.now = l.now.Add(tierInterval)
		l.pass()
		if age, _ := l.p.uploadLagAge(l.now); l.head().EndOffset() != 15 && age < l.now.Sub(second) {
			t.Fatalf("the oldest record not in the bucket waited %v, reported as %v", l.now.Sub(second), age)
		}
	}
}

// The timer never uploads what is not committed: records that no follower
// has acknowledged stay out of the bucket however old they grow, and go
// within the bound once the high watermark passes them.
func TestTheTimerNeverUploadsAboveTheHighWatermark(t *testing.T) {
	l := newTieredLeader(t, map[string]string{"remote.max.lag.ms": "2000", "segment.ms": "3600000"}, 2)
	l.produce(10) // follower 2 is in the ISR and has not acknowledged
	for range 40 {
		l.now = l.now.Add(tierInterval)
		l.pass()
	}
	if hw := l.p.log.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d without the follower", hw)
	}
	if h := l.head(); !h.Empty() {
		t.Fatalf("uncommitted records in the bucket: it ends at %d", h.EndOffset())
	}
	if verdict, _ := l.p.followerReport(2, 1, 10); verdict != reportCounted {
		t.Fatal("the follower's report was not counted")
	}
	committed := l.now
	for l.head().EndOffset() != 10 {
		if l.now.Sub(committed) > 2*time.Second {
			t.Fatalf("committed records not in the bucket 2s after their commit")
		}
		l.now = l.now.Add(tierInterval)
		l.pass()
	}
}

// With remote.storage.enable switched off (by broker topic defaults, which
// no alter check sees), a partition whose bucket holds its history keeps
// that history as a cold tier: nothing more is uploaded, and retention
// still removes it in time, after which the partition is local only.
func TestASwitchedOffTopicKeepsItsColdHistoryUntilRetention(t *testing.T) {
	b := &Broker{store: objstore.NewMemory()}
	l := newTieredLeader(t, map[string]string{"retention.ms": "7776000000"}, 1)
	l.produce(10)
	if err := l.p.log.Roll(); err != nil {
		t.Fatal(err)
	}
	l.pass()
	if end := l.head().EndOffset(); end != 10 {
		t.Fatalf("cold tier ends at %d, want 10", end)
	}
	l.alter(map[string]string{"retention.ms": "7776000000", "remote.storage.enable": "false"})
	if !l.p.remote(b) || l.p.uploads(b) {
		t.Fatalf("switched off with history in the bucket: remote %v (want true), uploads %v (want false)", l.p.remote(b), l.p.uploads(b))
	}
	l.produce(10)
	if err := l.p.log.Roll(); err != nil {
		t.Fatal(err)
	}
	l.now = l.now.Add(time.Hour)
	l.pass()
	if end := l.head().EndOffset(); end != 10 {
		t.Fatalf("a topic switched off uploaded: the cold tier ends at %d, want 10", end)
	}
	// Retention shortened to a minute, two hours on: the cold history goes,
	// and with it the partition's cold tier.
	l.alter(map[string]string{"retention.ms": "60000", "local.retention.ms": "60000", "remote.storage.enable": "false"})
	l.now = l.now.Add(2 * time.Hour)
	l.pass()
	if h := l.head(); !h.Empty() {
		t.Fatalf("retention left %d..%d in the cold tier of a switched-off topic", h.StartOffset(), h.EndOffset())
	}
	if l.p.remote(b) {
		t.Fatal("with the cold tier empty, a switched-off partition still runs one")
	}
}
