package broker

// Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup with protocol type "consumer"): its members are members of the
// same groups as heartbeat members, coordinated on the controller by the
// same coordinator (group/classic.go), their state written through the same
// Persist. These methods check the request's bounds, as GroupHeartbeat
// does, and map the coordinator's errors to reasons (groupError).

import (
	"context"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/group"
)

// maxClassicBytes bounds a classic group member's protocol metadata (all
// protocols together) and each assignment its leader sends, which the
// controller holds in memory for the group's life.
const maxClassicBytes = 1 << 20

// JoinClassicGroup is a classic member's JoinGroup.
func (b *Broker) JoinClassicGroup(ctx context.Context, j group.ClassicJoin) (group.ClassicJoinAnswer, error) {
	if err := validGroupName(j.Group); err != nil {
		return group.ClassicJoinAnswer{}, err
	}
	if err := validMemberID(j.MemberID); err != nil {
		return group.ClassicJoinAnswer{}, err
	}
	switch {
	case len(j.Topics) > maxGroupTopics:
		return group.ClassicJoinAnswer{}, refuse(ReasonInvalidRequest, nil, "a member subscribes to %d topics; at most %d", len(j.Topics), maxGroupTopics)
	case len(j.Owned) > maxGroupOwned:
		return group.ClassicJoinAnswer{}, refuse(ReasonInvalidRequest, nil, "a member reports %d partitions; at most %d", len(j.Owned), maxGroupOwned)
	case len(j.ClientID) > cluster.MaxGroupStringLen:
		return group.ClassicJoinAnswer{}, refuse(ReasonInvalidRequest, nil, "a client id of %d bytes; at most %d", len(j.ClientID), cluster.MaxGroupStringLen)
	case len(j.Protocols) > cluster.MaxGroupClassicProtocols:
		return group.ClassicJoinAnswer{}, refuse(ReasonInconsistentGroupProtocol, nil, "a member offers %d protocols; at most %d", len(j.Protocols), cluster.MaxGroupClassicProtocols)
	case j.Version < 0:
		return group.ClassicJoinAnswer{}, refuse(ReasonInvalidRequest, nil, "consumer protocol version %d", j.Version)
	}
	for _, p := range j.Protocols {
		if len(p) > cluster.MaxGroupStringLen {
			return group.ClassicJoinAnswer{}, refuse(ReasonInvalidRequest, nil, "a protocol name of %d bytes; at most %d", len(p), cluster.MaxGroupStringLen)
		}
	}
	if len(j.Host) > cluster.MaxGroupStringLen {
		j.Host = j.Host[:cluster.MaxGroupStringLen] // display only
	}
	for _, t := range j.Topics {
		if err := cluster.ValidateTopicName(t); err != nil {
			return group.ClassicJoinAnswer{}, refuse(ReasonInvalidTopicName, err, "subscription: %v", err)
		}
	}
	c, err := b.coordinator(ctx)
	if err != nil {
		return group.ClassicJoinAnswer{}, err
	}
	ans, err := c.JoinClassic(ctx, j)
	if err != nil {
		return group.ClassicJoinAnswer{}, b.groupError(ctx, j.Group, j.MemberID, err)
	}
	return ans, nil
}

// SyncClassicGroup is a SyncGroup: a consumer group's classic member gets
// the assignment its join was answered; a classic group proper's member
// the one its leader sent.
func (b *Broker) SyncClassicGroup(ctx context.Context, s group.ClassicSync) (group.ClassicSyncAnswer, error) {
	c, err := b.classicCoordinator(ctx, s.Group, s.MemberID)
	if err != nil {
		return group.ClassicSyncAnswer{}, err
	}
	if len(s.Assignments) > cluster.MaxGroupMembers {
		return group.ClassicSyncAnswer{}, refuse(ReasonInvalidRequest, nil, "%d assignments; a group has at most %d members", len(s.Assignments), cluster.MaxGroupMembers)
	}
	for id, a := range s.Assignments {
		if len(a) > maxClassicBytes {
			return group.ClassicSyncAnswer{}, refuse(ReasonInvalidRequest, nil, "an assignment of %d bytes for member %q; at most %d", len(a), id, maxClassicBytes)
		}
	}
	a, err := c.SyncClassic(ctx, s)
	if err != nil {
		return group.ClassicSyncAnswer{}, b.groupError(ctx, s.Group, s.MemberID, err)
	}
	return a, nil
}

// JoinClassicProtocolGroup is a JoinGroup of a protocol type other than
// "consumer" (Kafka Connect's "connect", or any custom one): a classic
// group proper, whose leader assigns (group/classic_group.go). It returns
// once the group's join phase is complete.
func (b *Broker) JoinClassicProtocolGroup(ctx context.Context, j group.ClassicGroupJoin) (group.ClassicGroupJoinAnswer, error) {
	if err := validGroupName(j.Group); err != nil {
		return group.ClassicGroupJoinAnswer{}, err
	}
	if err := validMemberID(j.MemberID); err != nil {
		return group.ClassicGroupJoinAnswer{}, err
	}
	switch {
	case len(j.ClientID) > cluster.MaxGroupStringLen:
		return group.ClassicGroupJoinAnswer{}, refuse(ReasonInvalidRequest, nil, "a client id of %d bytes; at most %d", len(j.ClientID), cluster.MaxGroupStringLen)
	case len(j.ProtocolType) > cluster.MaxGroupStringLen:
		return group.ClassicGroupJoinAnswer{}, refuse(ReasonInvalidRequest, nil, "a protocol type of %d bytes; at most %d", len(j.ProtocolType), cluster.MaxGroupStringLen)
	case len(j.Protocols) > cluster.MaxGroupClassicProtocols:
		return group.ClassicGroupJoinAnswer{}, refuse(ReasonInconsistentGroupProtocol, nil, "a member offers %d protocols; at most %d", len(j.Protocols), cluster.MaxGroupClassicProtocols)
	}
	meta := 0
	for _, p := range j.Protocols {
		if len(p.Name) > cluster.MaxGroupStringLen {
			return group.ClassicGroupJoinAnswer{}, refuse(ReasonInvalidRequest, nil, "a protocol name of %d bytes; at most %d", len(p.Name), cluster.MaxGroupStringLen)
		}
		meta += len(p.Metadata)
	}
	if meta > maxClassicBytes {
		return group.ClassicGroupJoinAnswer{}, refuse(ReasonInvalidRequest, nil, "protocol metadata of %d bytes; at most %d", meta, maxClassicBytes)
	}
	if len(j.Host) > cluster.MaxGroupStringLen {
		j.Host = j.Host[:cluster.MaxGroupStringLen] // display only
	}
	c, err := b.coordinator(ctx)
	if err != nil {
		return group.ClassicGroupJoinAnswer{}, err
	}
	ans, err := c.JoinClassicGroup(ctx, j)
	if err != nil {
		return group.ClassicGroupJoinAnswer{}, b.groupError(ctx, j.Group, j.MemberID, err)
	}
	return ans, nil
}

// HeartbeatClassicGroup is a classic member's Heartbeat: nil, or
// REBALANCE_IN_PROGRESS when it must join again.
func (b *Broker) HeartbeatClassicGroup(ctx context.Context, name, member string, generation int32) error {
	c, err := b.classicCoordinator(ctx, name, member)
	if err != nil {
		return err
	}
	if err := c.HeartbeatClassic(ctx, name, member, generation); err != nil {
		return b.groupError(ctx, name, member, err)
	}
	return nil
}

// LeaveClassicGroup removes a classic member.
func (b *Broker) LeaveClassicGroup(ctx context.Context, name, member string) error {
	c, err := b.classicCoordinator(ctx, name, member)
	if err != nil {
		return err
	}
	if err := c.LeaveClassic(ctx, name, member); err != nil {
		return b.groupError(ctx, name, member, err)
	}
	return nil
}

func (b *Broker) classicCoordinator(ctx context.Context, name, member string) (*group.Coordinator, error) {
	if err := validGroupName(name); err != nil {
		return nil, err
	}
	if err := validMemberID(member); err != nil {
		return nil, err
	}
	return b.coordinator(ctx)
}

func validMemberID(id string) error {
	if len(id) > cluster.MaxGroupStringLen {
		return refuse(ReasonInvalidRequest, nil, "a member id of %d bytes; at most %d", len(id), cluster.MaxGroupStringLen)
	}
	return nil
}
