package broker

import (
	"context"
	"strconv"
	"time"

	"github.com/strata-log/strata/cluster"
)

// leaderPartition returns the local replica of a partition this broker
// leads, or the error a client should see: the topic or partition does not
// exist, another broker leads it (with that broker's address), or this
// broker leads it but has not opened it yet.
func (b *Broker) leaderPartition(topic string, id int32) (*partition, error) {
	m := b.topicMetadata(topic)
	info, err := partitionInfo(m, topic, id)
	if err != nil {
		return nil, err
	}
	if info.Leader != b.id {
		return nil, b.notLeader(m, topic, id, info.Leader)
	}
	b.mu.RLock()
	p, ok := b.mu.partitions[cluster.TopicPartition{Topic: topic, Partition: id}]
	b.mu.RUnlock()
	if !ok {
		return nil, refuse(ReasonLeaderNotAvailable, nil, "%s/%d: this broker leads it but is still opening it", topic, id)
	}
	return p, nil
}

// topicMetadata returns the metadata, waiting a little for a topic this
// broker does not know yet: a topic just created (or changed) through
// another broker reaches this one's copy of the metadata a few
// milliseconds later, and a client that follows up at once should not be
// told it does not exist.
func (b *Broker) topicMetadata(topic string) *cluster.Metadata {
	m := b.meta.Metadata()
	if _, ok := m.Topic(topic); ok || b.meta.IsController() {
		return m
	}
	deadline := time.NewTimer(metadataCatchUp)
	defer deadline.Stop()
	for {
		changed := b.meta.Changed()
		if m = b.meta.Metadata(); func() bool { _, ok := m.Topic(topic); return ok }() {
			return m
		}
		select {
		case <-changed:
		case <-deadline.C:
			return m
		}
	}
}

// metadataCatchUp bounds how long a broker waits for its copy of the
// metadata to learn of a topic it does not know.
const metadataCatchUp = time.Second

func partitionInfo(m *cluster.Metadata, topic string, id int32) (cluster.PartitionInfo, error) {
	t, ok := m.Topic(topic)
	if !ok {
		return cluster.PartitionInfo{}, refuse(ReasonTopicNotFound, nil, "topic %q not found", topic)
	}
	info, ok := t.Partition(id)
	if !ok {
		return cluster.PartitionInfo{}, refuse(ReasonPartitionNotFound, nil, "topic %q has no partition %d: it has %d", topic, id, len(t.Partitions))
	}
	return info, nil
}

func (b *Broker) notLeader(m *cluster.Metadata, topic string, id, leader int32) *Error {
	if leader == cluster.NoLeader {
		return refuse(ReasonLeaderNotAvailable, nil, "%s/%d has no leader right now", topic, id)
	}
	addr := ""
	if info, ok := m.Broker(leader); ok {
		addr = info.Addr
	}
	return refuse(ReasonNotLeader, nil, "broker %d does not lead %s/%d: broker %d at %s does", b.id, topic, id, leader, addr).
		with("leader_id", strconv.Itoa(int(leader))).
		with("leader_address", addr)
}

// waitReconciled waits until the local partitions reflect metadata version v.
func (b *Broker) waitReconciled(ctx context.Context, v uint64) error {
	for {
		b.mu.RLock()
		done, ch := b.mu.reconciled >= v, b.reconciledCh
		b.mu.RUnlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
