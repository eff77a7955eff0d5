package broker

import (
	"context"
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
		return nil, b.notLeading(m, topic, id, info.Leader)
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

// notLeading is the refusal of a request for a partition leader leads
// (or none does), as the metadata m has it (notLeading).
func (b *Broker) notLeading(m *cluster.Metadata, topic string, id, leader int32) *Error {
	return notLeading(leader, brokerAddr(m, leader), "broker %d does not lead %s/%d", b.id, topic, id)
}

// brokerAddr is the client address of broker id as the metadata m has
// it; "" for a broker it does not know.
func brokerAddr(m *cluster.Metadata, id int32) string {
	if info, ok := m.Broker(id); ok {
		return info.Addr
	}
	return ""
}

// leaderAddr is the client address of broker id as this broker's metadata
// has it now, for the NOT_LEADER a replica answers (partition.brokerAddr).
func (b *Broker) leaderAddr(id int32) string { return brokerAddr(b.meta.Metadata(), id) }

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
