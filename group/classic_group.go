package group

// Classic groups proper: groups of Kafka's classic protocol whose protocol
// type is not "consumer" (Kafka Connect's "connect", or any custom one).
// The coordinator cannot read their members' metadata, so it runs Kafka's
// classic group protocol as Kafka's ClassicGroup does, simplified:
//
//   - A join starts a rebalance (PreparingRebalance) unless one is under
//     way, and waits until every member has joined again, or the longest
//     rebalance timeout of the members has passed (members that did not
//     join again are removed). Then the generation moves, a protocol every
//     member offered is chosen (each member votes for its most preferred
//     one; the most votes win, then the earliest offered), a leader is
//     chosen (the old one if it joined again, else the first member by id),
//     and every waiting join is answered; the leader's answer lists every
//     member with its metadata for the chosen protocol
//     (CompletingRebalance).
//   - The leader's SyncGroup hands its assignments to every member
//     (Stable); a member's SyncGroup waits for the leader's.
//   - Heartbeats answer REBALANCE_IN_PROGRESS while a rebalance is under
//     way, so members join again; a member not heard from for its session
//     timeout, or that leaves, is removed and the group rebalances.
//
// Members must name the current generation (ILLEGAL_GENERATION), offer a
// protocol every member offers and share the group's protocol type
// (INCONSISTENT_GROUP_PROTOCOL). A group of one kind cannot be joined by a
// member of the other.
//
// These groups live in the coordinator's memory only: they are not
// written to the Raft state, so after a change of controller their members
// find themselves unknown and join again (a new generation 1). Kafka
// Connect does that by itself. Their members may commit offsets at their
// current generation (Coordinator.Commit).

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// ClassicProtocol is one protocol a member of a classic group offers.
type ClassicProtocol struct {
	Name     string
	Metadata []byte
}

// ClassicGroupJoin is a JoinGroup of a classic group proper.
type ClassicGroupJoin struct {
	Group, MemberID                  string
	RequireKnownID                   bool
	ProtocolType                     string
	Protocols                        []ClassicProtocol
	SessionTimeout, RebalanceTimeout time.Duration
	ClientID, Host                   string
}

// ClassicGroupMember is a member as the leader's join answer lists it.
type ClassicGroupMember struct {
	ID       string
	Metadata []byte
}

// ClassicGroupJoinAnswer answers a ClassicGroupJoin.
type ClassicGroupJoinAnswer struct {
	MemberID         string
	MemberIDRequired bool
	Generation       int32
	ProtocolType     string
	Protocol         string
	Leader           string
	Members          []ClassicGroupMember // the leader's answer only
}

type protocolGroup struct {
	name string

	mu           sync.Mutex
	protocolType string
	state        string // StatePreparingRebalance, StateCompletingRebalance, StateStable
	generation   int32
	protocol     string
	leader       string
	members      map[string]*protocolMember
	deadline     time.Time     // of the join phase under way
	changed      chan struct{} // closed and replaced on every change
	gone         bool
}

type protocolMember struct {
	id, clientID, host string
	protocols          []ClassicProtocol
	session, rebalance time.Duration
	lastSeen           time.Time
	held               int  // its calls waiting now: alive
	joined             bool // joined in the join phase under way
	answer             *ClassicGroupJoinAnswer
	assignment         []byte
}

func (pg *protocolGroup) notify() {
	close(pg.changed)
	pg.changed = make(chan struct{})
}

// lockProtocolGroup returns the named classic group locked, creating it
// when create is set; nil when it does not exist.
func (c *Coordinator) lockProtocolGroup(name string, create bool) (*protocolGroup, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrNotCoordinator
		}
		pg := c.protocolGroups[name]
		if pg == nil {
			if !create {
				c.mu.Unlock()
				return nil, nil
			}
			if g := c.groups[name]; g != nil {
				c.mu.Unlock()
				return nil, fmt.Errorf("%w: group %q is a consumer group", ErrInconsistentProtocol, name)
			}
			if err := c.roomForGroupLocked(name); err != nil {
				c.mu.Unlock()
				return nil, err
			}
			pg = &protocolGroup{name: name, members: map[string]*protocolMember{}, changed: make(chan struct{})}
			c.protocolGroups[name] = pg
		}
		c.mu.Unlock()
		pg.mu.Lock()
		if !pg.gone {
			return pg, nil
		}
		pg.mu.Unlock()
	}
}

func (c *Coordinator) unlockProtocolGroup(pg *protocolGroup) {
	if len(pg.members) == 0 && !pg.gone {
		pg.gone = true
		c.mu.Lock()
		if c.protocolGroups[pg.name] == pg {
			delete(c.protocolGroups, pg.name)
		}
		c.mu.Unlock()
	}
	pg.mu.Unlock()
}

// hasProtocolGroup reports whether name is a classic group proper with
// members (a consumer member cannot join it).
func (c *Coordinator) hasProtocolGroup(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.protocolGroups[name] != nil
}

// JoinClassicGroup handles a JoinGroup of a classic group proper; it
// returns once the join phase it takes part in is complete.
func (c *Coordinator) JoinClassicGroup(ctx context.Context, j ClassicGroupJoin) (ClassicGroupJoinAnswer, error) {
	if j.ProtocolType == "" || j.ProtocolType == ConsumerProtocolType || len(j.Protocols) == 0 || len(j.Protocols) > MaxClassicProtocols {
		return ClassicGroupJoinAnswer{}, fmt.Errorf("%w: a member offers protocol type %q and %d protocols; want a type and 1 to %d",
			ErrInconsistentProtocol, j.ProtocolType, len(j.Protocols), MaxClassicProtocols)
	}
	session, err := timeout("session timeout", j.SessionTimeout, DefaultSessionTimeout, MinSessionTimeout, MaxSessionTimeout)
	if err != nil {
		return ClassicGroupJoinAnswer{}, err
	}
	rebalance, err := timeout("rebalance timeout", j.RebalanceTimeout, DefaultRebalanceTimeout, MinSessionTimeout, MaxRebalanceTimeout)
	if err != nil {
		return ClassicGroupJoinAnswer{}, err
	}
	pg, err := c.lockProtocolGroup(j.Group, true)
	if err != nil {
		return ClassicGroupJoinAnswer{}, err
	}
	defer func() { c.unlockProtocolGroup(pg) }()
	now := c.cfg.Now()
	c.expireProtocolGroup(pg, now)
	m := pg.members[j.MemberID]
	if len(pg.members) > 0 {
		if j.ProtocolType != pg.protocolType {
			return ClassicGroupJoinAnswer{}, fmt.Errorf("%w: group %q has protocol type %q, not %q", ErrInconsistentProtocol, j.Group, pg.protocolType, j.ProtocolType)
		}
		if len(pg.candidates(m, j.Protocols)) == 0 {
			return ClassicGroupJoinAnswer{}, fmt.Errorf("%w: group %q: the member offers no protocol every member offers", ErrInconsistentProtocol, j.Group)
		}
	}
	if j.MemberID == "" && j.RequireKnownID {
		return ClassicGroupJoinAnswer{MemberID: c.cfg.NewMemberID(), MemberIDRequired: true}, nil
	}
	if m == nil {
		if len(pg.members) >= c.cfg.MaxMembers {
			return ClassicGroupJoinAnswer{}, fmt.Errorf("%w: %w: group %q has %d members, the most allowed", ErrInvalid, ErrGroupFull, j.Group, len(pg.members))
		}
		m = &protocolMember{id: j.MemberID}
		for m.id == "" || pg.members[m.id] != nil {
			m.id = c.cfg.NewMemberID()
		}
		pg.members[m.id] = m
		c.cfg.Log.Info("classic group member joined", "group", pg.name, "member", m.id, "client", j.ClientID, "protocol_type", j.ProtocolType)
	}
	pg.protocolType = j.ProtocolType
	m.clientID, m.host, m.protocols, m.session, m.rebalance, m.lastSeen = j.ClientID, j.Host, slices.Clone(j.Protocols), session, rebalance, now
	m.answer = nil
	c.prepareRebalance(pg, now)
	m.joined = true
	joinedAt := pg.generation
	c.tryCompleteJoin(pg, now)

	for m.answer == nil || m.answer.Generation <= joinedAt {
		if pg.members[m.id] != m {
			return ClassicGroupJoinAnswer{}, fmt.Errorf("%w: member %q was removed from group %q", ErrUnknownMember, m.id, pg.name)
		}
		if err := c.waitProtocolGroup(ctx, pg, m, pg.deadline); err != nil {
			return ClassicGroupJoinAnswer{}, err
		}
		now = c.cfg.Now()
		if pg.state == StatePreparingRebalance && !now.Before(pg.deadline) {
			// Members that did not join again in time are gone.
			for _, o := range sortedProtocolMembers(pg) {
				if !o.joined {
					c.removeProtocolMember(pg, o, "did not join within the rebalance timeout", now)
				}
			}
			c.tryCompleteJoin(pg, now)
		}
	}
	if pg.members[m.id] != m {
		return ClassicGroupJoinAnswer{}, fmt.Errorf("%w: member %q was removed from group %q", ErrUnknownMember, m.id, pg.name)
	}
	return *m.answer, nil
}

// waitProtocolGroup waits, the group unlocked, for a change, until, or the
// end of ctx; it fails once the coordinator has stopped.
func (c *Coordinator) waitProtocolGroup(ctx context.Context, pg *protocolGroup, m *protocolMember, until time.Time) error {
	ch := pg.changed
	m.held++
	pg.mu.Unlock()
	wait := until.Sub(c.cfg.Now())
	t := time.NewTimer(max(wait, time.Millisecond))
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	pg.mu.Lock()
	m.held--
	m.lastSeen = c.cfg.Now()
	if !c.valid() {
		return ErrNotCoordinator
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w: group %q: %w", ErrRebalanceInProgress, pg.name, ctx.Err())
	}
	return nil
}

// candidates are the protocols of offered that every member but self
// offers.
func (pg *protocolGroup) candidates(self *protocolMember, offered []ClassicProtocol) []string {
	var out []string
	for _, p := range offered {
		all := true
		for _, o := range pg.members {
			if o != self && !slices.ContainsFunc(o.protocols, func(q ClassicProtocol) bool { return q.Name == p.Name }) {
				all = false
				break
			}
		}
		if all && !slices.Contains(out, p.Name) {
			out = append(out, p.Name)
		}
	}
	return out
}

// prepareRebalance starts a join phase unless one is under way.
func (c *Coordinator) prepareRebalance(pg *protocolGroup, now time.Time) {
	if pg.state == StatePreparingRebalance {
		return
	}
	pg.state = StatePreparingRebalance
	var longest time.Duration
	for _, m := range pg.members {
		m.joined = false
		longest = max(longest, m.rebalance)
	}
	pg.deadline = now.Add(longest)
	pg.notify()
}

// tryCompleteJoin ends the join phase once every member has joined again:
// a new generation, protocol and leader, and every member's answer.
func (c *Coordinator) tryCompleteJoin(pg *protocolGroup, now time.Time) {
	if pg.state != StatePreparingRebalance || len(pg.members) == 0 {
		return
	}
	for _, m := range pg.members {
		if !m.joined {
			return
		}
	}
	members := sortedProtocolMembers(pg)
	// Each member votes for its most preferred protocol that all offer.
	votes := map[string]int{}
	candidates := pg.candidates(nil, members[0].protocols)
	for _, m := range members {
		for _, p := range m.protocols {
			if slices.Contains(candidates, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	pg.protocol = candidates[0]
	for _, name := range candidates {
		if votes[name] > votes[pg.protocol] {
			pg.protocol = name
		}
	}
	if pg.members[pg.leader] == nil {
		pg.leader = members[0].id
	}
	pg.generation++
	pg.state = StateCompletingRebalance
	var list []ClassicGroupMember
	for _, m := range members {
		for _, p := range m.protocols {
			if p.Name == pg.protocol {
				list = append(list, ClassicGroupMember{ID: m.id, Metadata: p.Metadata})
				break
			}
		}
	}
	for _, m := range members {
		m.assignment = nil
		m.answer = &ClassicGroupJoinAnswer{MemberID: m.id, Generation: pg.generation, ProtocolType: pg.protocolType,
			Protocol: pg.protocol, Leader: pg.leader}
		if m.id == pg.leader {
			m.answer.Members = list
		}
	}
	c.cfg.Log.Info("classic group rebalanced", "group", pg.name, "generation", pg.generation, "members", len(members),
		"protocol", pg.protocol, "leader", pg.leader)
	pg.notify()
}

func sortedProtocolMembers(pg *protocolGroup) []*protocolMember {
	out := slices.Collect(maps.Values(pg.members))
	slices.SortFunc(out, func(a, b *protocolMember) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	return out
}

func (c *Coordinator) removeProtocolMember(pg *protocolGroup, m *protocolMember, why string, now time.Time) {
	delete(pg.members, m.id)
	c.cfg.Log.Info("classic group member removed", "group", pg.name, "member", m.id, "reason", why)
	if len(pg.members) == 0 {
		pg.state, pg.leader = "", ""
		pg.notify()
		return
	}
	if pg.state == StatePreparingRebalance {
		pg.notify()
		c.tryCompleteJoin(pg, now) // it may have been the last one awaited
		return
	}
	c.prepareRebalance(pg, now)
}

// expireProtocolGroup removes members not heard from within their session
// timeout; members with a call waiting are alive.
func (c *Coordinator) expireProtocolGroup(pg *protocolGroup, now time.Time) {
	for _, m := range sortedProtocolMembers(pg) {
		if m.held == 0 && now.Sub(m.lastSeen) > m.session {
			c.removeProtocolMember(pg, m, "session timeout", now)
		}
	}
	c.tryCompleteJoin(pg, now)
}

// protocolMemberAt returns the member of the classic group named name at
// generation, locked; the caller unlocks the group.
func (c *Coordinator) protocolMemberAt(name, id string, generation int32) (*protocolGroup, *protocolMember, error) {
	pg, err := c.lockProtocolGroup(name, false)
	if err != nil {
		return nil, nil, err
	}
	if pg == nil {
		return nil, nil, fmt.Errorf("%w: group %q has no member %q; join again", ErrUnknownMember, name, id)
	}
	now := c.cfg.Now()
	c.expireProtocolGroup(pg, now)
	m := pg.members[id]
	switch {
	case m == nil:
		err = fmt.Errorf("%w: group %q has no member %q (its session expired, it left, or the coordinator moved); join again", ErrUnknownMember, name, id)
	case generation != pg.generation:
		err = fmt.Errorf("%w: group %q is at generation %d, not %d; join again", ErrIllegalGeneration, name, pg.generation, generation)
	default:
		m.lastSeen = now
	}
	return pg, m, err
}

// SyncClassicGroup is a SyncGroup of a classic group proper: the leader's
// carries every member's assignment; each member gets its own once the
// leader's has come.
func (c *Coordinator) SyncClassicGroup(ctx context.Context, s ClassicSync) (ClassicSyncAnswer, error) {
	name, id, generation := s.Group, s.MemberID, s.Generation
	pg, m, err := c.protocolMemberAt(name, id, generation)
	if pg == nil {
		return ClassicSyncAnswer{}, err
	}
	defer func() { c.unlockProtocolGroup(pg) }()
	if err != nil {
		return ClassicSyncAnswer{}, err
	}
	if (s.ProtocolType != nil && *s.ProtocolType != pg.protocolType) || (s.Protocol != nil && *s.Protocol != pg.protocol) {
		return ClassicSyncAnswer{}, fmt.Errorf("%w: group %q has protocol type %q and protocol %q", ErrInconsistentProtocol, name, pg.protocolType, pg.protocol)
	}
	if pg.state == StateCompletingRebalance && id == pg.leader {
		for _, o := range pg.members {
			o.assignment = s.Assignments[o.id]
			if o.assignment == nil {
				o.assignment = []byte{}
			}
		}
		pg.state = StateStable
		pg.notify()
	}
	for pg.state == StateCompletingRebalance && pg.generation == generation {
		if err := c.waitProtocolGroup(ctx, pg, m, c.cfg.Now().Add(m.session)); err != nil {
			return ClassicSyncAnswer{}, err
		}
		c.expireProtocolGroup(pg, c.cfg.Now()) // a leader that died never syncs
		if pg.members[id] != m {
			return ClassicSyncAnswer{}, fmt.Errorf("%w: member %q was removed from group %q", ErrUnknownMember, id, name)
		}
	}
	if pg.state != StateStable || pg.generation != generation {
		return ClassicSyncAnswer{}, fmt.Errorf("%w: group %q is rebalancing; join again", ErrRebalanceInProgress, name)
	}
	return ClassicSyncAnswer{ProtocolType: pg.protocolType, Protocol: pg.protocol, Assignment: m.assignment}, nil
}

// HeartbeatClassicGroup keeps a member of a classic group proper; it
// answers ErrRebalanceInProgress while the group rebalances.
func (c *Coordinator) HeartbeatClassicGroup(name, id string, generation int32) error {
	pg, _, err := c.protocolMemberAt(name, id, generation)
	if pg == nil {
		return err
	}
	defer c.unlockProtocolGroup(pg)
	if err != nil {
		return err
	}
	if pg.state == StatePreparingRebalance {
		return fmt.Errorf("%w: group %q is rebalancing; join again", ErrRebalanceInProgress, name)
	}
	return nil
}

// LeaveClassicGroup removes a member of a classic group proper; the others
// rebalance.
func (c *Coordinator) LeaveClassicGroup(name, id string) error {
	pg, err := c.lockProtocolGroup(name, false)
	if err != nil {
		return err
	}
	if pg == nil {
		return fmt.Errorf("%w: group %q has no member %q", ErrUnknownMember, name, id)
	}
	defer c.unlockProtocolGroup(pg)
	m := pg.members[id]
	if m == nil {
		return fmt.Errorf("%w: group %q has no member %q", ErrUnknownMember, name, id)
	}
	c.removeProtocolMember(pg, m, "left", c.cfg.Now())
	return nil
}

// commitProtocolGroup runs commit if name is a classic group proper that
// has member id at generation, stable; handled is false when name is no
// such group.
func (c *Coordinator) commitProtocolGroup(name, id string, generation int32, commit func() error) (handled bool, err error) {
	pg, _, err := c.protocolMemberAt(name, id, generation)
	if pg == nil {
		return false, nil
	}
	defer c.unlockProtocolGroup(pg)
	if err != nil {
		return true, err
	}
	if pg.state != StateStable {
		return true, fmt.Errorf("%w: group %q is rebalancing", ErrRebalanceInProgress, name)
	}
	return true, commit()
}

// protocolGroupMembers is how many members the classic group proper name
// has.
func (c *Coordinator) protocolGroupMembers(name string) int {
	pg, err := c.lockProtocolGroup(name, false)
	if err != nil || pg == nil {
		return 0
	}
	defer c.unlockProtocolGroup(pg)
	c.expireProtocolGroup(pg, c.cfg.Now())
	return len(pg.members)
}

// clearProtocolGroup is Clear for a name that is no consumer group: write
// runs while the classic group proper of that name (if any) has no members;
// with force its members are removed first.
func (c *Coordinator) clearProtocolGroup(name string, force bool, write func() error) (int, error) {
	pg, err := c.lockProtocolGroup(name, false)
	if err != nil {
		return 0, err
	}
	if pg == nil {
		return 0, write()
	}
	defer c.unlockProtocolGroup(pg)
	now := c.cfg.Now()
	c.expireProtocolGroup(pg, now)
	n := len(pg.members)
	if n > 0 && !force {
		return 0, fmt.Errorf("%w: group %q has %d members; stop them first, or force", ErrGroupNotEmpty, name, n)
	}
	for _, m := range sortedProtocolMembers(pg) {
		c.removeProtocolMember(pg, m, "removed by force", now)
	}
	return n, write()
}

// describeProtocolGroup describes the classic group proper name; false
// when there is none with members.
func (c *Coordinator) describeProtocolGroup(name string) (Description, bool) {
	pg, err := c.lockProtocolGroup(name, false)
	if err != nil || pg == nil {
		return Description{}, false
	}
	defer c.unlockProtocolGroup(pg)
	c.expireProtocolGroup(pg, c.cfg.Now())
	if len(pg.members) == 0 {
		return Description{}, false
	}
	d := Description{Group: name, State: pg.state, ProtocolType: pg.protocolType, Assignor: pg.protocol, Epoch: pg.generation}
	for _, m := range sortedProtocolMembers(pg) {
		d.Members = append(d.Members, MemberDescription{ID: m.id, ClientID: m.clientID, Host: m.host,
			Epoch: pg.generation, LastHeartbeat: m.lastSeen})
	}
	return d, true
}
