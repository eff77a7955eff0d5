package cluster

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
	"time"
)

// TestFSMAddPartitions: new partitions are appended with the placement the
// proposer chose; the existing ones are the same values as before, and the
// Metadata handed out earlier does not change.
func TestFSMAddPartitions(t *testing.T) {
	h := threeBrokers(t)
	h.ok(createCmd(h.f.meta.Load(), "orders", 2, 2, map[string]string{"retention.ms": "-1"}))
	before := h.f.meta.Load()
	old, _ := before.Topic("orders")

	parts, err := PlanPartitions(before, "orders", 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp := h.ok(&addPartitionsCmd{Name: "orders", ID: old.ID, Partitions: parts})
	got, _ := h.f.meta.Load().Topic("orders")
	if resp.topic != got {
		t.Fatal("the response is not the topic in the new metadata")
	}
	if len(got.Partitions) != 5 || len(old.Partitions) != 2 {
		t.Fatalf("partitions: %d now, %d in the earlier metadata", len(got.Partitions), len(old.Partitions))
	}
	for i := range old.Partitions {
		if !equalPartition(got.Partitions[i], old.Partitions[i]) {
			t.Fatalf("partition %d changed: %+v -> %+v", i, old.Partitions[i], got.Partitions[i])
		}
	}
	leaders := map[int32]bool{}
	for i, p := range got.Partitions {
		leaders[p.Leader] = true
		if i < 2 {
			continue
		}
		if p.Partition != int32(i) || len(p.Replicas) != 2 || !slices.Equal(p.ISR, p.Replicas) || p.Leader != p.Replicas[0] || p.LeaderEpoch != 0 {
			t.Fatalf("new partition %d: %+v", i, p)
		}
	}
	if len(leaders) != 3 {
		t.Fatalf("leadership of 5 partitions on 3 brokers does not spread: leaders %v", leaders)
	}
	if got.ID != old.ID || got.Config["retention.ms"] != "-1" || got.CreatedAtMs != old.CreatedAtMs {
		t.Fatalf("topic identity or settings changed: %+v", got)
	}

	// Refusals change nothing.
	more, err := PlanPartitions(h.f.meta.Load(), "orders", 6, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.refused(&addPartitionsCmd{Name: "missing", ID: old.ID, Partitions: more}, ErrTopicNotFound)
	h.refused(&addPartitionsCmd{Name: "orders", ID: newTopicID(), Partitions: more}, ErrTopicNotFound)
	h.refused(&addPartitionsCmd{Name: "orders", ID: old.ID}, ErrInvalidPartitions)
	stale := slices.Clone(parts[:1]) // numbered 2, but the topic has 5 now
	h.refused(&addPartitionsCmd{Name: "orders", ID: old.ID, Partitions: stale}, ErrInvalidPartitions)
	gap := slices.Clone(more)
	gap = append(gap, PartitionInfo{Partition: 7, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})
	h.refused(&addPartitionsCmd{Name: "orders", ID: old.ID, Partitions: gap}, ErrInvalidAssignment)
	wide := slices.Clone(more)
	wide[0].Replicas, wide[0].ISR = []int32{1, 2, 3}, []int32{1, 2, 3}
	h.refused(&addPartitionsCmd{Name: "orders", ID: old.ID, Partitions: wide}, ErrInvalidAssignment)
	ghost := slices.Clone(more)
	ghost[0].Replicas, ghost[0].ISR, ghost[0].Leader = []int32{1, 9}, []int32{1, 9}, 1
	h.refused(&addPartitionsCmd{Name: "orders", ID: old.ID, Partitions: ghost}, ErrBrokerNotFound)
	many := make([]PartitionInfo, MaxPartitions)
	for i := range many {
		many[i] = PartitionInfo{Partition: int32(5 + i), Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1}
	}
	h.refused(&addPartitionsCmd{Name: "orders", ID: old.ID, Partitions: many}, ErrInvalidPartitions)
}

// TestPlanPartitions: the proposer's checks: only an increase, within
// MaxPartitions, assignments of the topic's replication factor on
// registered brokers; new partitions start in the topic's highest epoch.
func TestPlanPartitions(t *testing.T) {
	h := threeBrokers(t)
	h.ok(createCmd(h.f.meta.Load(), "orders", 3, 2, nil))
	id := func() string { tp, _ := h.f.meta.Load().Topic("orders"); return tp.ID }()
	h.ok(&changeLeaderCmd{Topic: "orders", Partition: 1, NewLeader: 3, ExpectedEpoch: 0})
	m := h.f.meta.Load()

	for _, count := range []int32{-1, 0, 2, 3} {
		if _, err := PlanPartitions(m, "orders", count, nil); !errors.Is(err, ErrInvalidPartitions) {
			t.Fatalf("count %d: %v, want ErrInvalidPartitions", count, err)
		}
	}
	if _, err := PlanPartitions(m, "orders", MaxPartitions+1, nil); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("count above MaxPartitions: %v", err)
	}
	if _, err := PlanPartitions(m, "missing", 4, nil); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("missing topic: %v", err)
	}
	parts, err := PlanPartitions(m, "orders", 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1 || parts[0].Partition != 3 || parts[0].LeaderEpoch != 1 {
		t.Fatalf("planned %+v, want partition 3 in epoch 1 (the topic's highest)", parts)
	}

	given, err := PlanPartitions(m, "orders", 5, [][]int32{{3, 1}, {2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if given[0].Leader != 3 || !slices.Equal(given[0].Replicas, []int32{3, 1}) || !slices.Equal(given[1].Replicas, []int32{2, 3}) {
		t.Fatalf("assignment not honoured: %+v", given)
	}
	for _, bad := range []struct {
		assignment [][]int32
		want       error
	}{
		{[][]int32{{1, 2}}, ErrInvalidAssignment},         // one list for two partitions
		{[][]int32{{1, 2}, {1}}, ErrInvalidAssignment},    // another replication factor
		{[][]int32{{1, 2}, {1, 1}}, ErrInvalidAssignment}, // a broker twice
		{[][]int32{{1, 2}, {}}, ErrInvalidAssignment},
		{[][]int32{{1, 2}, {1, 7}}, ErrBrokerNotFound},
	} {
		if _, err := PlanPartitions(m, "orders", 5, bad.assignment); !errors.Is(err, bad.want) {
			t.Fatalf("assignment %v: %v, want %v", bad.assignment, err, bad.want)
		}
	}
	h.ok(&addPartitionsCmd{Name: "orders", ID: id, Partitions: given})
}

// TestSnapshotAddedPartitions: a snapshot carries the added partitions and
// a restored state goes on adding from there.
func TestSnapshotAddedPartitions(t *testing.T) {
	src := threeBrokers(t)
	src.ok(createCmd(src.f.meta.Load(), "orders", 1, 3, nil))
	parts, err := PlanPartitions(src.f.meta.Load(), "orders", 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	tp, _ := src.f.meta.Load().Topic("orders")
	src.ok(&addPartitionsCmd{Name: "orders", ID: tp.ID, Partitions: parts})

	dst := newFSMHarness(t)
	if err := dst.f.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, src.f)))); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "metadata", dst.f.meta.Load(), src.f.meta.Load())
	dst.index = dst.f.index.Load()
	more, err := PlanPartitions(dst.f.meta.Load(), "orders", 6, nil)
	if err != nil {
		t.Fatal(err)
	}
	dst.ok(&addPartitionsCmd{Name: "orders", ID: tp.ID, Partitions: more})
	if got, _ := dst.f.meta.Load().Topic("orders"); len(got.Partitions) != 6 {
		t.Fatalf("partitions after restore and add: %d", len(got.Partitions))
	}
}

// TestNodeAddPartitions: the write path on a real single-voter Raft group.
func TestNodeAddPartitions(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Bootstrap = true
	n := openNode(t, cfg)
	waitReady(t, n)
	ctx := testContext(t, 10*time.Second)
	if err := n.RegisterBroker(ctx, BrokerInfo{ID: 1, Addr: "127.0.0.1:9092", RaftAddr: n.RaftAddr()}); err != nil {
		t.Fatal(err)
	}
	orders, err := n.CreateTopic(ctx, "orders", 2, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := n.AddPartitions(ctx, "orders", 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Partitions) != 5 || got.ID != orders.ID {
		t.Fatalf("after add: %+v", got)
	}
	if m, _ := n.Metadata().Topic("orders"); m != got {
		t.Fatal("AddPartitions' answer is not the topic in Metadata")
	}
	_, err = n.AddPartitions(ctx, "orders", 5, nil)
	mustIs(t, err, ErrInvalidPartitions)
	_, err = n.AddPartitions(ctx, "orders", 3, nil)
	mustIs(t, err, ErrInvalidPartitions)
	_, err = n.AddPartitions(ctx, "missing", 3, nil)
	mustIs(t, err, ErrTopicNotFound)
	_, err = n.AddPartitions(ctx, "orders", 6, [][]int32{{2}})
	mustIs(t, err, ErrBrokerNotFound)
	if m, _ := n.Metadata().Topic("orders"); len(m.Partitions) != 5 {
		t.Fatalf("refusals changed the topic: %d partitions", len(m.Partitions))
	}
}
