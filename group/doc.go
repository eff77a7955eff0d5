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
// Membership is not replicated: when the controller moves, the new
// coordinator starts empty and members learn they are unknown, drop their
// partitions without committing, and join again. Committed offsets live in
// the Raft state and survive.
package group
