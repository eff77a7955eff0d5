// Package group coordinates consumer groups: members that share the
// partitions of the topics they subscribe to.
//
// The Coordinator is a state machine in memory on the controller. Members
// talk to it with heartbeats only (after Kafka's KIP-848): a member joins
// with epoch 0, reports on every beat what it owns, and each answer tells it
// what it may own now. The group's Assignor computes a target assignment
// whenever the members, their subscriptions or the topics' partition counts
// change; the coordinator then moves partitions towards it one handover at
// a time:
//
//   - a member is asked to give up a partition by an answer that leaves it
//     out; the member stops reading it, commits, and reports it no longer
//     owns it;
//   - only then is the partition granted to its new member.
//
// So no two members own a partition at once, and a member keeps reading
// every partition it is not asked to give up (incremental, cooperative
// rebalancing). A member not heard from for its session timeout, or still
// holding a partition it was asked to give up after its rebalance timeout,
// is removed and its partitions are free at once.
//
// Commits are fenced: a member commits only partitions it owns, with the
// epoch of the answer that granted them or a later one, and the check and
// the commit happen under the group's lock (Coordinator.Commit), so a
// member that lost a partition can never overwrite its new owner's
// position.
//
// Membership survives a change of controller. The coordinator writes a
// group's whole state (State: members, their ids, subscriptions, member
// epochs, targets, grants with the epoch of the answer that made each, the
// group epoch) through Config.Persist, into the controller's Raft state,
// whenever it changes (a join, a leave or removal, a new target, a grant, a
// release, an epoch bump), never on a bare heartbeat, and answers only once
// the write is committed: every member id, member epoch and grant a member
// may act on is durable before the member hears of it, and a failed write
// fails the call. A new coordinator resumes every group from there
// (Coordinator.Resume) with every session and rebalance deadline started
// afresh, since it has heard from nobody yet: old members' next heartbeats
// are recognised, their commits accepted, and no partition is granted
// elsewhere until its owner has been silent at the new coordinator for its
// session timeout. So no two members own a partition at once across a
// failover too. A heartbeat answered from memory alone first confirms
// that this node still coordinates (Config.Confirm), so a deposed
// controller that has not noticed tells no member to go on. Committed
// offsets live in the Raft state as well.
package group
