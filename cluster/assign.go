package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
)

// assignReplicas places the replicas of a new topic's partitions on brokers
// (sorted ids): partition p gets rf consecutive brokers starting at
// brokers[(start+p) % n]. Consecutive partitions therefore have different
// first replicas, and since the first replica becomes the leader, leadership
// spreads over the brokers; start rotates between topics (see
// assignmentStart) so that many small topics do not all lead on the
// lowest id. Every partition starts with ISR = replicas, the first replica
// as leader and epoch 0.
//
// The proposer runs this; the state machine only checks the result, so the
// placement policy (racks, load) can change without a log format change.
func assignReplicas(brokers []int32, partitions int32, rf int, start int) []PartitionInfo {
	n := len(brokers)
	parts := make([]PartitionInfo, partitions)
	for p := range parts {
		replicas := make([]int32, rf)
		for r := range replicas {
			replicas[r] = brokers[(start+p+r)%n]
		}
		parts[p] = PartitionInfo{
			Partition:   int32(p),
			Replicas:    replicas,
			ISR:         slices.Clone(replicas),
			Leader:      replicas[0],
			LeaderEpoch: 0,
		}
	}
	return parts
}

// assignmentStart is the rotating offset of the next topic's assignment:
// the number of partitions that exist, modulo the broker count. It comes
// from the replicated state rather than a counter in memory, so every
// controller, including one elected a moment ago, continues the rotation
// where the last one left it.
func assignmentStart(m *Metadata, brokers int) int {
	total := 0
	for _, t := range m.Topics {
		total += len(t.Partitions)
	}
	return total % brokers
}

// NewTopicID returns a fresh topic id, for a topic whose objects are
// written before it is created (a restored copy).
func NewTopicID() string { return newTopicID() }

// newTopicID returns 16 random bytes as 32 lowercase hex characters.
func newTopicID() string {
	var b [16]byte
	rand.Read(b[:]) // crypto/rand.Read never returns an error (it panics instead)
	return hex.EncodeToString(b[:])
}
