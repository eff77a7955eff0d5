package broker

import (
	"context"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/tiering"
)

// RestoreCopy asks for a restore into a copy: under a new name, cut at a
// point in time or an offset.
type RestoreCopy struct {
	// As is the name of the new topic; empty restores under the source's
	// name (which the cluster must no longer have).
	As string
	// ToOffset, when set, ends each partition's restored log before it
	// (0 or more); ToTime, when set, after its records at that time (ms
	// since 1970, 0 or more); at most one of them.
	ToOffset *int64
	ToTime   *int64
}

// Copies says whether rc asks for a copy (RestoreTopicCopy) rather than
// the topic back under its own id (RestoreTopic): a new name or a cut.
func (rc RestoreCopy) Copies() bool {
	return rc.As != "" || rc.ToOffset != nil || rc.ToTime != nil
}

// restoreCut is where rc cuts the copy, for tiering.CopyPartition, or
// INVALID_REQUEST for a cut that cannot be: both a time and an offset, or
// either below 0.
func restoreCut(rc RestoreCopy) (tiering.RestoreCut, error) {
	cut := tiering.RestoreCut{ToOffset: tiering.NoCut, ToTime: tiering.NoCut}
	switch {
	case rc.ToTime != nil && rc.ToOffset != nil:
		return cut, InvalidRequest("restore to a time or to an offset, not both")
	case rc.ToTime != nil && *rc.ToTime < 0:
		return cut, InvalidRequest("restore to time %d: a time before 1970 holds no record", *rc.ToTime)
	case rc.ToOffset != nil && *rc.ToOffset < 0:
		return cut, InvalidRequest("restore to offset %d: an offset is 0 or more", *rc.ToOffset)
	}
	if rc.ToTime != nil {
		cut.ToTime = *rc.ToTime
	}
	if rc.ToOffset != nil {
		cut.ToOffset = *rc.ToOffset
	}
	return cut, nil
}

// RestoreTopicCopy restores a topic from the bucket into a new topic id:
// every partition's cold tier, up to the cut, is copied under the new
// topic's keys (tiering.CopyPartition: whole objects copied, the one the
// cut falls inside rewritten to end exactly there) and its manifest head
// written, all before the topic exists; the topic is then created with
// that id, and its leaders take the heads over as for any restore. The
// source, which may still be live (with As), is only read: retention or
// deletion of one topic never touches the other's objects. A truncated
// restore under the source's own name also gets a new id: the old
// objects stay in the bucket, untouched, under the old id, until an
// operator deletes them (strata bucket ls shows them).
//
// A cut that cannot be (RestoreCopy) is INVALID_REQUEST before anything
// else is checked. A cut that keeps no record of any partition (a time
// before the first record, offset 0) is refused: there is nothing to
// restore.
func (b *Broker) RestoreTopicCopy(ctx context.Context, name, id string, replicationFactor int32, rc RestoreCopy) (TopicDescription, error) {
	return forward(b, ctx, func() (TopicDescription, error) {
		return b.restoreTopicCopy(ctx, name, id, replicationFactor, rc)
	}, func(c ControllerClient) (TopicDescription, error) {
		d, err := c.RestoreTopic(ctx, name, id, replicationFactor, rc)
		if err != nil {
			return d, err
		}
		return b.describeApplied(ctx, d), nil
	})
}

func (b *Broker) restoreTopicCopy(ctx context.Context, name, id string, replicationFactor int32, rc RestoreCopy) (TopicDescription, error) {
	cut, err := restoreCut(rc)
	if err != nil {
		return TopicDescription{}, err
	}
	return b.role.restoreTopicCut(ctx, name, id, replicationFactor, rc.As, cut)
}

// restoreTopicCut is restoreTopicCopy once the cut is known to be one: as
// is the new topic's name (empty: name).
func (b clusterMember) restoreTopicCut(ctx context.Context, name, id string, replicationFactor int32, as string, cut tiering.RestoreCut) (TopicDescription, error) {
	if b.store == nil {
		return TopicDescription{}, refuse(ReasonInvalidRequest, nil, "this broker has no object store (object_store.type is none)")
	}
	target := as
	if target == "" {
		target = name
	}
	for _, n := range []string{name, target} {
		if err := cluster.ValidateTopicName(n); err != nil {
			return TopicDescription{}, refuse(ReasonInvalidTopicName, err, "%v", err)
		}
	}
	if err := checkReplicationFactor(replicationFactor); err != nil {
		return TopicDescription{}, err
	}
	md := b.meta.Metadata()
	if live, ok := md.Topic(target); ok {
		if target == name {
			return TopicDescription{}, b.restoreLiveError(ctx, live)
		}
		return TopicDescription{}, refuse(ReasonTopicAlreadyExists, nil, "topic %q exists (id %s): restore --as needs a name no topic has", target, live.ID).with("topic_id", live.ID)
	}
	if live, ok := md.Topic(name); ok && id == "" {
		id = live.ID // the copy is of the running topic, not of an older one of that name
	}
	found, overrides, cfg, err := b.findRestorable(ctx, name, id, replicationFactor)
	if err != nil {
		return TopicDescription{}, err
	}
	if err := b.checkReplicaBudget(target, found.Partitions, cfg.ReplicationFactor); err != nil {
		return TopicDescription{}, err
	}
	top, err := maxColdProducerID(ctx, b.store, found.Heads)
	if err != nil {
		return TopicDescription{}, refuse(ReasonStorageError, err, "%s: reading the producer state in the bucket: %v", name, err)
	}

	newID := cluster.NewTopicID()
	kept := 0
	for p, h := range found.Heads {
		dst := tiering.PartitionRef{Topic: target, TopicID: newID, Partition: p}
		copied, err := tiering.CopyPartition(ctx, b.store, h, dst, cut)
		if err != nil {
			b.dropCopy(target, newID)
			return TopicDescription{}, refuse(ReasonStorageError, err, "%s: copying partition %d into %s: %v", name, p, target, err)
		}
		if copied != nil {
			kept++
		}
	}
	if kept == 0 {
		return TopicDescription{}, refuse(ReasonInvalidRequest, nil, "%s: the cut keeps no record of any partition (it is at or before the first record in the bucket): nothing to restore", name)
	}
	if top >= 0 {
		if err := b.meta.ReserveProducerIDs(ctx, top); err != nil {
			b.dropCopy(target, newID)
			return TopicDescription{}, clusterError(err)
		}
	}
	// The copy's manifests are written in epoch 0 (CopyPartition), so its
	// first leaders start there.
	t, err := b.meta.RestoreTopic(ctx, target, newID, found.Partitions, cfg.ReplicationFactor, overrides, 0)
	if err != nil {
		b.dropCopy(target, newID)
		return TopicDescription{}, clusterError(err)
	}
	return b.restored(ctx, t)
}

// dropCopy removes a copy that will not become a topic (its objects have
// a topic id no topic has, so nothing else would ever collect them).
func (b *Broker) dropCopy(name, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tiering.DeleteTopic(ctx, b.store, name, id); err != nil {
		b.log.Warn("removing an unfinished restore copy failed", "topic", name, "id", id, "err", err)
	}
}
