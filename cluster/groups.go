package cluster

import (
	"maps"
	"sync"
)

// Consumer group membership in the Raft state. The group coordinator runs
// in the controller's memory (package group); it writes each group's
// membership here whenever it changes (a member joins, leaves or is
// removed, an assignment or an epoch moves), never on a bare heartbeat, so
// that a new controller resumes every group where the old one left it, as
// Kafka reloads groups from its offsets topic. A membership is written
// whole: one command replaces the group's previous one, so no ordering of
// partial writes has to be reasoned about, and its size is bounded by the
// limits below.
//
// The state machine keeps the memberships beside the committed offsets and
// checks every written one (validateGroupMembership): above all, no
// partition is granted to two members.

// Bounds on one group's membership, checked by the coordinator before a
// change and by the state machine when it is written. Every broker holds
// every group's membership in memory and every snapshot carries it.
const (
	// MaxGroupMembers bounds the members of one group.
	MaxGroupMembers = 1000
	// MaxGroupTopics bounds the distinct topics a group's members
	// subscribe to.
	MaxGroupTopics = 1000
	// MaxGroupPartitions bounds the partitions of a group's subscribed
	// topics, and so the entries of each of its partition sets.
	MaxGroupPartitions = 100_000
	// MaxGroupStringLen bounds a member id, client id, host and assignor
	// name, in bytes.
	MaxGroupStringLen = 255
)

// GroupMembership is one consumer group's membership as its coordinator
// wrote it last. Values handed out are shared and read-only.
type GroupMembership struct {
	// Assignor names the group's assignor.
	Assignor string `json:"assignor"`
	// Epoch is the group epoch, bumped whenever the target assignment is
	// recomputed.
	Epoch int32 `json:"epoch"`
	// Counts are the partition counts of the subscribed topics the target
	// assignment was computed from.
	Counts map[string]int32 `json:"counts,omitempty"`
	// Members, sorted by id; at least one (a group without members has no
	// membership).
	Members []GroupMember `json:"members"`
}

// GroupMember is one member of a GroupMembership.
type GroupMember struct {
	ID       string `json:"id"`
	ClientID string `json:"clientId,omitempty"`
	Host     string `json:"host,omitempty"`
	// Topics the member subscribes to, sorted, distinct.
	Topics             []string `json:"topics"`
	SessionTimeoutMs   int64    `json:"sessionTimeoutMs"`
	RebalanceTimeoutMs int64    `json:"rebalanceTimeoutMs"`
	// Epoch is the member epoch of the latest answer made to it.
	Epoch int32 `json:"epoch"`
	// Target is what the assignment wants the member to own.
	Target PartitionSet `json:"target,omitempty"`
	// Granted is what the member may own as far as the coordinator knows:
	// by topic, [partition, epoch] pairs sorted by partition, the epoch
	// being the member epoch of the answer that granted it.
	Granted map[string][][2]int32 `json:"granted,omitempty"`
	// Sent is the assignment of the latest answer made to it.
	Sent PartitionSet `json:"sent,omitempty"`
	// Classic is set for a member of Kafka's classic protocol (JoinGroup,
	// SyncGroup): absent in states written before classic members existed,
	// which is what they are read as, heartbeat members.
	Classic *GroupClassicMember `json:"classic,omitempty"`
}

// GroupClassicMember is a classic member's protocol: the protocol names it
// offered, the one it was answered, and its consumer protocol version.
type GroupClassicMember struct {
	Protocols []string `json:"protocols"`
	Protocol  string   `json:"protocol"`
	Version   int16    `json:"version,omitempty"`
}

// MaxGroupClassicProtocols bounds the protocols a classic member offers.
const MaxGroupClassicProtocols = 32

// PartitionSet is partitions by topic, each list sorted and distinct.
type PartitionSet map[string][]int32

// membershipTable holds every group's membership. Like offsetTable, the
// state machine goroutine is its only writer; other readers take mu.
type membershipTable struct {
	mu     sync.RWMutex
	groups map[string]*GroupMembership
}

func (t *membershipTable) all() map[string]*GroupMembership {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return maps.Clone(t.groups)
}

// snapshot returns a shallow copy (the values are immutable). FSM
// goroutine only.
func (t *membershipTable) snapshot() map[string]*GroupMembership { return maps.Clone(t.groups) }

// install replaces the groups in changes; nil removes one. FSM goroutine
// only.
func (t *membershipTable) install(changes map[string]*GroupMembership) {
	if len(changes) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.groups == nil {
		t.groups = make(map[string]*GroupMembership)
	}
	for g, m := range changes {
		if m == nil {
			delete(t.groups, g)
		} else {
			t.groups[g] = m
		}
	}
}

// replace swaps in a whole table (snapshot restore). FSM goroutine only.
func (t *membershipTable) replace(groups map[string]*GroupMembership) {
	t.mu.Lock()
	t.groups = groups
	t.mu.Unlock()
}
