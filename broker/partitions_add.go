package broker

// Adding partitions to a topic. The partition count only grows; the new
// partitions are placed as a new topic's are (or where an assignment
// says), start empty, and are opened by every broker's reconcile like a
// topic's first ones. Existing partitions, their data and their leaders
// are untouched. Every manifest in the bucket records the topic's
// partition count, so an increase, like a settings change, is answered
// once they all record the new one. What moves is the mapping of keys to
// partitions: a producer that hashes keys modulo the count sends a key to
// another partition once it sees the new count.

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/strata-log/strata/cluster"
)

// AddPartitions raises topic name's partition count to count, and answers
// with the topic as this broker then describes it. assignment, when not
// nil, lists the replicas of each new partition in turn (the first leads);
// nil places them as CreateTopic would. Refusals (INVALID_REQUEST unless
// said): a missing topic (TOPIC_NOT_FOUND), a count not above the current
// one or above cluster.MaxPartitions (meta "field"="partitions"), an
// assignment of the wrong length, of another replication factor than the
// topic's or naming an unknown broker (meta "field"="assignment"), and new
// replicas beyond a broker's limit (limits.go). Any broker takes it; it is
// made at the controller.
func (b *Broker) AddPartitions(ctx context.Context, name string, count int32, assignment [][]int32) (TopicDescription, error) {
	return forward(b, ctx, func() (TopicDescription, error) {
		return b.addPartitions(ctx, name, count, assignment)
	}, func(c ControllerClient) (TopicDescription, error) {
		d, err := c.AddPartitions(ctx, name, count, assignment)
		if err != nil {
			return d, err
		}
		return b.partitionsApplied(ctx, d), nil
	})
}

// ValidateAddPartitions answers as AddPartitions would, changing nothing.
func (b *Broker) ValidateAddPartitions(name string, count int32, assignment [][]int32) error {
	_, err := b.role.planPartitions(name, count, assignment)
	return err
}

func (b *Broker) addPartitions(ctx context.Context, name string, count int32, assignment [][]int32) (TopicDescription, error) {
	if _, err := b.role.planPartitions(name, count, assignment); err != nil {
		return TopicDescription{}, err
	}
	t, err := b.meta.AddPartitions(ctx, name, count, assignment)
	if err != nil {
		return TopicDescription{}, addPartitionsError(err)
	}
	if err := b.waitReconciled(ctx, b.meta.Metadata().Version); err != nil {
		return TopicDescription{}, err
	}
	// Every manifest records the partition count (restore reads it from
	// there), so the answer waits, as an alter does, until each partition's
	// leader has written the new one.
	if err := b.awaitConfigInBucket(ctx, name, t.ID); err != nil {
		var be *Error
		if errors.As(err, &be) && be.Reason == ReasonTimeout {
			return TopicDescription{}, refuse(ReasonTimeout, err,
				"topic %q has %d partitions in the cluster metadata, in force, but the manifests of partitions %s in the bucket do not record that count yet: a restore from the bucket now could miss the new partitions. "+
					"Each partition's leader writes it as soon as it can reach the object store; see `strata topic describe %s` for tiering errors",
				name, len(t.Partitions), be.Meta["partitions"], name).with("partitions", be.Meta["partitions"])
		}
		return TopicDescription{}, err
	}
	b.awaitTierLoaded(ctx, t.ID, time.Second)
	return b.describe(t), nil
}

// planPartitions checks an increase against this broker's metadata and
// limits and returns the partitions it would add.
func (b clusterMember) planPartitions(name string, count int32, assignment [][]int32) ([]cluster.PartitionInfo, error) {
	if err := cluster.ValidateTopicName(name); err != nil {
		return nil, refuse(ReasonInvalidTopicName, err, "%v", err)
	}
	m := b.topicMetadata(name)
	parts, err := cluster.PlanPartitions(m, name, count, assignment)
	if err != nil {
		return nil, addPartitionsError(err)
	}
	if err := b.checkAddedReplicas(m, name, parts); err != nil {
		return nil, err
	}
	return parts, nil
}

// addPartitionsError translates the metadata group's refusals of an
// increase, naming the field at fault so that a front end with finer codes
// (Kafka's INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT) can tell.
func addPartitionsError(err error) error {
	switch {
	case errors.Is(err, cluster.ErrInvalidPartitions):
		return refuse(ReasonInvalidRequest, err, "%v", err).with("field", "partitions")
	case errors.Is(err, cluster.ErrInvalidAssignment), errors.Is(err, cluster.ErrBrokerNotFound):
		return refuse(ReasonInvalidRequest, err, "%v", err).with("field", "assignment")
	}
	return clusterError(err)
}

// checkAddedReplicas refuses new partitions that would put more partition
// replicas on a broker than the limit, as checkReplicaBudget does for a
// new topic.
func (b *Broker) checkAddedReplicas(m *cluster.Metadata, name string, parts []cluster.PartitionInfo) error {
	if b.limits == nil || b.limits.maxReplicas <= 0 {
		return nil
	}
	now, _ := cluster.ReplicaCounts(m, 1, 1)
	adds := map[int32]int{}
	for _, p := range parts {
		for _, id := range p.Replicas {
			adds[id]++
		}
	}
	for _, id := range slices.Sorted(maps.Keys(adds)) {
		if after := now[id] + adds[id]; after > b.limits.maxReplicas {
			return refuse(ReasonInvalidRequest, nil,
				"adding %d partitions to topic %q would put %d partition replicas on broker %d, which holds %d; at most %d are allowed per broker (limits.max_partitions_per_broker). "+
					"Add fewer partitions, add brokers, or raise the limit on every broker",
				len(parts), name, after, id, now[id], b.limits.maxReplicas).
				with("broker_id", itoa(int64(id))).with("replicas", itoa(int64(now[id]))).
				with("requested", itoa(int64(adds[id]))).with("limit", itoa(int64(b.limits.maxReplicas))).
				with("setting", "limits.max_partitions_per_broker")
		}
	}
	return nil
}

// partitionsApplied waits until this broker has the partitions the
// controller described, then describes the topic from here; the
// controller's description if the wait ends first.
func (b *Broker) partitionsApplied(ctx context.Context, d TopicDescription) TopicDescription {
	var t *cluster.TopicInfo
	ok := false
	b.awaitApplied(ctx, func(m *cluster.Metadata) bool {
		t, ok = m.Topic(d.Name)
		ok = ok && t.ID == d.ID && len(t.Partitions) >= len(d.Partitions)
		return ok
	})
	if !ok {
		return d
	}
	return b.describe(t)
}
