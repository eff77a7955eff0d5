package group

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"
)

// LeaveEpoch is the member epoch of a heartbeat that leaves the group.
const LeaveEpoch = -1

// Defaults and bounds of the member timeouts a heartbeat may ask for.
const (
	DefaultSessionTimeout   = 10 * time.Second
	MinSessionTimeout       = time.Second
	MaxSessionTimeout       = 5 * time.Minute
	DefaultRebalanceTimeout = 60 * time.Second
	MaxRebalanceTimeout     = 30 * time.Minute
	// maxHeartbeatInterval bounds how long a heartbeat is held, so that a
	// member with a long session still hears of a rebalance promptly when
	// a wake-up is missed (it never is, but a bound costs nothing).
	maxHeartbeatInterval = 5 * time.Second
)

// Errors. The broker maps them to the API's error reasons.
var (
	ErrUnknownMember  = errors.New("group: unknown member")
	ErrFencedMember   = errors.New("group: fenced member")
	ErrGroupNotEmpty  = errors.New("group: group has members")
	ErrInvalid        = errors.New("group: invalid group request")
	ErrNotCoordinator = errors.New("group: not the coordinator")
	// ErrGroupFull refines ErrInvalid: a join refused because the group has
	// MaxMembers members already.
	ErrGroupFull = errors.New("group: group full")
)

// Config is what a Coordinator needs from the broker around it.
type Config struct {
	// Partitions returns a topic's partition count, 0 when it does not
	// exist. Required.
	Partitions func(topic string) int32
	// IsCoordinator reports whether this node still coordinates groups;
	// answers are refused (ErrNotCoordinator) once it does not. Nil means
	// always.
	IsCoordinator func() bool
	// MaxMembers bounds the members of one group; 0 means 1000.
	MaxMembers int
	// MaxTopics bounds the distinct topics a group's members subscribe
	// to, and MaxPartitions the partitions of those topics, so that the
	// state Persist writes stays bounded; 0 means no bound.
	MaxTopics, MaxPartitions int
	// Persist makes a group's state durable (nil: it has no members
	// left); see State. The coordinator calls it, under the group's lock,
	// whenever the state changed, before any answer leaves: a heartbeat's,
	// a leave's or a forced removal's. An error fails the call, and the
	// state is written again with the next one. Nil means nothing is
	// persisted (tests).
	Persist func(ctx context.Context, group string, s *State) error
	// Confirm reports whether this node is still the coordinator, checked
	// with the other brokers (not from local belief), before a heartbeat
	// is answered from memory alone, without a Persist that would have
	// proved it: a deposed controller that does not know it yet must not
	// tell a member it may go on owning its partitions. Nil means always.
	Confirm func(ctx context.Context) error
	// MaxGroups bounds the groups with members; 0 means no bound.
	MaxGroups int
	Now       func() time.Time // default time.Now
	Log       *slog.Logger     // default slog.Default()
	// NewMemberID names a joining member; default 16 random hex digits.
	NewMemberID func() string
}

// Heartbeat is one member's beat (see the GroupService API).
type Heartbeat struct {
	Group            string
	MemberID         string
	MemberEpoch      int32
	Topics           []string // required when joining; empty: unchanged
	Assignor         string   // "" means DefaultAssignor
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	Owned            []TopicPartition
	// OwnedUnchanged says Owned is not reported: the member owns what it
	// did at its last heartbeat (Kafka's null owned partitions), so
	// nothing it holds is taken as given up.
	OwnedUnchanged bool
	// KeepMemberID makes a join (epoch 0) keep MemberID as the member's id
	// instead of the coordinator naming it (Kafka's KIP-1082: the client
	// names itself once, for its life). Joining again under an id the
	// group has replaces that member, and the new one's epochs continue
	// from the old one's, so nothing the old one sent passes for the new.
	KeepMemberID   bool
	ClientID, Host string
	NoWait         bool
}

// Answer is the coordinator's reply to a heartbeat.
type Answer struct {
	MemberID          string
	MemberEpoch       int32
	HeartbeatInterval time.Duration
	// Assigned is what the member may own now, sorted.
	Assigned []TopicPartition
	// Pending counts partitions of the member's target another member
	// still has to give up.
	Pending int
}

// Coordinator runs every group's membership and assignment. It is safe for
// concurrent use; each group has its own lock.
type Coordinator struct {
	cfg Config

	mu     sync.Mutex
	groups map[string]*group
	// protocolGroups are the classic groups of protocol types other than
	// "consumer" (classic_group.go), by name; no name is in both maps.
	protocolGroups map[string]*protocolGroup
	closed         bool
}

type group struct {
	name string

	mu       sync.Mutex
	assignor Assignor
	epoch    int32 // bumped whenever the target assignment is recomputed
	members  map[string]*member
	owner    map[TopicPartition]string // who holds each partition now
	counts   map[string]int32          // partition counts behind the target
	// changed is closed, and replaced, whenever a held heartbeat may have
	// a different answer: a new target or a partition given up.
	changed chan struct{}
	gone    bool // removed from the coordinator: its last member left
	// dirty is set when the state Persist writes (State) changed since it
	// was last written.
	dirty bool
}

type member struct {
	id, clientID, host string
	topics             []string
	sessionTimeout     time.Duration
	rebalanceTimeout   time.Duration
	lastSeen           time.Time // arrival of its latest heartbeat
	held               int       // heartbeats of it being held now
	epoch              int32
	target             map[TopicPartition]bool
	// granted maps each partition the member owns, as far as the
	// coordinator knows, to the member epoch of the answer that granted
	// it; 0 while that answer is being made.
	granted map[TopicPartition]int32
	sent    []TopicPartition // Assigned of the latest answer
	// revokeSince is when the member was first asked to give up a
	// partition it still holds; zero when it holds none.
	revokeSince time.Time
	// joining is set until the member's first answer, which always moves
	// its epoch (from 0, or from its previous incarnation's).
	joining bool
	// classic is set for a member of the classic protocol (classic.go).
	classic *Classic
}

// NewCoordinator returns a Coordinator with no groups.
func NewCoordinator(cfg Config) *Coordinator {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MaxMembers <= 0 {
		cfg.MaxMembers = 1000
	}
	if cfg.NewMemberID == nil {
		cfg.NewMemberID = randomMemberID
	}
	return &Coordinator{cfg: cfg, groups: make(map[string]*group), protocolGroups: make(map[string]*protocolGroup)}
}

func randomMemberID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Close ends the coordinator: held heartbeats return ErrNotCoordinator and
// every later call fails with it. The broker closes a coordinator when it
// stops being the controller.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	groups := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		groups = append(groups, g)
	}
	pgs := make([]*protocolGroup, 0, len(c.protocolGroups))
	for _, pg := range c.protocolGroups {
		pgs = append(pgs, pg)
	}
	c.mu.Unlock()
	for _, g := range groups {
		g.mu.Lock()
		g.notify()
		g.mu.Unlock()
	}
	for _, pg := range pgs {
		pg.mu.Lock()
		pg.notify()
		pg.mu.Unlock()
	}
}

func (c *Coordinator) valid() bool {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	return !closed && (c.cfg.IsCoordinator == nil || c.cfg.IsCoordinator())
}

// lockGroup returns the named group locked, creating it when create is
// set; nil when it does not exist.
func (c *Coordinator) lockGroup(name string, create bool) (*group, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrNotCoordinator
		}
		g := c.groups[name]
		if g == nil {
			if !create {
				c.mu.Unlock()
				return nil, nil
			}
			if c.protocolGroups[name] != nil {
				c.mu.Unlock()
				return nil, fmt.Errorf("%w: group %q is a classic group of another protocol type than consumer", ErrInconsistentProtocol, name)
			}
			if err := c.roomForGroupLocked(name); err != nil {
				c.mu.Unlock()
				return nil, err
			}
			g = &group{name: name, members: map[string]*member{}, owner: map[TopicPartition]string{},
				changed: make(chan struct{})}
			c.groups[name] = g
		}
		c.mu.Unlock()
		g.mu.Lock()
		if !g.gone {
			return g, nil
		}
		g.mu.Unlock() // removed meanwhile: look again
	}
}

// roomForGroupLocked refuses a new group beyond MaxGroups, counting both
// kinds (consumer groups and classic groups proper). c.mu is held.
func (c *Coordinator) roomForGroupLocked(name string) error {
	if n := len(c.groups) + len(c.protocolGroups); c.cfg.MaxGroups > 0 && n >= c.cfg.MaxGroups {
		return fmt.Errorf("%w: group %q would be a new group with members, and %d have members already; at most %d are allowed",
			ErrInvalid, name, n, c.cfg.MaxGroups)
	}
	return nil
}

// unlockGroup unlocks g, removing it from the coordinator when it has no
// members left (committed offsets live elsewhere; an empty group needs no
// state here) and that is written.
func (c *Coordinator) unlockGroup(g *group) {
	if len(g.members) == 0 && !g.gone && !g.dirty {
		g.gone = true
		c.mu.Lock()
		if c.groups[g.name] == g {
			delete(c.groups, g.name)
		}
		c.mu.Unlock()
	}
	g.mu.Unlock()
}

// Heartbeat handles one member heartbeat. When the answer would tell the
// member nothing new (it owns exactly what it may own) and NoWait is not
// set, the call is held until that changes, the heartbeat interval passes
// or ctx ends.
func (c *Coordinator) Heartbeat(ctx context.Context, hb Heartbeat) (Answer, error) {
	if hb.MemberEpoch < LeaveEpoch {
		return Answer{}, fmt.Errorf("%w: member epoch %d is negative", ErrInvalid, hb.MemberEpoch)
	}
	if hb.MemberEpoch != 0 && hb.MemberID == "" {
		return Answer{}, fmt.Errorf("%w: member epoch %d without a member id (join with epoch 0)", ErrInvalid, hb.MemberEpoch)
	}
	g, err := c.lockGroup(hb.Group, hb.MemberEpoch == 0)
	if err != nil {
		return Answer{}, err
	}
	if g == nil {
		if hb.MemberEpoch == LeaveEpoch {
			return Answer{MemberID: hb.MemberID, MemberEpoch: LeaveEpoch}, nil
		}
		return Answer{}, fmt.Errorf("%w: group %q has no member %q", ErrUnknownMember, hb.Group, hb.MemberID)
	}
	defer func() { c.unlockGroup(g) }()
	ans, err, persisted := c.heartbeatLocked(ctx, g, hb)
	if err := c.flush(ctx, g); err != nil {
		return Answer{}, err
	}
	if err == nil && !persisted && c.cfg.Confirm != nil {
		if cerr := c.cfg.Confirm(ctx); cerr != nil {
			return Answer{}, fmt.Errorf("%w: %w", ErrNotCoordinator, cerr)
		}
	}
	return ans, err
}

// heartbeatLocked is Heartbeat with the group locked; the caller makes the
// group's state durable before the answer leaves (flush). persisted tells
// whether the state was written during the call.
func (c *Coordinator) heartbeatLocked(ctx context.Context, g *group, hb Heartbeat) (_ Answer, _ error, persisted bool) {
	now := c.cfg.Now()
	c.expire(g, now)

	var m *member
	var err error
	switch hb.MemberEpoch {
	case LeaveEpoch:
		if m = g.members[hb.MemberID]; m != nil {
			c.remove(g, m, "left")
		}
		return Answer{MemberID: hb.MemberID, MemberEpoch: LeaveEpoch}, nil, false
	case 0:
		if m, err = c.join(g, hb, now); err != nil {
			return Answer{}, err, false
		}
	default:
		if m, err = c.beat(g, hb, now); err != nil {
			return Answer{}, err, false
		}
	}
	c.refreshCounts(g)
	ans := c.reconcile(g, m, now)

	if !hb.NoWait && samePartitions(ans.Assigned, hb.Owned) {
		deadline := now.Add(ans.HeartbeatInterval)
		for samePartitions(ans.Assigned, hb.Owned) {
			wait := deadline.Sub(c.cfg.Now())
			if next, ok := c.nextExpiry(g); ok && next.Sub(c.cfg.Now()) < wait {
				wait = max(next.Sub(c.cfg.Now()), time.Millisecond)
			}
			if wait <= 0 {
				break
			}
			// Whatever changed is written before the wait, so that the
			// group's other members are not held up by a write due now.
			if err := c.flush(ctx, g); err != nil {
				return Answer{}, err, false
			}
			changed := g.changed
			m.held++
			g.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-changed:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			g.mu.Lock()
			m.held--
			if g.members[m.id] != m {
				return Answer{}, fmt.Errorf("%w: member %q was removed from group %q", ErrUnknownMember, m.id, g.name), false
			}
			if ctx.Err() != nil || !c.valid() {
				break
			}
			c.expire(g, c.cfg.Now())
			c.refreshCounts(g)
			ans = c.reconcile(g, m, c.cfg.Now())
		}
	}
	if !c.valid() {
		return Answer{}, ErrNotCoordinator, false
	}
	return ans, nil, g.dirty && c.cfg.Persist != nil
}

func (c *Coordinator) join(g *group, hb Heartbeat, now time.Time) (*member, error) {
	topics := distinctSorted(hb.Topics)
	if len(topics) == 0 {
		return nil, fmt.Errorf("%w: a member joining group %q must subscribe to at least one topic", ErrInvalid, g.name)
	}
	name := hb.Assignor
	if name == "" {
		name = DefaultAssignor
	}
	a, ok := AssignorByName(name)
	if !ok {
		return nil, fmt.Errorf("%w: assignor %q: want one of %v", ErrInvalid, name, AssignorNames())
	}
	session, err := timeout("session timeout", hb.SessionTimeout, DefaultSessionTimeout, MinSessionTimeout, MaxSessionTimeout)
	if err != nil {
		return nil, err
	}
	rebalance, err := timeout("rebalance timeout", hb.RebalanceTimeout, DefaultRebalanceTimeout, MinSessionTimeout, MaxRebalanceTimeout)
	if err != nil {
		return nil, err
	}
	// A member joining again under its old id has lost what it owned.
	var epoch int32
	if old := g.members[hb.MemberID]; old != nil && hb.MemberID != "" {
		if hb.KeepMemberID {
			epoch = old.epoch // the same id: its epochs go on rising
		}
		c.remove(g, old, "joined again")
	}
	if len(g.members) > 0 && g.assignor.Name() != a.Name() {
		return nil, fmt.Errorf("%w: group %q uses the %q assignor; a member asking for %q cannot join it",
			ErrInvalid, g.name, g.assignor.Name(), a.Name())
	}
	if len(g.members) >= c.cfg.MaxMembers {
		return nil, fmt.Errorf("%w: %w: group %q has %d members, the most allowed", ErrInvalid, ErrGroupFull, g.name, len(g.members))
	}
	if err := c.checkSubscription(g, "", topics); err != nil {
		return nil, err
	}
	if len(g.members) == 0 {
		g.assignor = a
	}
	m := &member{id: hb.MemberID, clientID: hb.ClientID, host: hb.Host, topics: topics,
		sessionTimeout: session, rebalanceTimeout: rebalance, lastSeen: now, epoch: epoch, joining: true,
		target: map[TopicPartition]bool{}, granted: map[TopicPartition]int32{}}
	if !hb.KeepMemberID || m.id == "" {
		m.id = c.cfg.NewMemberID()
		for g.members[m.id] != nil {
			m.id = c.cfg.NewMemberID()
		}
	}
	g.members[m.id] = m
	c.cfg.Log.Info("group member joined", "group", g.name, "member", m.id, "client", m.clientID, "topics", topics)
	c.rebalance(g)
	return m, nil
}

func timeout(what string, d, def, lo, hi time.Duration) (time.Duration, error) {
	if d == 0 {
		return def, nil
	}
	if d < lo || d > hi {
		return 0, fmt.Errorf("%w: %s %v: want between %v and %v", ErrInvalid, what, d, lo, hi)
	}
	return d, nil
}

// beat applies a known member's heartbeat: a new subscription, and the
// partitions it reports having given up.
func (c *Coordinator) beat(g *group, hb Heartbeat, now time.Time) (*member, error) {
	m := g.members[hb.MemberID]
	if m == nil {
		return nil, fmt.Errorf("%w: group %q has no member %q (its session expired, it was removed, or the coordinator moved); join again",
			ErrUnknownMember, g.name, hb.MemberID)
	}
	if m.classic != nil {
		return nil, fmt.Errorf("%w: member %q of group %q uses the classic protocol (JoinGroup), not heartbeats", ErrUnknownMember, m.id, g.name)
	}
	if hb.MemberEpoch > m.epoch {
		c.remove(g, m, "epoch from the future")
		return nil, fmt.Errorf("%w: member %q of group %q sent epoch %d; the latest it was given is %d",
			ErrFencedMember, m.id, g.name, hb.MemberEpoch, m.epoch)
	}
	owned := make(map[TopicPartition]bool, len(hb.Owned))
	if hb.OwnedUnchanged {
		// Not reported: it still holds whatever it was granted and has not
		// reported given up, so nothing is released.
		for tp := range m.granted {
			owned[tp] = true
		}
	}
	for _, tp := range hb.Owned {
		if _, ok := m.granted[tp]; !ok {
			// Answers come one at a time and the coordinator forgets a
			// grant only when the member reports it gone, so a member
			// claiming a partition it was never granted is confused or
			// stale: it must drop everything and join again.
			c.remove(g, m, "claims a partition it was not granted")
			return nil, fmt.Errorf("%w: member %q of group %q reports owning %s, which the coordinator did not give it",
				ErrFencedMember, m.id, g.name, tp)
		}
		owned[tp] = true
	}
	topics := distinctSorted(hb.Topics)
	if len(topics) > 0 && !slices.Equal(topics, m.topics) {
		if err := c.checkSubscription(g, m.id, topics); err != nil {
			return nil, err
		}
	}
	m.lastSeen = now
	if hb.ClientID != "" && hb.ClientID != m.clientID {
		m.clientID = hb.ClientID
		g.dirty = true
	}
	if len(topics) > 0 && !slices.Equal(topics, m.topics) {
		m.topics = topics
		c.rebalance(g)
	}
	// Partitions the member reports given up, and no longer has to own,
	// are free. Those still in its target stay granted: the answer that
	// gave them may not have reached it.
	g.release(m, owned)
	return m, nil
}

// release frees the partitions granted to m that it no longer reports
// owning (owned) and no longer has to own: the handover rule's one place,
// for heartbeat and classic members alike. A partition still in m's
// target stays granted, reported or not.
func (g *group) release(m *member, owned map[TopicPartition]bool) {
	released := false
	for tp := range m.granted {
		if !owned[tp] && !m.target[tp] {
			delete(m.granted, tp)
			if g.owner[tp] == m.id {
				delete(g.owner, tp)
			}
			released = true
		}
	}
	if released {
		g.dirty = true
		g.notify()
	}
}

// reconcile grants the member the free partitions of its target and makes
// its answer; the member epoch moves when the assignment does.
func (c *Coordinator) reconcile(g *group, m *member, now time.Time) Answer {
	pending := 0
	for _, tp := range sortedKeys(m.target) {
		if _, ok := m.granted[tp]; ok {
			continue
		}
		if g.owner[tp] == "" {
			g.owner[tp] = m.id
			m.granted[tp] = 0
			g.dirty = true
			continue
		}
		pending++
	}
	var assigned []TopicPartition
	fresh := false
	revoking := false
	for tp, e := range m.granted {
		if m.target[tp] {
			assigned = append(assigned, tp)
			fresh = fresh || e == 0
		} else {
			revoking = true
		}
	}
	SortPartitions(assigned)
	// A joining member's first answer moves its epoch (to 1 from 0) even
	// when it gets nothing yet.
	if fresh || m.joining || !slices.Equal(assigned, m.sent) {
		g.dirty = true
		m.joining = false
		m.epoch++
		m.sent = assigned
		for tp, e := range m.granted {
			if e == 0 {
				m.granted[tp] = m.epoch
			}
		}
	}
	switch {
	case !revoking:
		m.revokeSince = time.Time{}
	case m.revokeSince.IsZero():
		m.revokeSince = now
	}
	return Answer{MemberID: m.id, MemberEpoch: m.epoch, HeartbeatInterval: heartbeatInterval(m.sessionTimeout),
		Assigned: slices.Clone(assigned), Pending: pending}
}

func heartbeatInterval(session time.Duration) time.Duration {
	return min(session/3, maxHeartbeatInterval)
}

// expire removes members not heard from within their session timeout and
// members holding a partition they were asked to give up for longer than
// their rebalance timeout. A member whose heartbeat is being held is alive.
func (c *Coordinator) expire(g *group, now time.Time) {
	for _, m := range g.sortedMembers() {
		if m.held > 0 {
			continue
		}
		switch {
		case now.Sub(m.lastSeen) > m.sessionTimeout:
			c.remove(g, m, "session timeout")
		case !m.revokeSince.IsZero() && now.Sub(m.revokeSince) > m.rebalanceTimeout:
			c.remove(g, m, "rebalance timeout")
		}
	}
}

// nextExpiry is the earliest time expire may remove a member.
func (c *Coordinator) nextExpiry(g *group) (time.Time, bool) {
	var next time.Time
	for _, m := range g.members {
		if m.held > 0 {
			continue
		}
		t := m.lastSeen.Add(m.sessionTimeout)
		if r := m.revokeSince.Add(m.rebalanceTimeout); !m.revokeSince.IsZero() && r.Before(t) {
			t = r
		}
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next.Add(time.Millisecond), !next.IsZero()
}

// remove takes a member out of the group; its partitions are free at once.
func (c *Coordinator) remove(g *group, m *member, why string) {
	delete(g.members, m.id)
	for tp := range m.granted {
		if g.owner[tp] == m.id {
			delete(g.owner, tp)
		}
	}
	c.cfg.Log.Info("group member removed", "group", g.name, "member", m.id, "client", m.clientID, "reason", why,
		"partitions", len(m.granted))
	c.rebalance(g)
}

// refreshCounts rebalances when a subscribed topic was created, deleted or
// changed its partition count since the target was computed.
func (c *Coordinator) refreshCounts(g *group) {
	for t, n := range g.counts {
		if c.cfg.Partitions(t) != n {
			c.rebalance(g)
			return
		}
	}
}

// rebalance computes a new target assignment with the group's assignor.
func (c *Coordinator) rebalance(g *group) {
	g.epoch++
	g.dirty = true
	defer g.notify()
	if len(g.members) == 0 {
		g.counts = nil
		return
	}
	members := g.sortedMembers()
	subs := make([]MemberSubscription, len(members))
	counts := map[string]int32{}
	for i, m := range members {
		subs[i] = MemberSubscription{ID: m.id, Topics: m.topics, Current: sortedKeys(m.target)}
		for _, t := range m.topics {
			counts[t] = c.cfg.Partitions(t)
		}
	}
	g.counts = counts
	target := g.assignor.Assign(subs, counts)
	for _, m := range members {
		m.target = make(map[TopicPartition]bool, len(target[m.id]))
		for _, tp := range target[m.id] {
			m.target[tp] = true
		}
	}
}

func (g *group) notify() {
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *group) sortedMembers() []*member {
	out := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// Commit runs commit, the write of a group's offsets, if the caller may
// commit those partitions: a member (memberID set) only partitions it owns,
// with an epoch no older than the answer that granted them; anyone else
// only while the group has no members. The check and the write happen under
// the group's lock, so no rebalance passes between them.
func (c *Coordinator) Commit(name, memberID string, epoch int32, tps []TopicPartition, commit func() error) error {
	g, err := c.lockGroup(name, false)
	if err != nil {
		return err
	}
	if g == nil {
		if memberID != "" {
			if handled, err := c.commitProtocolGroup(name, memberID, epoch, commit); handled {
				return err
			}
			return fmt.Errorf("%w: group %q has no member %q; join again", ErrUnknownMember, name, memberID)
		}
		if n := c.protocolGroupMembers(name); n > 0 {
			return fmt.Errorf("%w: group %q has %d members; commit as one of them, or stop them first", ErrGroupNotEmpty, name, n)
		}
		return commit()
	}
	defer c.unlockGroup(g)
	c.expire(g, c.cfg.Now())
	if memberID == "" {
		if n := len(g.members); n > 0 {
			return fmt.Errorf("%w: group %q has %d members; commit as one of them, or stop them first", ErrGroupNotEmpty, name, n)
		}
		return commit()
	}
	m := g.members[memberID]
	if m == nil {
		return fmt.Errorf("%w: group %q has no member %q (its session expired, it was removed, or the coordinator moved); join again",
			ErrUnknownMember, name, memberID)
	}
	if epoch > m.epoch {
		return fmt.Errorf("%w: member %q of group %q commits with epoch %d; the latest it was given is %d",
			ErrFencedMember, memberID, name, epoch, m.epoch)
	}
	for _, tp := range tps {
		e, ok := m.granted[tp]
		if !ok || e == 0 {
			return fmt.Errorf("%w: member %q of group %q does not own %s", ErrFencedMember, memberID, name, tp)
		}
		if epoch < e {
			return fmt.Errorf("%w: member %q of group %q commits %s with epoch %d, older than epoch %d that gave it the partition",
				ErrFencedMember, memberID, name, tp, epoch, e)
		}
	}
	if !c.valid() {
		return ErrNotCoordinator
	}
	return commit()
}

// Clear runs write (a reset or a deletion of the group's offsets) while the
// group has no members; with force it first removes the members, who then
// find themselves unknown and join again. It returns how many it removed.
func (c *Coordinator) Clear(ctx context.Context, name string, force bool, write func() error) (int, error) {
	g, err := c.lockGroup(name, false)
	if err != nil {
		return 0, err
	}
	if g == nil {
		return c.clearProtocolGroup(name, force, write)
	}
	defer c.unlockGroup(g)
	c.expire(g, c.cfg.Now())
	n := len(g.members)
	if n > 0 && !force {
		return 0, fmt.Errorf("%w: group %q has %d members; stop them first, or force", ErrGroupNotEmpty, name, n)
	}
	for _, m := range g.sortedMembers() {
		c.remove(g, m, "removed by force")
	}
	// The removal is durable before the write: a coordinator that took
	// over in between must not let the removed members commit over it.
	if err := c.flush(ctx, g); err != nil {
		return 0, err
	}
	return n, write()
}

// Subscribed runs write with the topics the group's members subscribe to
// now (nil for a group without members), under the group's lock, so that
// no member subscribes to a topic between the check and the write: an
// offset deletion that must spare the topics in use (Kafka's OffsetDelete).
func (c *Coordinator) Subscribed(name string, write func(subscribed map[string]bool) error) error {
	g, err := c.lockGroup(name, false)
	if err != nil {
		return err
	}
	if g == nil {
		return write(nil)
	}
	defer c.unlockGroup(g)
	c.expire(g, c.cfg.Now())
	subscribed := map[string]bool{}
	for _, m := range g.members {
		for _, t := range m.topics {
			subscribed[t] = true
		}
	}
	if !c.valid() {
		return ErrNotCoordinator
	}
	return write(subscribed)
}

// Members returns how many members a group has now.
func (c *Coordinator) Members(name string) int {
	g, err := c.lockGroup(name, false)
	if err != nil || g == nil {
		return c.protocolGroupMembers(name)
	}
	defer c.unlockGroup(g)
	c.expire(g, c.cfg.Now())
	return len(g.members)
}

func samePartitions(sorted []TopicPartition, other []TopicPartition) bool {
	if len(sorted) != len(other) {
		return false
	}
	o := slices.Clone(other)
	SortPartitions(o)
	return slices.Equal(sorted, o)
}

func sortedKeys(m map[TopicPartition]bool) []TopicPartition {
	out := make([]TopicPartition, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	SortPartitions(out)
	return out
}

func distinctSorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > 0 && out[0] == "" {
		out = out[1:]
	}
	return out
}
