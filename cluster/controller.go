package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strata-log/strata/security"
)

// The writes. Each one checks what it can without the state, then that this
// node is the controller (and has caught up with its predecessors), then
// what depends on the state, and proposes a command. The state machine
// checks the state-dependent rules again when it applies the command, since
// another command may have been applied in between; its verdict is the one
// returned. Every write blocks until the command is applied on this node or
// ctx is done.

// RegisterBroker records a broker's addresses and rack, replacing an earlier
// registration of the same id.
func (n *Node) RegisterBroker(ctx context.Context, b BrokerInfo) error {
	if err := validateBroker(b); err != nil {
		return err
	}
	if err := n.syncLeader(ctx); err != nil {
		return err
	}
	_, err := n.propose(ctx, &registerBrokerCmd{Broker: b})
	return err
}

// CreateTopic creates a topic with the given number of partitions, each
// replicated on replicationFactor registered brokers, and the given
// per-topic config overrides (validated by the caller). It returns the topic
// as created. A name that exists gives ErrTopicExists.
func (n *Node) CreateTopic(ctx context.Context, name string, partitions int32, replicationFactor int, config map[string]string) (*TopicInfo, error) {
	return n.createTopic(ctx, name, newTopicID(), partitions, replicationFactor, config)
}

// RestoreTopic creates a topic under an id it had before: a topic brought
// back from the cold tier keeps the id its objects are stored under. Its
// partitions start in leader epoch firstEpoch: above every epoch its
// manifests were written in, or their first leader would take them for a
// successor's and stay fenced out of its own cold tier. An id already in
// use gives ErrTopicExists.
func (n *Node) RestoreTopic(ctx context.Context, name, id string, partitions int32, replicationFactor int, config map[string]string, firstEpoch int32) (*TopicInfo, error) {
	if err := validateTopicID(id); err != nil {
		return nil, err
	}
	if firstEpoch < 0 {
		return nil, fmt.Errorf("cluster: restore %q: first leader epoch %d is negative", name, firstEpoch)
	}
	return n.createTopicAt(ctx, name, id, partitions, replicationFactor, config, firstEpoch)
}

func (n *Node) createTopic(ctx context.Context, name, id string, partitions int32, replicationFactor int, config map[string]string) (*TopicInfo, error) {
	return n.createTopicAt(ctx, name, id, partitions, replicationFactor, config, 0)
}

func (n *Node) createTopicAt(ctx context.Context, name, id string, partitions int32, replicationFactor int, config map[string]string, firstEpoch int32) (*TopicInfo, error) {
	if err := ValidateTopicName(name); err != nil {
		return nil, err
	}
	if err := validatePartitionCount(int(partitions)); err != nil {
		return nil, err
	}
	if replicationFactor < 1 {
		return nil, errorf(ErrInvalidReplicationFactor, "%d: must be at least 1", replicationFactor)
	}
	if err := validateConfigChange(config, nil); err != nil {
		return nil, err
	}
	if err := n.syncLeader(ctx); err != nil {
		return nil, err
	}
	md := n.Metadata()
	if _, ok := md.Topic(name); ok {
		return nil, errorf(ErrTopicExists, "%q", name)
	}
	brokers := md.BrokerIDs()
	if replicationFactor > len(brokers) {
		return nil, errorf(ErrNotEnoughBrokers, "replication factor %d needs %d brokers, %d registered",
			replicationFactor, replicationFactor, len(brokers))
	}
	assigned := assignReplicas(brokers, partitions, replicationFactor, assignmentStart(md, len(brokers)))
	for i := range assigned {
		assigned[i].LeaderEpoch = firstEpoch
	}
	resp, err := n.propose(ctx, &createTopicCmd{Topic: TopicInfo{
		Name:        name,
		ID:          id,
		Config:      config, // encoded at once, so sharing the caller's map is safe
		Partitions:  assigned,
		CreatedAtMs: time.Now().UnixMilli(),
	}})
	if err != nil {
		return nil, err
	}
	return resp.topic, nil
}

// DeleteTopic deletes a topic and every consumer offset committed for it. A
// missing topic gives ErrTopicNotFound.
func (n *Node) DeleteTopic(ctx context.Context, name string) error {
	if err := ValidateTopicName(name); err != nil {
		return err
	}
	if err := n.syncLeader(ctx); err != nil {
		return err
	}
	t, ok := n.Metadata().Topic(name)
	if !ok {
		return errorf(ErrTopicNotFound, "%q", name)
	}
	// The id pins the delete to the topic seen here, not one recreated
	// under the same name before the command applies.
	_, err := n.propose(ctx, &deleteTopicCmd{Name: name, ID: t.ID})
	return err
}

// AlterTopicConfig changes a topic's overrides: it removes the keys in del,
// then sets those in set (a key may not be in both). It returns the topic
// with its new override map.
func (n *Node) AlterTopicConfig(ctx context.Context, name string, set map[string]string, del []string) (*TopicInfo, error) {
	if err := ValidateTopicName(name); err != nil {
		return nil, err
	}
	if err := validateConfigChange(set, del); err != nil {
		return nil, err
	}
	if err := n.syncLeader(ctx); err != nil {
		return nil, err
	}
	if _, ok := n.Metadata().Topic(name); !ok {
		return nil, errorf(ErrTopicNotFound, "%q", name)
	}
	resp, err := n.propose(ctx, &alterTopicConfigCmd{Name: name, Set: set, Delete: slices.Clone(del)})
	if err != nil {
		return nil, err
	}
	return resp.topic, nil
}

// AddPartitions raises a topic's partition count to count, placing the new
// partitions as CreateTopic would (PlanPartitions) or, when assignment is
// given, on the replicas it lists for each new partition in turn. Existing
// partitions are untouched. A count not above the current one is
// ErrInvalidPartitions; a missing topic ErrTopicNotFound. It returns the
// topic with its new partitions.
func (n *Node) AddPartitions(ctx context.Context, name string, count int32, assignment [][]int32) (*TopicInfo, error) {
	if err := ValidateTopicName(name); err != nil {
		return nil, err
	}
	if err := validatePartitionCount(int(count)); err != nil {
		return nil, err
	}
	if err := n.syncLeader(ctx); err != nil {
		return nil, err
	}
	md := n.Metadata()
	t, ok := md.Topic(name)
	if !ok {
		return nil, errorf(ErrTopicNotFound, "%q", name)
	}
	parts, err := PlanPartitions(md, name, count, assignment)
	if err != nil {
		return nil, err
	}
	resp, err := n.propose(ctx, &addPartitionsCmd{Name: name, ID: t.ID, Partitions: parts})
	if err != nil {
		return nil, err
	}
	return resp.topic, nil
}

// CommitOffsets records a consumer group's positions, all or none: a
// partition that does not exist refuses the whole call (ErrTopicNotFound or
// ErrPartitionNotFound), and so does a group name ValidateGroupName refuses
// or, with WithMaxGroups, a new group beyond the bound (both match
// ErrInvalidOffsetCommit). Several entries for one partition: the last wins.
func (n *Node) CommitOffsets(ctx context.Context, group string, commits []OffsetCommitRequest, opts ...CommitOption) error {
	var o commitOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := ValidateGroupName(group); err != nil {
		return err
	}
	if err := validateOffsetCommit(group, commits); err != nil {
		return err
	}
	if len(commits) == 0 {
		return nil
	}
	if err := n.syncLeader(ctx); err != nil {
		return err
	}
	if o.maxGroups > 0 && !n.fsm.offsets.has(group) {
		if count := n.fsm.offsets.count(); count >= o.maxGroups {
			return &TooManyGroupsError{Group: group, Groups: count, Max: o.maxGroups}
		}
	}
	md := n.Metadata()
	c := &commitOffsetsCmd{Group: group, Commits: make([]offsetCommitEntry, len(commits)), CommittedAtMs: time.Now().UnixMilli()}
	for i, r := range commits {
		if _, err := lookupPartition(md, r.Topic, r.Partition); err != nil {
			return err
		}
		c.Commits[i] = offsetCommitEntry{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Metadata: r.Metadata}
	}
	_, err := n.propose(ctx, c)
	return err
}

// DeleteGroup removes a consumer group's committed offsets
// (ErrGroupNotFound when it has none). Its members, if any, are the
// coordinator's business: this only forgets the positions.
func (n *Node) DeleteGroup(ctx context.Context, group string) error {
	if err := ValidateGroupName(group); err != nil {
		return err
	}
	if err := n.syncLeader(ctx); err != nil {
		return err
	}
	_, err := n.propose(ctx, &deleteGroupCmd{Group: group})
	return err
}

// DeleteOffsets removes a consumer group's committed offsets of the
// partitions named (ErrGroupNotFound when it has none at all); the group
// goes once it has none left. Every voter must know the deleteOffsets
// command (a build with it) before this is called: an older one would
// refuse the entry and keep the offsets.
func (n *Node) DeleteOffsets(ctx context.Context, group string, partitions []TopicPartition) error {
	if err := ValidateGroupName(group); err != nil {
		return err
	}
	if len(partitions) == 0 {
		return nil
	}
	if err := n.syncLeader(ctx); err != nil {
		return err
	}
	c := &deleteOffsetsCmd{Group: group, Partitions: make([]offsetPartitionRef, len(partitions))}
	for i, tp := range partitions {
		c.Partitions[i] = offsetPartitionRef{Topic: tp.Topic, Partition: tp.Partition}
	}
	_, err := n.propose(ctx, c)
	return err
}

// SaveGroupMembership writes a consumer group's whole membership, replacing
// the one written before; nil removes it (the group has no members). Only
// the group coordinator on the controller calls it, before it answers a
// member with anything the membership records, so that a new controller
// resumes the group from it. A membership that breaks a rule
// (validateGroupMembership) is refused with ErrInvalidGroupState before it
// enters Raft.
//
// term is the term the coordinator was started in (ControllerTerm): the
// write applies only in a log entry of that term.
func (n *Node) SaveGroupMembership(ctx context.Context, term uint64, group string, m *GroupMembership) error {
	c := &saveGroupCmd{Term: term, Group: group, Membership: m}
	if err := n.dryRun(c); err != nil {
		return err
	}
	if err := n.syncLeader(ctx); err != nil {
		return err
	}
	_, err := n.propose(ctx, c)
	return err
}

// GroupMemberships returns every consumer group's membership as last
// written; the map is the caller's, its values shared and read-only.
func (n *Node) GroupMemberships() map[string]*GroupMembership {
	m := n.fsm.memberships.all()
	if m == nil {
		m = map[string]*GroupMembership{}
	}
	return m
}

// VerifyController returns, like ControllerTerm, the term this node leads
// the metadata group in, but only after a barrier entry of that term has
// committed and every entry before it is applied here. A leader that was
// paused or cut off may still believe it leads while another has been
// elected and committed more; ControllerTerm alone would let it answer
// from its stale state. A deposed leader cannot commit an entry, so this
// fails on it (a *NotControllerError, which callers forward) and on the
// controller it returns with the local state at least as new as anything
// committed before the call. Reads that must not go back in time (a
// group's committed offsets, its members) call it before answering. It
// costs one Raft round trip.
func (n *Node) VerifyController(ctx context.Context) (uint64, error) {
	term, err := n.ControllerTerm(ctx)
	if err != nil {
		return 0, err
	}
	timeout, err := applyTimeout(ctx)
	if err != nil {
		return 0, err
	}
	if err := n.await(ctx, n.raft.Barrier(timeout)); err != nil {
		if errors.Is(err, ErrOutcomeUnknown) && n.raft.State() != raft.Leader {
			return 0, n.notController() // deposed: nothing was written, a read can go elsewhere
		}
		return 0, err
	}
	if n.raft.CurrentTerm() != term || n.raft.State() != raft.Leader {
		return 0, n.notController()
	}
	return term, nil
}

// ControllerTerm returns the Raft term this node leads the metadata group
// in, once it has caught up with what earlier leaders committed; a node
// that is not the controller returns a *NotControllerError. Group
// coordination keys its in-memory state on the term, so a node that loses
// and wins back the lead starts afresh.
func (n *Node) ControllerTerm(ctx context.Context) (uint64, error) {
	if err := n.syncLeader(ctx); err != nil {
		return 0, err
	}
	return n.raft.CurrentTerm(), nil
}

// ChangeLeader makes newLeader, which must be in the ISR, the leader of a
// partition and bumps its leader epoch by one; NoLeader marks the partition
// offline (still bumping the epoch, which fences the old leader).
// expectedEpoch must be the partition's current epoch, so that of two
// decisions made from the same state only the first takes effect
// (ErrStaleEpoch). It returns the partition after the change.
func (n *Node) ChangeLeader(ctx context.Context, topic string, partition int32, newLeader int32, expectedEpoch int32) (PartitionInfo, error) {
	if err := n.syncLeader(ctx); err != nil {
		return PartitionInfo{}, err
	}
	c := &changeLeaderCmd{Topic: topic, Partition: partition, NewLeader: newLeader, ExpectedEpoch: expectedEpoch}
	if err := n.dryRun(c); err != nil {
		return PartitionInfo{}, err
	}
	resp, err := n.propose(ctx, c)
	if err != nil {
		return PartitionInfo{}, err
	}
	return resp.partition, nil
}

// ChangeISR replaces a partition's ISR; this is how a leader shrinks it when
// a follower lags and expands it when the follower catches up, and how the
// controller removes brokers that are gone. leaderEpoch and partitionEpoch
// must be the current ones, those of the state the change was computed
// from (ErrStaleEpoch otherwise: a deposed leader cannot change the ISR,
// and of two changes decided from the same state only the first applies),
// the ISR must be non-empty replicas (ErrInvalidISR) and keep the leader
// (ErrNotInISR). It returns the partition after the change, its ISR in
// replica order.
func (n *Node) ChangeISR(ctx context.Context, topic string, partition int32, isr []int32, leaderEpoch, partitionEpoch int32) (PartitionInfo, error) {
	if err := n.syncLeader(ctx); err != nil {
		return PartitionInfo{}, err
	}
	c := &changeISRCmd{Topic: topic, Partition: partition, ISR: slices.Clone(isr), LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch}
	if err := n.dryRun(c); err != nil {
		return PartitionInfo{}, err
	}
	resp, err := n.propose(ctx, c)
	if err != nil {
		return PartitionInfo{}, err
	}
	return resp.partition, nil
}

// AllocateProducerID hands out a producer id for an idempotent producer:
// unique in the cluster, and larger than every id handed out before it
// (from FirstProducerID on), snapshots and restarts included. An answer
// lost to a timeout or a change of controller (ErrOutcomeUnknown) may have
// used up an id; the next call returns a later one.
func (n *Node) AllocateProducerID(ctx context.Context) (int64, error) {
	if err := n.syncLeader(ctx); err != nil {
		return 0, err
	}
	resp, err := n.propose(ctx, &allocateProducerIDCmd{})
	if err != nil {
		return 0, err
	}
	return resp.producerID, nil
}

// ReserveProducerIDs makes sure no producer id up to and including above is
// ever handed out: a topic restored from the bucket remembers producers by
// ids that another cluster (or this one before it lost its metadata) handed
// out, and a new producer given one of them could have its first batch
// taken for a resend of theirs.
func (n *Node) ReserveProducerIDs(ctx context.Context, above int64) error {
	if err := n.syncLeader(ctx); err != nil {
		return err
	}
	_, err := n.propose(ctx, &reserveProducerIDsCmd{Above: above})
	return err
}

// AddACLs stores ACLs, after those already stored, in the order given. An
// ACL that is stored already is skipped, so a call retried after a lost
// answer is harmless. All are stored or none: an ACL that
// security.ACL.Validate refuses gives ErrInvalidACL, and more than MaxACLs
// stored in all gives ErrTooManyACLs.
func (n *Node) AddACLs(ctx context.Context, acls []security.ACL) error {
	if err := validateACLs(acls); err != nil {
		return err
	}
	if len(acls) == 0 {
		return nil
	}
	if err := n.syncLeader(ctx); err != nil {
		return err
	}
	c := &addACLsCmd{ACLs: aclEntries(acls)}
	if err := n.dryRun(c); err != nil {
		return err
	}
	_, err := n.propose(ctx, c)
	return err
}

// RemoveACLs removes the stored ACLs equal to those given and returns how
// many it removed. One that is not stored is skipped, not an error: after a
// retry the count may be lower than what the first attempt removed. An
// invalid ACL refuses the call (ErrInvalidACL) and removes nothing.
func (n *Node) RemoveACLs(ctx context.Context, acls []security.ACL) (int, error) {
	if err := validateACLs(acls); err != nil {
		return 0, err
	}
	if len(acls) == 0 {
		return 0, nil
	}
	if err := n.syncLeader(ctx); err != nil {
		return 0, err
	}
	// No dry run: validateACLs checked all the command's rules, and the
	// state cannot refuse a removal.
	resp, err := n.propose(ctx, &removeACLsCmd{ACLs: aclEntries(acls)})
	if err != nil {
		return 0, err
	}
	return resp.removed, nil
}

// dryRun runs a command's transition against the local state without
// applying it, so that a request the state machine would refuse (a stale
// epoch, most often: a deposed leader retrying) is answered without a trip
// through Raft. Transitions are pure, so this is safe; only commands whose
// transition does not read the offset table may use it, since that table is
// the FSM goroutine's to read without a lock.
func (n *Node) dryRun(c command) error {
	_, err := transition(n.Metadata(), nil, 0, c)
	return err
}
