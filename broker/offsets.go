package broker

// Consumer group positions: committing them (through the group's
// coordinator, so only a member's own partitions) and reading them back
// (from the controller, once it has confirmed it still is).

import (
	"context"
	"errors"

	"github.com/strata-log/strata/cluster"
)

// CommitOffsets stores a consumer group's positions. A member of the group
// (memberID set) commits through the coordinator, which allows only the
// partitions it owns (FENCED_MEMBER, UNKNOWN_MEMBER); a commit without a
// member is refused while the group has members (GROUP_NOT_EMPTY). A group
// name breaking the rules (cluster.ValidateGroupName) is INVALID_REQUEST,
// and so is a commit that would create a group beyond limits.max_groups.
func (b *Broker) CommitOffsets(ctx context.Context, group, memberID string, memberEpoch int32, offsets []CommittedOffset) error {
	_, err := forward(b, ctx, func() (struct{}, error) {
		return struct{}{}, b.commitOffsetsCall(ctx, group, memberID, memberEpoch, offsets)
	}, func(c ControllerClient) (struct{}, error) {
		return struct{}{}, c.CommitOffsets(ctx, group, memberID, memberEpoch, offsets)
	})
	return err
}

func (b *Broker) commitOffsetsCall(ctx context.Context, group, memberID string, memberEpoch int32, offsets []CommittedOffset) error {
	return b.role.commitOffsetsCall(ctx, group, memberID, memberEpoch, offsets)
}

func (b clusterMember) commitOffsetsCall(ctx context.Context, group, memberID string, memberEpoch int32, offsets []CommittedOffset) error {
	if err := validGroupName(group); err != nil {
		return err
	}
	// The coordinator first: a broker that is not the controller hands
	// the call on before judging it against metadata that may lag.
	c, err := b.coordinator(ctx)
	if err != nil {
		return err
	}
	reqs, err := b.offsetCommits(offsets)
	if err != nil {
		return err
	}
	tps := make([]TopicPartition, len(reqs))
	for i, r := range reqs {
		tps[i] = TopicPartition{Topic: r.Topic, Partition: r.Partition}
	}
	err = c.Commit(group, memberID, memberEpoch, tps, func() error { return b.commitOffsets(ctx, group, reqs) })
	if err != nil {
		return b.groupError(ctx, group, memberID, err)
	}
	return nil
}

// offsetCommits checks that every partition of a commit exists.
func (b *Broker) offsetCommits(offsets []CommittedOffset) ([]cluster.OffsetCommitRequest, error) {
	m := b.meta.Metadata()
	reqs := make([]cluster.OffsetCommitRequest, 0, len(offsets))
	for _, o := range offsets {
		if _, err := partitionInfo(m, o.Topic, o.Partition); err != nil {
			return nil, err
		}
		reqs = append(reqs, cluster.OffsetCommitRequest{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata})
	}
	return reqs, nil
}

// commitOffsets writes a group's positions to the metadata.
func (b *Broker) commitOffsets(ctx context.Context, group string, reqs []cluster.OffsetCommitRequest) error {
	if err := b.meta.CommitOffsets(ctx, group, reqs, b.limits.commitOptions()...); err != nil {
		var tm *cluster.TooManyGroupsError
		if errors.As(err, &tm) {
			return maxGroupsError(err, tm)
		}
		return clusterError(err)
	}
	return nil
}

// FetchOffsets returns a group's positions: in the partitions named, or in
// every partition it committed. Only the controller answers, once it has
// confirmed through Raft that it still is (a deposed one answering from its
// own state could show positions older than those committed since); any
// other broker answers not-the-controller and the call is forwarded.
func (b *Broker) FetchOffsets(ctx context.Context, group string, partitions []TopicPartition) ([]CommittedOffset, error) {
	return forward(b, ctx, func() ([]CommittedOffset, error) {
		return b.fetchOffsets(ctx, group, partitions)
	}, func(c ControllerClient) ([]CommittedOffset, error) {
		return c.FetchOffsets(ctx, group, partitions)
	})
}

func (b *Broker) fetchOffsets(ctx context.Context, group string, partitions []TopicPartition) ([]CommittedOffset, error) {
	return b.role.fetchOffsets(ctx, group, partitions)
}

func (b clusterMember) fetchOffsets(ctx context.Context, group string, partitions []TopicPartition) ([]CommittedOffset, error) {
	if _, err := b.meta.VerifyController(ctx); err != nil {
		return nil, clusterError(err)
	}
	return b.committedOffsets(group, partitions), nil
}

// committedOffsets reads a group's positions from this broker's metadata.
func (b *Broker) committedOffsets(group string, partitions []TopicPartition) []CommittedOffset {
	return b.role.committedOffsets(group, partitions)
}

func (b clusterMember) committedOffsets(group string, partitions []TopicPartition) []CommittedOffset {
	var out []CommittedOffset
	add := func(tp TopicPartition, c cluster.OffsetCommit) {
		out = append(out, CommittedOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: c.Offset, Metadata: c.Metadata, CommitTimeMs: c.CommittedAtMs})
	}
	if len(partitions) == 0 {
		for tp, c := range b.meta.CommittedOffsets(group) {
			add(tp, c)
		}
		return out
	}
	for _, tp := range partitions {
		if c, ok := b.meta.CommittedOffset(group, tp.Topic, tp.Partition); ok {
			add(tp, c)
		}
	}
	return out
}
