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

// PlanPartitions returns the partitions AddPartitions would add to take
// topic name to count partitions, as the state m has it: with assignment
// nil, placed as the topic's first partitions were (the same replication
// factor, leadership continuing the rotation from where partition 0's
// leader sits); else each new partition on the replicas assignment lists
// for it, in order, the first as leader. Every new partition starts with
// ISR = replicas, in the highest leader epoch among the topic's
// partitions: a restored topic starts above the epochs its manifests were
// written in (Node.RestoreTopic), and a new partition must start there too
// or a manifest under its number would fence its first leader.
func PlanPartitions(m *Metadata, name string, count int32, assignment [][]int32) ([]PartitionInfo, error) {
	t, ok := m.Topic(name)
	if !ok {
		return nil, errorf(ErrTopicNotFound, "%q", name)
	}
	have := int32(len(t.Partitions))
	if count <= have {
		return nil, errorf(ErrInvalidPartitions, "topic %q has %d partitions; the count asked for, %d, must be more", name, have, count)
	}
	if err := validatePartitionCount(int(count)); err != nil {
		return nil, err
	}
	rf := len(t.Partitions[0].Replicas)
	epoch := int32(0)
	for _, p := range t.Partitions {
		epoch = max(epoch, p.LeaderEpoch)
	}
	var parts []PartitionInfo
	if assignment == nil {
		brokers := m.BrokerIDs()
		if rf > len(brokers) {
			return nil, errorf(ErrNotEnoughBrokers, "replication factor %d needs %d brokers, %d registered", rf, rf, len(brokers))
		}
		start := max(slices.Index(brokers, t.Partitions[0].Replicas[0]), 0)
		parts = assignReplicas(brokers, count, rf, start)[have:]
	} else {
		if int32(len(assignment)) != count-have {
			return nil, errorf(ErrInvalidAssignment, "topic %q: %d replica lists for %d new partitions", name, len(assignment), count-have)
		}
		parts = make([]PartitionInfo, len(assignment))
		for i, replicas := range assignment {
			if len(replicas) == 0 {
				return nil, errorf(ErrInvalidAssignment, "%s/%d: no replicas", name, have+int32(i))
			}
			parts[i] = PartitionInfo{Partition: have + int32(i), Replicas: slices.Clone(replicas), ISR: slices.Clone(replicas), Leader: replicas[0]}
		}
	}
	for i := range parts {
		parts[i].LeaderEpoch = epoch
	}
	if err := validatePartitions(name, parts, have, m.Brokers); err != nil {
		return nil, err
	}
	for _, p := range parts {
		if len(p.Replicas) != rf {
			return nil, errorf(ErrInvalidAssignment, "%s/%d: %d replicas, but the topic's replication factor is %d", name, p.Partition, len(p.Replicas), rf)
		}
	}
	return parts, nil
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
