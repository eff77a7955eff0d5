package group

// Classic members: consumers that speak Kafka's classic group protocol
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup with protocol type
// "consumer") are members of the same groups as heartbeat members, after
// Kafka 4's "classic members in a consumer group" (KIP-848's upgrade path).
// The coordinator assigns for them, server-side, exactly as for any member;
// their own assignors are never run. What differs is how they hear of it:
//
//   - A join is a heartbeat that reports what the member owns (its
//     subscription's owned partitions; nothing for eager clients, which give
//     everything up before they join again) and makes its answer: the member
//     epoch, which the member knows as its generation. The assignment of that
//     answer (Sent) is what SyncGroup hands out.
//   - A Heartbeat carries nothing but liveness, so the coordinator tells a
//     classic member that its answer would change (it must give a partition
//     up, or may take more) with REBALANCE_IN_PROGRESS, and the member joins
//     again to hear it. A member told to give something up is on its
//     rebalance timeout from then, as a heartbeat member is from the answer
//     that left the partition out.
//
// So handover stays cooperative and fenced: a partition is granted only once
// its previous owner has reported it gone, in a join, or was removed; and a
// classic member's grants are written (Persist) before its join answer
// leaves, as any member's are. Generation is the member epoch, so commits
// are fenced by Coordinator.Commit unchanged.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Errors of the classic protocol. The broker maps them to the API's reasons.
var (
	// ErrRebalanceInProgress tells a classic member to join again: its
	// assignment is about to change.
	ErrRebalanceInProgress = errors.New("group: rebalance in progress")
	// ErrIllegalGeneration: a classic call names a generation other than
	// the member's current one.
	ErrIllegalGeneration = errors.New("group: illegal generation")
	// ErrInconsistentProtocol: a classic member offers no protocol the
	// group's other classic members share, or names another protocol than
	// the one it was answered.
	ErrInconsistentProtocol = errors.New("group: inconsistent group protocol")
)

// ConsumerProtocolType is the protocol type of classic consumers, whose
// members join consumer groups; any other makes a classic group proper
// (classic_group.go).
const ConsumerProtocolType = "consumer"

// MaxClassicProtocols bounds the protocols a classic member may offer.
const MaxClassicProtocols = 32

// Classic is what the coordinator keeps of a classic member's protocol.
type Classic struct {
	// Protocols are the protocol names the member offered, in its order.
	Protocols []string
	// Protocol is the one the coordinator answered it, one of Protocols
	// that every classic member of the group offered.
	Protocol string
	// Version is the version of the member's consumer protocol metadata,
	// so that its assignment goes out in a version it reads.
	Version int16
}

// ClassicJoin is a classic member's JoinGroup.
type ClassicJoin struct {
	Group    string
	MemberID string // "" for a member joining for the first time
	// RequireKnownID (JoinGroup v4+, KIP-394): a member without an id is
	// given one, and nothing else happens, until it joins with it.
	RequireKnownID bool
	Protocols      []string // offered, in the member's order
	Version        int16    // of the member's first protocol's metadata
	Topics         []string
	// Owned is what the member reports owning (consumer protocol v1+);
	// nil for none. A partition not granted to it is ignored.
	Owned                            []TopicPartition
	SessionTimeout, RebalanceTimeout time.Duration
	ClientID, Host                   string
}

// ClassicJoinAnswer answers a ClassicJoin.
type ClassicJoinAnswer struct {
	MemberID string
	// MemberIDRequired: join again with MemberID (KIP-394).
	MemberIDRequired bool
	Generation       int32 // the member epoch
	Protocol         string
}

// ClassicAssignment is what SyncGroup hands a classic member.
type ClassicAssignment struct {
	Protocol string
	Version  int16
	Assigned []TopicPartition // sorted
}

// JoinClassic handles a classic member's JoinGroup.
func (c *Coordinator) JoinClassic(ctx context.Context, j ClassicJoin) (ClassicJoinAnswer, error) {
	if len(j.Protocols) == 0 || len(j.Protocols) > MaxClassicProtocols {
		return ClassicJoinAnswer{}, fmt.Errorf("%w: a member offers %d protocols; want 1 to %d", ErrInconsistentProtocol, len(j.Protocols), MaxClassicProtocols)
	}
	// A join that would be refused is refused before it is given an id.
	if len(distinctSorted(j.Topics)) == 0 {
		return ClassicJoinAnswer{}, fmt.Errorf("%w: a member joining group %q must subscribe to at least one topic", ErrInvalid, j.Group)
	}
	if _, err := timeout("session timeout", j.SessionTimeout, DefaultSessionTimeout, MinSessionTimeout, MaxSessionTimeout); err != nil {
		return ClassicJoinAnswer{}, err
	}
	if _, err := timeout("rebalance timeout", j.RebalanceTimeout, DefaultRebalanceTimeout, MinSessionTimeout, MaxRebalanceTimeout); err != nil {
		return ClassicJoinAnswer{}, err
	}
	g, err := c.lockGroup(j.Group, true)
	if err != nil {
		return ClassicJoinAnswer{}, err
	}
	defer func() { c.unlockGroup(g) }()
	now := c.cfg.Now()
	c.expire(g, now)
	if j.MemberID == "" && j.RequireKnownID {
		if _, ok := sharedProtocol(g, nil, j.Protocols); !ok {
			return ClassicJoinAnswer{}, fmt.Errorf("%w: group %q: member offers %v, which its other classic members do not all offer", ErrInconsistentProtocol, g.name, j.Protocols)
		}
		return ClassicJoinAnswer{MemberID: c.cfg.NewMemberID(), MemberIDRequired: true}, nil
	}
	m, err := c.joinClassic(g, j, now)
	if err != nil {
		return ClassicJoinAnswer{}, err
	}
	c.refreshCounts(g)
	c.reconcile(g, m, now)
	if err := c.flush(ctx, g); err != nil {
		return ClassicJoinAnswer{}, err
	}
	if !c.valid() {
		return ClassicJoinAnswer{}, ErrNotCoordinator
	}
	return ClassicJoinAnswer{MemberID: m.id, Generation: m.epoch, Protocol: m.classic.Protocol}, nil
}

// joinClassic adds the member or applies its join: subscription,
// timeouts, protocols, and the partitions it reports given up.
func (c *Coordinator) joinClassic(g *group, j ClassicJoin, now time.Time) (*member, error) {
	topics := distinctSorted(j.Topics)
	if len(topics) == 0 {
		return nil, fmt.Errorf("%w: a member joining group %q must subscribe to at least one topic", ErrInvalid, g.name)
	}
	session, err := timeout("session timeout", j.SessionTimeout, DefaultSessionTimeout, MinSessionTimeout, MaxSessionTimeout)
	if err != nil {
		return nil, err
	}
	rebalance, err := timeout("rebalance timeout", j.RebalanceTimeout, DefaultRebalanceTimeout, MinSessionTimeout, MaxRebalanceTimeout)
	if err != nil {
		return nil, err
	}
	m := g.members[j.MemberID]
	if m != nil && m.classic == nil {
		return nil, fmt.Errorf("%w: member %q of group %q uses the consumer heartbeat protocol, not JoinGroup", ErrUnknownMember, m.id, g.name)
	}
	protocol, ok := sharedProtocol(g, m, j.Protocols)
	if !ok {
		return nil, fmt.Errorf("%w: group %q: member offers %v, which its other classic members do not all offer", ErrInconsistentProtocol, g.name, j.Protocols)
	}
	if m == nil {
		if len(g.members) >= c.cfg.MaxMembers {
			return nil, fmt.Errorf("%w: %w: group %q has %d members, the most allowed", ErrInvalid, ErrGroupFull, g.name, len(g.members))
		}
		if err := c.checkSubscription(g, "", topics); err != nil {
			return nil, err
		}
		if len(g.members) == 0 {
			// Classic members take the group's assignor and do not choose
			// one, so heartbeat members of any assignor can join them.
			g.assignor, _ = AssignorByName(DefaultAssignor)
		}
		m = &member{id: j.MemberID, clientID: j.ClientID, host: j.Host, topics: topics, joining: true,
			target: map[TopicPartition]bool{}, granted: map[TopicPartition]int32{}}
		for m.id == "" || g.members[m.id] != nil {
			m.id = c.cfg.NewMemberID()
		}
		g.members[m.id] = m
		c.cfg.Log.Info("group member joined", "group", g.name, "member", m.id, "client", m.clientID, "topics", topics, "protocol", protocol)
		c.rebalance(g)
	} else if !slices.Equal(topics, m.topics) {
		if err := c.checkSubscription(g, m.id, topics); err != nil {
			return nil, err
		}
		m.topics = topics
		c.rebalance(g)
	}
	cl := &Classic{Protocols: slices.Clone(j.Protocols), Protocol: protocol, Version: j.Version}
	if m.classic == nil || !slices.Equal(m.classic.Protocols, cl.Protocols) || m.classic.Protocol != cl.Protocol ||
		m.classic.Version != cl.Version || m.sessionTimeout != session || m.rebalanceTimeout != rebalance || m.clientID != j.ClientID {
		g.dirty = true
	}
	m.classic, m.sessionTimeout, m.rebalanceTimeout, m.clientID, m.lastSeen = cl, session, rebalance, j.ClientID, now

	// Partitions the member no longer reports, and no longer has to own,
	// are free. Those still in its target stay granted: an eager member
	// reports nothing at all when it joins again, and gets them back.
	owned := make(map[TopicPartition]bool, len(j.Owned))
	for _, tp := range j.Owned {
		owned[tp] = true
	}
	g.release(m, owned)
	return m, nil
}

// sharedProtocol is the first of offered that every classic member of g
// other than self offered too.
func sharedProtocol(g *group, self *member, offered []string) (string, bool) {
	for _, p := range offered {
		if p == "" {
			continue
		}
		all := true
		for _, o := range g.members {
			if o != self && o.classic != nil && !slices.Contains(o.classic.Protocols, p) {
				all = false
				break
			}
		}
		if all {
			return p, true
		}
	}
	return "", false
}

// classicMember returns the classic member of g named id at generation,
// refreshing its session. The group is locked.
func (c *Coordinator) classicMember(g *group, id string, generation int32, now time.Time) (*member, error) {
	c.expire(g, now)
	m := g.members[id]
	if m == nil {
		return nil, fmt.Errorf("%w: group %q has no member %q (its session expired, it was removed, or the coordinator moved); join again",
			ErrUnknownMember, g.name, id)
	}
	if m.classic == nil {
		return nil, fmt.Errorf("%w: member %q of group %q uses the consumer heartbeat protocol", ErrUnknownMember, id, g.name)
	}
	if generation != m.epoch {
		return nil, fmt.Errorf("%w: member %q of group %q is at generation %d, not %d; join again", ErrIllegalGeneration, id, g.name, m.epoch, generation)
	}
	m.lastSeen = now
	return m, nil
}

// lockClassic locks the group of a classic call about an existing member.
func (c *Coordinator) lockClassic(name, member string) (*group, error) {
	g, err := c.lockGroup(name, false)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, fmt.Errorf("%w: group %q has no member %q; join again", ErrUnknownMember, name, member)
	}
	return g, nil
}

// answered ends a classic call answered from memory: whatever changed is
// written, and a call that wrote nothing first confirms that this node
// still coordinates (Config.Confirm). The group is locked.
func (c *Coordinator) answered(ctx context.Context, g *group) error {
	wrote := g.dirty && c.cfg.Persist != nil
	if err := c.flush(ctx, g); err != nil {
		return err
	}
	if !c.valid() {
		return ErrNotCoordinator
	}
	if !wrote && c.cfg.Confirm != nil {
		if err := c.cfg.Confirm(ctx); err != nil {
			return fmt.Errorf("%w: %w", ErrNotCoordinator, err)
		}
	}
	return nil
}

// ClassicSync is a SyncGroup.
type ClassicSync struct {
	Group, MemberID        string
	Generation             int32
	ProtocolType, Protocol *string           // v5+; nil when not sent
	Assignments            map[string][]byte // the leader's, of a classic group proper
}

// ClassicSyncAnswer answers a ClassicSync: for a consumer group's member,
// Consumer; for a classic group proper's, Assignment as its leader sent it.
type ClassicSyncAnswer struct {
	ProtocolType, Protocol string
	Consumer               *ClassicAssignment
	Assignment             []byte
}

// SyncClassic handles a SyncGroup: a classic group proper's
// (SyncClassicGroup), or a consumer group classic member's, which gets the
// assignment of its join's answer. protocol, when given (SyncGroup v5+),
// must be the one it was answered.
func (c *Coordinator) SyncClassic(ctx context.Context, s ClassicSync) (ClassicSyncAnswer, error) {
	if c.hasProtocolGroup(s.Group) {
		return c.SyncClassicGroup(ctx, s)
	}
	if s.ProtocolType != nil && *s.ProtocolType != ConsumerProtocolType {
		return ClassicSyncAnswer{}, fmt.Errorf("%w: group %q has protocol type %q", ErrInconsistentProtocol, s.Group, ConsumerProtocolType)
	}
	g, err := c.lockClassic(s.Group, s.MemberID)
	if err != nil {
		return ClassicSyncAnswer{}, err
	}
	defer func() { c.unlockGroup(g) }()
	m, err := c.classicMember(g, s.MemberID, s.Generation, c.cfg.Now())
	if err != nil {
		return ClassicSyncAnswer{}, c.failed(ctx, g, err)
	}
	if s.Protocol != nil && *s.Protocol != m.classic.Protocol {
		return ClassicSyncAnswer{}, fmt.Errorf("%w: member %q of group %q syncs protocol %q; it was answered %q",
			ErrInconsistentProtocol, s.MemberID, s.Group, *s.Protocol, m.classic.Protocol)
	}
	// Sent is exactly what the join answered, every partition of it
	// granted (and written) before that answer left.
	a := ClassicSyncAnswer{ProtocolType: ConsumerProtocolType, Protocol: m.classic.Protocol,
		Consumer: &ClassicAssignment{Protocol: m.classic.Protocol, Version: m.classic.Version, Assigned: slices.Clone(m.sent)}}
	if err := c.answered(ctx, g); err != nil {
		return ClassicSyncAnswer{}, err
	}
	return a, nil
}

// failed writes what changed before a refusal (expire may have removed
// members) and returns err, or the write's error.
func (c *Coordinator) failed(ctx context.Context, g *group, err error) error {
	if ferr := c.flush(ctx, g); ferr != nil {
		return ferr
	}
	return err
}

// HeartbeatClassic keeps a classic member's session, and tells it
// (ErrRebalanceInProgress) to join again when its answer would change: it
// holds a partition it must give up, or may be granted one it lacks.
func (c *Coordinator) HeartbeatClassic(ctx context.Context, name, memberID string, generation int32) error {
	if c.hasProtocolGroup(name) {
		return c.HeartbeatClassicGroup(name, memberID, generation)
	}
	g, err := c.lockClassic(name, memberID)
	if err != nil {
		return err
	}
	defer func() { c.unlockGroup(g) }()
	now := c.cfg.Now()
	m, err := c.classicMember(g, memberID, generation, now)
	if err != nil {
		return c.failed(ctx, g, err)
	}
	c.refreshCounts(g)
	rejoin := false
	revoking := false
	for tp := range m.granted {
		if !m.target[tp] {
			revoking = true
		}
	}
	if revoking {
		rejoin = true
		// Told to give a partition up: it must within its rebalance
		// timeout, or be removed.
		if m.revokeSince.IsZero() {
			m.revokeSince = now
		}
	}
	for tp := range m.target {
		_, granted := m.granted[tp]
		if (!granted && g.owner[tp] == "") || (granted && !slices.Contains(m.sent, tp)) {
			rejoin = true
		}
	}
	if err := c.answered(ctx, g); err != nil {
		return err
	}
	if rejoin {
		return fmt.Errorf("%w: group %q: member %q's assignment is changing; join again", ErrRebalanceInProgress, name, memberID)
	}
	return nil
}

// LeaveClassic removes a classic member; its partitions are free at once.
func (c *Coordinator) LeaveClassic(ctx context.Context, name, memberID string) error {
	if c.hasProtocolGroup(name) {
		return c.LeaveClassicGroup(name, memberID)
	}
	g, err := c.lockClassic(name, memberID)
	if err != nil {
		return err
	}
	defer func() { c.unlockGroup(g) }()
	c.expire(g, c.cfg.Now())
	m := g.members[memberID]
	if m == nil || m.classic == nil {
		return c.failed(ctx, g, fmt.Errorf("%w: group %q has no classic member %q", ErrUnknownMember, name, memberID))
	}
	c.remove(g, m, "left")
	return c.flush(ctx, g)
}
