// Package cluster holds Strata's cluster metadata in a Raft group: the
// registered brokers, the topics with their partition assignment, leaders,
// leader epochs and ISRs, the committed consumer offsets, the counter that
// hands out idempotent producers' ids, the ACLs, and the SCRAM credentials
// Kafka clients log in with (scram.go).
//
// The metadata is a replicated state machine (hashicorp/raft, with the log
// in raft-boltdb), so every broker that is a member of the group, as a voter
// or a non-voter, has all of it locally: Node.Metadata is a lock-free read of
// an immutable value, and Node.Changed wakes whoever waits for the next one.
// The broker leading the group is the controller; every change is proposed
// by it as a command in the Raft log (Invariant 4: only the controller
// changes ISRs and leaders, through the log). A write on another broker
// gets a *NotControllerError naming the controller.
//
// Commands are JSON objects tagged with a type and a version (commands.go).
// The state machine applies each one deterministically: it validates it
// against the current state and either refuses it with an error that goes
// back to the proposer, changing nothing, or builds the next state beside the
// current one, sharing what did not change, and swaps it in (copy-on-write,
// transitions.go). Leader changes bump the partition's leader epoch and are
// fenced by the epoch the proposer expects; ISR changes are fenced by the
// leader's epoch (Invariant 3).
//
// Snapshots are the whole state as one JSON document (snapshot.go).
//
// A node bootstraps a new group when asked and when its directory holds no
// Raft state; a single broker is a group of one voter. Growing the group
// (AddVoter, AddNonvoter, RemoveServer) is driven by gossip, which arrives
// in another package.
package cluster
