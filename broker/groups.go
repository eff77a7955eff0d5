package broker

// Consumer groups. The controller coordinates every group (package group):
// membership lives in its memory, under its Raft term, and is written to the
// Raft state whenever it changes (cluster.Node.SaveGroupMembership) before
// any answer that depends on it leaves; committed offsets live in the Raft
// state too. A controller starting a term resumes every group from there.
// Any other broker passes group calls on to the controller (controller.go);
// a controller answers reads (members, committed
// offsets) only after confirming through Raft that it still is one.

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/group"
)

// Bounds on one heartbeat, so a hostile member cannot make the coordinator
// hold or compute arbitrarily much.
const (
	maxGroupTopics = 1000
	maxGroupOwned  = 100_000
)

// groupCoordination holds the coordinator of the term this broker leads the
// metadata group in; a new term starts a new coordinator, resumed from the
// memberships in the Raft state.
type groupCoordination struct {
	mu   sync.Mutex
	term uint64
	c    *group.Coordinator
}

// coordinator returns the group coordinator, or the not-the-controller
// error on which the call is passed on to the controller (controller.go).
func (b *Broker) coordinator(ctx context.Context) (*group.Coordinator, error) {
	return b.role.coordinator(ctx)
}

func (b clusterMember) coordinator(ctx context.Context) (*group.Coordinator, error) {
	term, err := b.meta.ControllerTerm(ctx)
	if err != nil {
		return nil, clusterError(err)
	}
	gc := &b.groups
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if gc.c == nil || gc.term != term {
		if gc.c != nil {
			gc.c.Close()
		}
		gc.c = group.NewCoordinator(group.Config{
			Partitions: func(topic string) int32 {
				if t, ok := b.meta.Metadata().Topic(topic); ok {
					return int32(len(t.Partitions))
				}
				return 0
			},
			IsCoordinator: b.meta.IsController,
			MaxGroups:     b.cfg.Limits.MaxGroups,
			MaxMembers:    cluster.MaxGroupMembers,
			MaxTopics:     cluster.MaxGroupTopics,
			MaxPartitions: cluster.MaxGroupPartitions,
			Persist: func(ctx context.Context, name string, s *group.State) error {
				return b.meta.SaveGroupMembership(ctx, term, name, membershipOf(s))
			},
			Confirm: func(ctx context.Context) error {
				_, err := b.meta.VerifyController(ctx)
				return err
			},
			Log: b.log,
		})
		// ControllerTerm waited until this broker applied everything its
		// predecessors committed, so these are the groups as they left them.
		if err := gc.c.Resume(groupStates(b.meta.GroupMemberships())); err != nil {
			b.log.Error("groups: some groups could not be resumed; their members will find themselves unknown and join again", "err", err)
		}
		gc.term = term
	}
	return gc.c, nil
}

// verifiedCoordinator is coordinator for reads: it also confirms through
// Raft that this broker is still the controller and has applied everything
// committed before the call (cluster.Node.VerifyController), so a deposed
// controller that does not know it yet never answers from its stale
// members or offsets; it answers not-the-controller and the call is
// forwarded.
func (b *Broker) verifiedCoordinator(ctx context.Context) (*group.Coordinator, error) {
	c, err := b.coordinator(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := b.meta.VerifyController(ctx); err != nil {
		return nil, clusterError(err)
	}
	return c, nil
}

// closeGroups ends the coordinator when the broker stops.
func (b *Broker) closeGroups() {
	b.groups.mu.Lock()
	defer b.groups.mu.Unlock()
	if b.groups.c != nil {
		b.groups.c.Close()
		b.groups.c = nil
	}
}

// Heartbeat is one consumer group member's beat, as the API layers hand it
// to GroupHeartbeat. It is the coordinator's group.Heartbeat field for
// field (GroupHeartbeat converts it), so a field added there that the API
// must carry is a compile error here until it is added.
type Heartbeat struct {
	Group            string
	MemberID         string
	MemberEpoch      int32    // 0 joins; group.LeaveEpoch leaves
	Topics           []string // required when joining; empty: unchanged
	Assignor         string   // "" means group.DefaultAssignor
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	Owned            []TopicPartition
	// OwnedUnchanged says Owned is not reported: the member owns what it
	// did at its last heartbeat, so nothing it holds is taken as given up.
	OwnedUnchanged bool
	// KeepMemberID makes a join keep MemberID as the member's id instead
	// of the coordinator naming it (the member names itself once, for its
	// life).
	KeepMemberID   bool
	ClientID, Host string
	// NoWait answers at once instead of holding the beat until the
	// member's assignment changes.
	NoWait bool
}

// MemberAnswer is the coordinator's reply to one member's heartbeat
// (group.Answer field for field).
type MemberAnswer struct {
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assigned is what the member may own now, sorted.
	Assigned []TopicPartition
	// Pending counts partitions of the member's target another member
	// still has to give up.
	Pending int
}

// GroupAnswer is the coordinator's answer to a heartbeat, with the group's
// committed positions of the partitions it assigns.
type GroupAnswer struct {
	MemberAnswer
	Committed []CommittedOffset
}

// GroupHeartbeat is one member heartbeat (see group.Coordinator.Heartbeat).
// The committed positions come from this broker's metadata, which is the
// controller's: every commit goes through the coordinator here and is
// applied before it returns, so a partition's previous owner's last commit
// is there by the time the partition is granted.
func (b *Broker) GroupHeartbeat(ctx context.Context, hb Heartbeat) (GroupAnswer, error) {
	return forward(b, ctx, func() (GroupAnswer, error) {
		return b.groupHeartbeatAnswer(ctx, group.Heartbeat(hb))
	}, func(c ControllerClient) (GroupAnswer, error) {
		return c.GroupHeartbeat(ctx, hb)
	})
}

func (b *Broker) groupHeartbeatAnswer(ctx context.Context, hb group.Heartbeat) (GroupAnswer, error) {
	ans, err := b.groupHeartbeat(ctx, hb)
	if err != nil {
		return GroupAnswer{}, err
	}
	out := GroupAnswer{MemberAnswer: MemberAnswer(ans)}
	for _, tp := range ans.Assigned {
		if oc, ok := b.meta.CommittedOffset(hb.Group, tp.Topic, tp.Partition); ok {
			out.Committed = append(out.Committed, CommittedOffset{Topic: tp.Topic, Partition: tp.Partition,
				Offset: oc.Offset, Metadata: oc.Metadata, CommitTimeMs: oc.CommittedAtMs})
		}
	}
	return out, nil
}

func (b *Broker) groupHeartbeat(ctx context.Context, hb group.Heartbeat) (group.Answer, error) {
	if err := validGroupName(hb.Group); err != nil {
		return group.Answer{}, err
	}
	if len(hb.Topics) > maxGroupTopics {
		return group.Answer{}, refuse(ReasonInvalidRequest, nil, "a member subscribes to %d topics; at most %d", len(hb.Topics), maxGroupTopics)
	}
	if len(hb.MemberID) > cluster.MaxGroupStringLen {
		return group.Answer{}, refuse(ReasonInvalidRequest, nil, "a member id of %d bytes; at most %d", len(hb.MemberID), cluster.MaxGroupStringLen)
	}
	if len(hb.ClientID) > cluster.MaxGroupStringLen {
		return group.Answer{}, refuse(ReasonInvalidRequest, nil, "a client id of %d bytes; at most %d", len(hb.ClientID), cluster.MaxGroupStringLen)
	}
	if len(hb.Host) > cluster.MaxGroupStringLen {
		hb.Host = hb.Host[:cluster.MaxGroupStringLen] // display only
	}
	if len(hb.Owned) > maxGroupOwned {
		return group.Answer{}, refuse(ReasonInvalidRequest, nil, "a member reports %d partitions; at most %d", len(hb.Owned), maxGroupOwned)
	}
	for _, t := range hb.Topics {
		if err := cluster.ValidateTopicName(t); err != nil {
			return group.Answer{}, refuse(ReasonInvalidTopicName, err, "subscription: %v", err)
		}
	}
	c, err := b.coordinator(ctx)
	if err != nil {
		return group.Answer{}, err
	}
	ans, err := c.Heartbeat(ctx, hb)
	if err != nil {
		return group.Answer{}, b.groupError(ctx, hb.Group, hb.MemberID, err)
	}
	return ans, nil
}

func validGroupName(name string) error {
	if name == "" {
		return refuse(ReasonInvalidRequest, nil, "a consumer group name is required")
	}
	if err := cluster.ValidateGroupName(name); err != nil {
		return refuse(ReasonInvalidRequest, err, "%v", err).with("max_length", itoa(cluster.MaxGroupNameLen))
	}
	return nil
}

// LimitGroupMembers is the "limit_reached" detail of an INVALID_REQUEST
// refusing a join to a group that has as many members as allowed.
const LimitGroupMembers = "group_members"

// groupError maps the coordinator's errors to reasons.
func (b *Broker) groupError(ctx context.Context, name, member string, err error) error {
	switch {
	case errors.Is(err, group.ErrUnknownMember):
		return refuse(ReasonUnknownMember, err, "%v", err).with("group", name).with("member_id", member)
	case errors.Is(err, group.ErrFencedMember):
		return refuse(ReasonFencedMember, err, "%v", err).with("group", name).with("member_id", member)
	case errors.Is(err, group.ErrGroupNotEmpty):
		return refuse(ReasonGroupNotEmpty, err, "%v", err).with("group", name)
	case errors.Is(err, group.ErrGroupFull):
		// Meta names the limit, so a front end whose wire has a code of
		// its own for it (Kafka's GROUP_MAX_SIZE_REACHED) can tell.
		return refuse(ReasonInvalidRequest, err, "%v", err).with("group", name).with("limit_reached", LimitGroupMembers)
	case errors.Is(err, group.ErrInvalid):
		return refuse(ReasonInvalidRequest, err, "%v", err)
	case errors.Is(err, group.ErrRebalanceInProgress):
		return refuse(ReasonRebalanceInProgress, err, "%v", err).with("group", name).with("member_id", member)
	case errors.Is(err, group.ErrIllegalGeneration):
		return refuse(ReasonIllegalGeneration, err, "%v", err).with("group", name).with("member_id", member)
	case errors.Is(err, group.ErrInconsistentProtocol):
		return refuse(ReasonInconsistentGroupProtocol, err, "%v", err).with("group", name)
	case errors.Is(err, group.ErrNotCoordinator):
		// The controller moved: name the new one, so the call is forwarded
		// or retried there.
		if _, terr := b.meta.ControllerTerm(ctx); terr != nil {
			return clusterError(terr)
		}
		return refuse(ReasonUnavailable, err, "the group coordinator moved; retry")
	}
	var be *Error
	if errors.As(err, &be) {
		return err
	}
	return clusterError(err)
}

// GroupSummary is one group in ListGroups.
type GroupSummary = group.Summary

// ListGroups returns every group with members or committed offsets, by
// name.
func (b *Broker) ListGroups(ctx context.Context) ([]GroupSummary, error) {
	return forward(b, ctx, func() ([]GroupSummary, error) {
		return b.listGroups(ctx)
	}, func(c ControllerClient) ([]GroupSummary, error) {
		return c.ListGroups(ctx)
	})
}

func (b *Broker) listGroups(ctx context.Context) ([]GroupSummary, error) {
	c, err := b.verifiedCoordinator(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]GroupSummary{}
	for name := range b.meta.AllCommittedOffsets() {
		byName[name] = GroupSummary{Group: name, State: group.StateEmpty}
	}
	for _, s := range c.List() {
		byName[s.Group] = s
	}
	out := make([]GroupSummary, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, byName[name])
	}
	return out, nil
}

// GroupDescription is a group's members and committed offsets.
type GroupDescription struct {
	group.Description
	Offsets []CommittedOffset
}

// DescribeGroup returns a group's members and committed offsets;
// GROUP_NOT_FOUND when it has neither.
func (b *Broker) DescribeGroup(ctx context.Context, name string) (GroupDescription, error) {
	return forward(b, ctx, func() (GroupDescription, error) {
		return b.describeGroup(ctx, name)
	}, func(c ControllerClient) (GroupDescription, error) {
		return c.DescribeGroup(ctx, name)
	})
}

func (b *Broker) describeGroup(ctx context.Context, name string) (GroupDescription, error) {
	if err := validGroupName(name); err != nil {
		return GroupDescription{}, err
	}
	c, err := b.verifiedCoordinator(ctx)
	if err != nil {
		return GroupDescription{}, err
	}
	d, ok := c.Describe(name)
	offsets := b.committedOffsets(name, nil)
	if !ok && len(offsets) == 0 {
		return GroupDescription{}, refuse(ReasonGroupNotFound, nil, "consumer group %q has no members and no committed offsets", name).with("group", name)
	}
	if !ok {
		d = group.Description{Group: name, State: group.StateEmpty}
	}
	slices.SortFunc(offsets, func(x, y CommittedOffset) int {
		return cmp.Or(strings.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	return GroupDescription{Description: d, Offsets: offsets}, nil
}

// ResetGroupOffsets commits positions for a group while it has no members;
// force removes its members first. It returns how many were removed.
func (b *Broker) ResetGroupOffsets(ctx context.Context, name string, offsets []CommittedOffset, force bool) (int, error) {
	return forward(b, ctx, func() (int, error) {
		return b.resetGroupOffsets(ctx, name, offsets, force)
	}, func(c ControllerClient) (int, error) {
		return c.ResetGroupOffsets(ctx, name, offsets, force)
	})
}

func (b *Broker) resetGroupOffsets(ctx context.Context, name string, offsets []CommittedOffset, force bool) (int, error) {
	if err := validGroupName(name); err != nil {
		return 0, err
	}
	if len(offsets) == 0 {
		return 0, refuse(ReasonInvalidRequest, nil, "a reset names at least one partition and its new offset")
	}
	c, err := b.coordinator(ctx)
	if err != nil {
		return 0, err
	}
	reqs, err := b.offsetCommits(offsets)
	if err != nil {
		return 0, err
	}
	n, err := c.Clear(ctx, name, force, func() error { return b.commitOffsets(ctx, name, reqs) })
	if err != nil {
		return n, b.groupError(ctx, name, "", err)
	}
	return n, nil
}

// DeleteGroup removes a group's committed offsets while it has no members;
// force removes its members first.
func (b *Broker) DeleteGroup(ctx context.Context, name string, force bool) (int, error) {
	return forward(b, ctx, func() (int, error) {
		return b.deleteGroup(ctx, name, force)
	}, func(c ControllerClient) (int, error) {
		return c.DeleteGroup(ctx, name, force)
	})
}

func (b *Broker) deleteGroup(ctx context.Context, name string, force bool) (int, error) {
	if err := validGroupName(name); err != nil {
		return 0, err
	}
	c, err := b.coordinator(ctx)
	if err != nil {
		return 0, err
	}
	members := c.Members(name)
	if members == 0 && len(b.meta.CommittedOffsets(name)) == 0 {
		return 0, refuse(ReasonGroupNotFound, nil, "consumer group %q has no members and no committed offsets", name).with("group", name)
	}
	n, err := c.Clear(ctx, name, force, func() error {
		err := b.meta.DeleteGroup(ctx, name)
		if errors.Is(err, cluster.ErrGroupNotFound) {
			return nil // members only: removing them was the whole job
		}
		return err
	})
	if err != nil {
		return n, b.groupError(ctx, name, "", err)
	}
	return n, nil
}

// DeleteOffsets removes a group's committed offsets of the partitions
// named, except those of topics one of its members subscribes to now,
// which it returns, sorted, and leaves alone (Kafka's
// GROUP_SUBSCRIBED_TO_TOPIC). Partitions never committed are no error.
// GROUP_NOT_FOUND when the group has neither members nor committed
// offsets.
func (b *Broker) DeleteOffsets(ctx context.Context, name string, partitions []TopicPartition) ([]string, error) {
	return b.role.deleteOffsets(ctx, name, partitions)
}

func (b clusterMember) deleteOffsets(ctx context.Context, name string, partitions []TopicPartition) ([]string, error) {
	if err := validGroupName(name); err != nil {
		return nil, err
	}
	if len(partitions) > cluster.MaxGroupPartitions {
		return nil, refuse(ReasonInvalidRequest, nil, "an offset delete names %d partitions; at most %d", len(partitions), cluster.MaxGroupPartitions)
	}
	c, err := b.coordinator(ctx)
	if err != nil {
		return nil, err
	}
	var inUse []string
	err = c.Subscribed(name, func(subscribed map[string]bool) error {
		if subscribed == nil && len(b.meta.CommittedOffsets(name)) == 0 {
			return refuse(ReasonGroupNotFound, nil, "consumer group %q has no members and no committed offsets", name).with("group", name)
		}
		var del []cluster.TopicPartition
		for _, tp := range partitions {
			if subscribed[tp.Topic] {
				if !slices.Contains(inUse, tp.Topic) {
					inUse = append(inUse, tp.Topic)
				}
				continue
			}
			del = append(del, tp)
		}
		if len(del) == 0 || len(b.meta.CommittedOffsets(name)) == 0 {
			return nil
		}
		err := b.meta.DeleteOffsets(ctx, name, del)
		if errors.Is(err, cluster.ErrGroupNotFound) {
			return nil // nothing was committed: nothing to delete
		}
		return err
	})
	if err != nil {
		return nil, b.groupError(ctx, name, "", err)
	}
	slices.Sort(inUse)
	return inUse, nil
}

// writeGroupMembers reports each group's members; only the controller,
// which coordinates the groups, knows them.
func (b *Broker) writeGroupMembers(mw *metricsWriter, controller bool) {
	mw.family("strata_group_members", "gauge", "Members of each consumer group with members; reported by the controller, which coordinates groups.")
	b.groups.mu.Lock()
	c := b.groups.c
	b.groups.mu.Unlock()
	if c == nil || !controller {
		return
	}
	for _, s := range c.List() {
		mw.sample("strata_group_members", labels("group", s.Group), float64(s.Members))
	}
}
