package group

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// State is what the coordinator persists of a group (Config.Persist), and
// what a new coordinator resumes it from (Coordinator.Resume): its members
// and their assignments and epochs, not their liveness.
//
// The invariant it keeps across a change of coordinator: every answer a
// member acts on (a member id, a member epoch, a partition granted) is in
// the persisted state before the answer leaves. The coordinator writes the
// group's whole state under the group's lock whenever it changed (a join,
// a leave or a removal, a new target, a grant or a release, an epoch bump),
// never on a bare heartbeat, and answers only once the write is committed.
// So the state a new coordinator resumes from holds every grant any member
// may be acting on: it never grants a partition to a second member while
// the first may still own it, it recognises every member's id and epoch,
// and it accepts their commits. A grant whose write failed is never
// answered; the member asks again.
//
// Liveness is not persisted: a resumed member's session (and a rebalance
// deadline it is under) starts afresh when the coordinator resumes, since
// the new coordinator has heard from nobody yet.
type State struct {
	Assignor string
	Epoch    int32            // group epoch
	Counts   map[string]int32 // partition counts behind the target
	Members  []MemberState    // by id
}

// MemberState is one member in a State.
type MemberState struct {
	ID, ClientID, Host string
	Topics             []string // sorted, distinct
	SessionTimeout     time.Duration
	RebalanceTimeout   time.Duration
	Epoch              int32
	Target             []TopicPartition // sorted
	// Granted maps each partition the member may own to the member epoch
	// of the answer that granted it.
	Granted map[TopicPartition]int32
	Sent    []TopicPartition // the latest answer's assignment, sorted
	// Classic is set for a member of the classic protocol (classic.go).
	Classic *Classic
}

// flush writes the group's state if it changed since it was last written.
// The group is locked.
func (c *Coordinator) flush(ctx context.Context, g *group) error {
	if !g.dirty || c.cfg.Persist == nil {
		g.dirty = false
		return nil
	}
	var s *State
	if len(g.members) > 0 {
		st := g.export()
		s = &st
	}
	if err := c.cfg.Persist(ctx, g.name, s); err != nil {
		return err
	}
	g.dirty = false
	return nil
}

// export returns the group's persistent state. The group is locked and has
// no grant being made (reconcile has stamped every grant's epoch).
func (g *group) export() State {
	s := State{Assignor: g.assignor.Name(), Epoch: g.epoch, Counts: maps.Clone(g.counts)}
	for _, m := range g.sortedMembers() {
		s.Members = append(s.Members, MemberState{
			ID: m.id, ClientID: m.clientID, Host: m.host, Topics: slices.Clone(m.topics),
			SessionTimeout: m.sessionTimeout, RebalanceTimeout: m.rebalanceTimeout,
			Epoch: m.epoch, Target: sortedKeys(m.target), Granted: maps.Clone(m.granted), Sent: slices.Clone(m.sent),
			Classic: m.classic.clone(),
		})
	}
	return s
}

// Resume loads groups a previous coordinator persisted, before this one
// answers anything: members keep their ids, epochs and partitions, and
// every member's session starts now. A group already known here is left
// as it is. A group whose state names an unknown assignor or grants a
// partition twice is skipped and named in the error (the state machine
// refuses to store such a state, so this means a bug); the others resume.
func (c *Coordinator) Resume(states map[string]State) error {
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(states)) {
		if _, ok := c.groups[name]; ok {
			continue
		}
		g, err := resumeGroup(name, states[name], now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.groups[name] = g
		c.cfg.Log.Info("group resumed", "group", name, "members", len(g.members), "epoch", g.epoch)
	}
	return errors.Join(errs...)
}

func resumeGroup(name string, s State, now time.Time) (*group, error) {
	a, ok := AssignorByName(s.Assignor)
	if !ok {
		return nil, fmt.Errorf("group %q: unknown assignor %q", name, s.Assignor)
	}
	g := &group{name: name, assignor: a, epoch: s.Epoch, members: map[string]*member{},
		owner: map[TopicPartition]string{}, counts: maps.Clone(s.Counts), changed: make(chan struct{})}
	for _, ms := range s.Members {
		m := &member{id: ms.ID, clientID: ms.ClientID, host: ms.Host, topics: slices.Clone(ms.Topics),
			sessionTimeout: ms.SessionTimeout, rebalanceTimeout: ms.RebalanceTimeout, lastSeen: now,
			epoch: ms.Epoch, target: map[TopicPartition]bool{}, granted: maps.Clone(ms.Granted), sent: slices.Clone(ms.Sent),
			classic: ms.Classic.clone()}
		if m.granted == nil {
			m.granted = map[TopicPartition]int32{}
		}
		for _, tp := range ms.Target {
			m.target[tp] = true
		}
		for tp := range m.granted {
			if other, ok := g.owner[tp]; ok {
				return nil, fmt.Errorf("group %q: %s is granted to %q and %q", name, tp, other, m.id)
			}
			g.owner[tp] = m.id
			if !m.target[tp] {
				m.revokeSince = now // its rebalance deadline starts afresh too
			}
		}
		if _, dup := g.members[m.id]; dup || m.id == "" {
			return nil, fmt.Errorf("group %q: member id %q empty or twice", name, m.id)
		}
		g.members[m.id] = m
	}
	return g, nil
}

// checkSubscription refuses a subscription that would take the group past
// MaxTopics distinct topics or MaxPartitions partitions in them; member is
// the subscriber ("" for a member joining).
func (c *Coordinator) checkSubscription(g *group, member string, topics []string) error {
	if c.cfg.MaxTopics <= 0 && c.cfg.MaxPartitions <= 0 {
		return nil
	}
	all := map[string]bool{}
	for _, t := range topics {
		all[t] = true
	}
	for _, m := range g.members {
		if m.id == member {
			continue
		}
		for _, t := range m.topics {
			all[t] = true
		}
	}
	if c.cfg.MaxTopics > 0 && len(all) > c.cfg.MaxTopics {
		return fmt.Errorf("%w: group %q would subscribe to %d topics; at most %d", ErrInvalid, g.name, len(all), c.cfg.MaxTopics)
	}
	if c.cfg.MaxPartitions > 0 {
		n := 0
		for t := range all {
			n += int(c.cfg.Partitions(t))
		}
		if n > c.cfg.MaxPartitions {
			return fmt.Errorf("%w: group %q would subscribe to topics with %d partitions; at most %d", ErrInvalid, g.name, n, c.cfg.MaxPartitions)
		}
	}
	return nil
}

func (cl *Classic) clone() *Classic {
	if cl == nil {
		return nil
	}
	return &Classic{Protocols: slices.Clone(cl.Protocols), Protocol: cl.Protocol, Version: cl.Version}
}
