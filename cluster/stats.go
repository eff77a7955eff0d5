package cluster

import (
	"strings"
	"time"
)

// Read-only figures for the operator's view (metrics, cluster status). They
// read atomics Raft and the offset table keep anyway: nothing here waits on
// the Raft goroutines, so a scrape never stalls behind an election.

// RaftStats is this node's view of the metadata Raft group, the figures of
// hashicorp/raft's Stats() that an operator watches, typed.
type RaftStats struct {
	// State is "leader", "follower", "candidate" or "shutdown".
	State string
	// Term is the current Raft term; it grows with every election.
	Term uint64
	// LastIndex is the last entry in this node's log, committed or not.
	LastIndex uint64
	// CommitIndex is the last entry known to be committed.
	CommitIndex uint64
	// AppliedIndex is the last entry handed to the state machine.
	AppliedIndex uint64
	// LastContact is when a follower last heard from the leader; zero on
	// the leader and before any contact.
	LastContact time.Time
}

// RaftStats returns this node's Raft figures.
func (n *Node) RaftStats() RaftStats {
	return RaftStats{
		State:        strings.ToLower(n.raft.State().String()),
		Term:         n.raft.CurrentTerm(),
		LastIndex:    n.raft.LastIndex(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.raft.AppliedIndex(),
		LastContact:  n.raft.LastContact(),
	}
}

// AllCommittedOffsets returns every group's committed offsets, by group.
// The outer map is the caller's; the inner maps are shared and read-only
// (a commit installs a new one rather than changing it). Consumer lag needs
// every group, and the table has no other way to list them.
func (n *Node) AllCommittedOffsets() map[string]map[TopicPartition]OffsetCommit {
	n.fsm.offsets.mu.RLock()
	defer n.fsm.offsets.mu.RUnlock()
	out := make(map[string]map[TopicPartition]OffsetCommit, len(n.fsm.offsets.groups))
	for g, offs := range n.fsm.offsets.groups {
		out[g] = offs
	}
	return out
}
