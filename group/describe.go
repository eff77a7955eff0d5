package group

import (
	"sort"
	"time"
)

// Group states, as DescribeGroup and ListGroups show them.
const (
	StateEmpty       = "empty"       // no members (it may have committed offsets)
	StateStable      = "stable"      // every member owns exactly its target
	StateReconciling = "reconciling" // partitions are moving between members
	// States of a classic group proper (classic_group.go) besides stable:
	// waiting for its members to join again, and for its leader's
	// assignments.
	StatePreparingRebalance  = "preparing_rebalance"
	StateCompletingRebalance = "completing_rebalance"
)

// Description is a group's membership now.
type Description struct {
	Group string
	State string
	// ProtocolType is "" for a consumer group (its classic members'
	// protocol type is "consumer"), else the protocol type of a classic
	// group proper (Kafka Connect's "connect"), whose Assignor is the
	// protocol chosen and Epoch the generation (classic_group.go).
	ProtocolType string
	Assignor     string
	Epoch        int32
	Members      []MemberDescription // by member id
}

// MemberDescription is one member.
type MemberDescription struct {
	ID, ClientID, Host string
	Epoch              int32
	Topics             []string
	Owned              []TopicPartition // granted and not given up
	Revoking           []TopicPartition // owned, and asked to give up
	Pending            []TopicPartition // in its target, held by another member
	LastHeartbeat      time.Time
	// ClassicProtocol is the protocol a classic member (JoinGroup) was
	// answered; "" for a heartbeat member.
	ClassicProtocol string
}

// Summary is one line of a group listing.
type Summary struct {
	Group    string
	State    string
	Members  int
	Assignor string
	// ProtocolType is "" for a consumer group, else a classic group's
	// (Description.ProtocolType).
	ProtocolType string
}

// Describe returns a group's membership; false when the group has no
// members.
func (c *Coordinator) Describe(name string) (Description, bool) {
	g, err := c.lockGroup(name, false)
	if err != nil {
		return Description{}, false
	}
	if g == nil {
		return c.describeProtocolGroup(name)
	}
	defer c.unlockGroup(g)
	c.expire(g, c.cfg.Now())
	if len(g.members) == 0 {
		return Description{}, false
	}
	d := Description{Group: name, State: g.state(), Assignor: g.assignor.Name(), Epoch: g.epoch}
	for _, m := range g.sortedMembers() {
		md := MemberDescription{ID: m.id, ClientID: m.clientID, Host: m.host, Epoch: m.epoch,
			Topics: append([]string(nil), m.topics...), LastHeartbeat: m.lastSeen}
		if m.classic != nil {
			md.ClassicProtocol = m.classic.Protocol
		}
		for tp := range m.granted {
			md.Owned = append(md.Owned, tp)
			if !m.target[tp] {
				md.Revoking = append(md.Revoking, tp)
			}
		}
		for tp := range m.target {
			if _, ok := m.granted[tp]; !ok {
				md.Pending = append(md.Pending, tp)
			}
		}
		SortPartitions(md.Owned)
		SortPartitions(md.Revoking)
		SortPartitions(md.Pending)
		d.Members = append(d.Members, md)
	}
	return d, true
}

// List summarises the groups that have members, by name.
func (c *Coordinator) List() []Summary {
	c.mu.Lock()
	names := make([]string, 0, len(c.groups)+len(c.protocolGroups))
	for name := range c.groups {
		names = append(names, name)
	}
	for name := range c.protocolGroups {
		names = append(names, name)
	}
	c.mu.Unlock()
	sort.Strings(names)
	var out []Summary
	for _, name := range names {
		if d, ok := c.Describe(name); ok {
			out = append(out, Summary{Group: name, State: d.State, Members: len(d.Members), Assignor: d.Assignor, ProtocolType: d.ProtocolType})
		}
	}
	return out
}

func (g *group) state() string {
	if len(g.members) == 0 {
		return StateEmpty
	}
	for _, m := range g.members {
		if len(m.granted) != len(m.target) {
			return StateReconciling
		}
		for tp := range m.target {
			if _, ok := m.granted[tp]; !ok {
				return StateReconciling
			}
		}
	}
	return StateStable
}
