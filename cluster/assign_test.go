package cluster

import (
	"slices"
	"testing"
)

func TestAssignReplicasOneBroker(t *testing.T) {
	for start := range 3 {
		for _, p := range assignReplicas([]int32{5}, 4, 1, start) {
			if !slices.Equal(p.Replicas, []int32{5}) || !slices.Equal(p.ISR, []int32{5}) || p.Leader != 5 || p.LeaderEpoch != 0 {
				t.Fatalf("start %d: %+v", start, p)
			}
		}
	}
}

func TestAssignReplicasSpreads(t *testing.T) {
	brokers := []int32{1, 2, 4} // ids need not be dense
	parts := assignReplicas(brokers, 3, 3, 1)
	want := [][]int32{{2, 4, 1}, {4, 1, 2}, {1, 2, 4}}
	for i, p := range parts {
		if p.Partition != int32(i) || !slices.Equal(p.Replicas, want[i]) || p.Leader != want[i][0] {
			t.Fatalf("partition %d: %+v, want replicas %v", i, p, want[i])
		}
		p.ISR[0] = -7 // the ISR must not alias the replicas
		if p.Replicas[0] == -7 {
			t.Fatal("ISR aliases Replicas")
		}
	}
}

// TestAssignmentRotates checks that single-partition topics created one after
// another get different leaders.
func TestAssignmentRotates(t *testing.T) {
	h := threeBrokers(t)
	leaders := map[int32]bool{}
	for _, name := range []string{"t1", "t2", "t3"} {
		resp := h.ok(createCmd(h.f.meta.Load(), name, 1, 1, nil))
		leaders[resp.topic.Partitions[0].Leader] = true
	}
	if len(leaders) != 3 {
		t.Fatalf("three one-partition topics led by %v, want three different brokers", leaders)
	}
}

func TestNewTopicID(t *testing.T) {
	a, b := newTopicID(), newTopicID()
	if a == b {
		t.Fatal("two equal topic ids")
	}
	if err := validateTopicID(a); err != nil {
		t.Fatal(err)
	}
}
