package broker

import (
	"testing"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
)

// A leader removes no tombstone that a replica may not have copied yet:
// its floor is the lowest log end among all the partition's replicas, in
// the ISR or not, and nothing until each has reported in this epoch. Seed
// 101 of the simulation is the scenario end to end: broker 3 was away
// while the leader removed a tombstone, copied the cleaned range without
// it, and served the deleted key again.
func TestLeaderTombstoneFloorIsTheLowestReplicaLogEnd(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1}
	r := newTestReplica(t, 1, info, 1)
	r.produce(1, 10)
	r.p.sentTo(2, 10, true)
	r.p.followerReport(2, 0, 10)
	if hw := r.p.log.HighWatermark(); hw != 10 {
		t.Fatalf("high watermark %d, want 10", hw)
	}
	if got := r.p.tombstoneFloor(); got != 0 {
		t.Fatalf("floor %d before broker 3 (out of the ISR) reported; want 0", got)
	}
	r.p.followerReport(3, 0, 4)
	if got := r.p.tombstoneFloor(); got != 4 {
		t.Fatalf("floor %d with broker 3 at 4; want 4", got)
	}
	r.p.sentTo(3, 10, true)
	r.p.followerReport(3, 0, 10)
	if got := r.p.tombstoneFloor(); got != 10 {
		t.Fatalf("floor %d with every replica at 10; want 10", got)
	}
	// Never past the high watermark: records beyond it may still be cut.
	r.produce(11, 5)
	r.p.sentTo(3, 15, true)
	r.p.followerReport(3, 0, 15)
	if hw, got := r.p.log.HighWatermark(), r.p.tombstoneFloor(); got != hw || hw != 10 {
		t.Fatalf("floor %d, high watermark %d; want both 10 (broker 2, in the ISR, has 10)", got, hw)
	}
	// A new epoch knows nobody's position yet.
	info.LeaderEpoch, info.PartitionEpoch = 1, 1
	r.apply(info)
	if got := r.p.tombstoneFloor(); got != 0 {
		t.Fatalf("floor %d in a new epoch before any report; want 0", got)
	}
}

// A replica alone has nobody to wait for.
func TestLoneReplicaTombstoneFloorIsItsHighWatermark(t *testing.T) {
	r := newTestReplica(t, 1, cluster.PartitionInfo{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}, 1)
	r.produce(1, 7)
	r.p.advance()
	if hw, got := r.p.log.HighWatermark(), r.p.tombstoneFloor(); got != hw || hw != 7 {
		t.Fatalf("floor %d, high watermark %d; want 7", got, hw)
	}
}

// A follower cleans below what its leader last told it in its epoch, and
// below nothing once the leader or the epoch changes.
func TestFollowerTakesItsLeadersTombstoneFloor(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 2}
	r := newTestReplica(t, 2, info, 1)
	if got := r.p.tombstoneFloor(); got != 0 {
		t.Fatalf("floor %d before the leader said; want 0", got)
	}
	r.p.takeTombstoneFloor(1, 2, 40)
	if got := r.p.tombstoneFloor(); got != 40 {
		t.Fatalf("floor %d after the leader said 40", got)
	}
	r.p.takeTombstoneFloor(3, 2, 90) // not its leader
	r.p.takeTombstoneFloor(1, 1, 90) // an old epoch
	if got := r.p.tombstoneFloor(); got != 40 {
		t.Fatalf("floor %d after chunks from another leader or epoch; want 40", got)
	}
	info.Leader, info.LeaderEpoch, info.PartitionEpoch = 3, 3, 1
	r.apply(info)
	if got := r.p.tombstoneFloor(); got != 0 {
		t.Fatalf("floor %d under a new leader that has said nothing; want 0", got)
	}
}

// The leader's chunks carry the floor for a compacted topic only.
func TestPushedChunksCarryTheTombstoneFloor(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1}
	r := newTestReplica(t, 1, info, 1)
	r.produce(1, 10)
	r.p.sentTo(2, 6, false)
	r.p.followerReport(2, 0, 6)
	c, _, ok := r.p.pushChunk(2, 0, pushBatches, 6, 10, 6, 0, 1<<20)
	if !ok || c.TombstoneFloor != 0 {
		t.Fatalf("chunk of a delete topic: ok %v, floor %d; want no floor", ok, c.TombstoneFloor)
	}
	cfg := r.cfg
	cfg.CleanupPolicy = config.CleanupCompact
	r.p.cfg.Store(&cfg)
	c, _, ok = r.p.pushChunk(2, 0, pushHighWatermark, 10, 10, 6, 0, 1<<20)
	if !ok || c.TombstoneFloor != 6 {
		t.Fatalf("chunk of a compacted topic: ok %v, floor %d; want 6", ok, c.TombstoneFloor)
	}
}
