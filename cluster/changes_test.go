package cluster

import (
	"bytes"
	"io"
	"slices"
	"testing"
)

// ChangesSince names the partitions leader and ISR changes touched, each
// once; says All once a command in the range changed more (a topic
// created or altered, a broker registered) or the log no longer reaches
// back; and ignores commands that change no topic (offset commits).
func TestChangesSince(t *testing.T) {
	h := threeBrokers(t)
	h.ok(createCmd(h.f.meta.Load(), "orders", 3, 3, nil))
	created := h.f.meta.Load().Version
	p0, _ := h.f.meta.Load().Partition("orders", 0)
	p1, _ := h.f.meta.Load().Partition("orders", 1)

	h.ok(&changeLeaderCmd{Topic: "orders", Partition: 0, NewLeader: p0.ISR[1], ExpectedEpoch: 0})
	h.ok(&commitOffsetsCmd{Group: "g", Commits: []offsetCommitEntry{{Topic: "orders", Partition: 0, Offset: 1}}})
	h.ok(&changeISRCmd{Topic: "orders", Partition: 0, ISR: []int32{p0.ISR[1]}, LeaderEpoch: 1, PartitionEpoch: 1})
	h.ok(&changeISRCmd{Topic: "orders", Partition: 1, ISR: []int32{p1.Leader}, LeaderEpoch: 0, PartitionEpoch: 0})
	now := h.f.meta.Load().Version

	ch := h.f.changes.since(created, now)
	slices.SortFunc(ch.Partitions, func(a, b TopicPartition) int { return int(a.Partition - b.Partition) })
	want := []TopicPartition{{"orders", 0}, {"orders", 1}}
	if ch.All || !slices.Equal(ch.Partitions, want) {
		t.Fatalf("changes since the create: %+v; want %v", ch, want)
	}
	if ch := h.f.changes.since(now, now); ch.All || len(ch.Partitions) != 0 {
		t.Fatalf("changes since now: %+v; want none", ch)
	}
	// Up to a version: what came after it is not named.
	if ch := h.f.changes.since(created, created+1); ch.All || !slices.Equal(ch.Partitions, want[:1]) {
		t.Fatalf("changes of the one version after the create: %+v; want %v", ch, want[:1])
	}
	if ch := h.f.changes.since(created-1, now); !ch.All {
		t.Fatalf("changes across a topic create: %+v; want All", ch)
	}
	if ch := h.f.changes.since(0, now); !ch.All {
		t.Fatalf("changes since the start: %+v; want All", ch)
	}

	// A long burst of ISR changes: a reader further behind than the log
	// compares everything, one within it gets the partitions.
	isr := []int32{p1.Leader}
	epoch := int32(1)
	mid := uint64(0)
	for i := range changeLogSize + 10 {
		if i%2 == 0 {
			isr = p1.ISR
		} else {
			isr = []int32{p1.Leader}
		}
		h.ok(&changeISRCmd{Topic: "orders", Partition: 1, ISR: isr, LeaderEpoch: 0, PartitionEpoch: epoch})
		epoch++
		if i == changeLogSize {
			mid = h.f.meta.Load().Version
		}
	}
	last := h.f.meta.Load().Version
	if ch := h.f.changes.since(now, last); !ch.All {
		t.Fatalf("changes further back than the log: %+v; want All", ch)
	}
	if ch := h.f.changes.since(mid, last); ch.All || !slices.Equal(ch.Partitions, want[1:]) {
		t.Fatalf("changes within the log: %+v; want %v", ch, want[1:])
	}

	// A snapshot restore replaces the state: everything before it is All.
	snap := snapshotBytes(t, h.f)
	g := newFSMHarness(t)
	if err := g.f.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if ch := g.f.changes.since(mid, last); !ch.All {
		t.Fatalf("changes across a restore: %+v; want All", ch)
	}
	if ch := g.f.changes.since(last, last); ch.All || len(ch.Partitions) != 0 {
		t.Fatalf("changes since the restored version: %+v; want none", ch)
	}
}
