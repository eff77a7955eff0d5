package cluster

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/strata-log/strata/security"
)

// This file holds the state transition of every command: a pure function
// from the current state and a command to a change or a refusal. It never
// modifies what it is given, so a refused command leaves nothing behind and
// a Metadata handed out earlier stays as it was (copy-on-write: the new
// state shares every topic and map that did not change).
//
// Everything here must be deterministic: the same state and command give the
// same result on every broker. No clock, no randomness, no map iteration
// order leaking into results.

// change is what one accepted command does to the state.
type change struct {
	// meta is the next brokers and topics, or nil if they do not change.
	// The FSM stamps its Version.
	meta *Metadata
	// offsets are the groups to replace; an empty map removes the group.
	offsets map[string]groupOffsets
	// topic and partition are the response to the proposer.
	topic     *TopicInfo
	partition PartitionInfo
	// producerID is the producer id handed out (the counter moves past
	// it), or 0 for commands that hand out none.
	producerID int64
	// removed is how many ACLs a removeACLs command removed.
	removed int
	// memberships are the group memberships to replace; nil removes one.
	memberships map[string]*GroupMembership
	// scram is a SCRAM credential to set or delete (scram.go).
	scram *scramChange
	// one says meta differs from the state before only in partition
	// (a leader or ISR change), aclsOnly only in its ACLs; otherwise a
	// change of meta may be any (the change log, changes.go).
	one      bool
	aclsOnly bool
}

// transition validates c against the state and computes its change.
// offsets is the FSM's current table, read-only; nextProducerID is its
// producer id counter.
func transition(cur *Metadata, offsets map[string]groupOffsets, nextProducerID int64, c command) (change, error) {
	switch c := c.(type) {
	case *registerBrokerCmd:
		return applyRegisterBroker(cur, c)
	case *createTopicCmd:
		return applyCreateTopic(cur, c)
	case *deleteTopicCmd:
		return applyDeleteTopic(cur, offsets, c)
	case *alterTopicConfigCmd:
		return applyAlterTopicConfig(cur, c)
	case *addPartitionsCmd:
		return applyAddPartitions(cur, c)
	case *commitOffsetsCmd:
		return applyCommitOffsets(cur, offsets, c)
	case *deleteGroupCmd:
		if _, ok := offsets[c.Group]; !ok {
			return change{}, errorf(ErrGroupNotFound, "group %q has no committed offsets", c.Group)
		}
		return change{offsets: map[string]groupOffsets{c.Group: nil}}, nil
	case *deleteOffsetsCmd:
		return applyDeleteOffsets(offsets, c)
	case *changeLeaderCmd:
		return applyChangeLeader(cur, c)
	case *changeISRCmd:
		return applyChangeISR(cur, c)
	case *allocateProducerIDCmd:
		// The counter is an int64 from FirstProducerID: it does not run out.
		return change{producerID: nextProducerID}, nil
	case *reserveProducerIDsCmd:
		if c.Above < nextProducerID {
			return change{}, nil // past it already
		}
		if c.Above == math.MaxInt64 {
			return change{}, errorf(ErrInvalidCommand, "producer id %d leaves none to hand out", c.Above)
		}
		// The counter moves as if Above had been handed out.
		return change{producerID: c.Above}, nil
	case *saveGroupCmd:
		if c.Membership != nil {
			if err := validateGroupMembership(c.Group, c.Membership); err != nil {
				return change{}, err
			}
		} else if err := ValidateGroupName(c.Group); err != nil {
			return change{}, errorf(ErrInvalidGroupState, "%v", err)
		}
		// The command is the group's whole membership: it replaces the
		// previous one, which it does not read.
		return change{memberships: map[string]*GroupMembership{c.Group: c.Membership}}, nil
	case *addACLsCmd:
		return applyAddACLs(cur, c)
	case *removeACLsCmd:
		return applyRemoveACLs(cur, c)
	case *setSCRAMCmd:
		return applySetSCRAM(c)
	case *deleteSCRAMCmd:
		return applyDeleteSCRAM(c)
	}
	return change{}, errorf(ErrInvalidCommand, "no transition for %T", c)
}

func applyRegisterBroker(cur *Metadata, c *registerBrokerCmd) (change, error) {
	if err := validateBroker(c.Broker); err != nil {
		return change{}, err
	}
	brokers := maps.Clone(cur.Brokers)
	brokers[c.Broker.ID] = c.Broker
	return change{meta: &Metadata{Brokers: brokers, Topics: cur.Topics, acls: cur.acls}}, nil
}

func applyCreateTopic(cur *Metadata, c *createTopicCmd) (change, error) {
	t := c.Topic
	if err := ValidateTopicName(t.Name); err != nil {
		return change{}, err
	}
	if err := validateTopicID(t.ID); err != nil {
		return change{}, err
	}
	if _, ok := cur.Topics[t.Name]; ok {
		return change{}, errorf(ErrTopicExists, "%q", t.Name)
	}
	for _, other := range cur.Topics {
		if other.ID == t.ID {
			return change{}, errorf(ErrTopicExists, "topic id %s is taken by %q", t.ID, other.Name)
		}
	}
	if err := validateConfigChange(t.Config, nil); err != nil {
		return change{}, err
	}
	if err := validateAssignment(t.Name, t.Partitions, cur.Brokers); err != nil {
		return change{}, err
	}
	if t.Config == nil {
		t.Config = map[string]string{}
	}
	for i := range t.Partitions {
		t.Partitions[i].ISR = inReplicaOrder(t.Partitions[i].Replicas, t.Partitions[i].ISR)
	}
	return change{meta: withTopic(cur, &t), topic: &t}, nil
}

func applyDeleteTopic(cur *Metadata, offsets map[string]groupOffsets, c *deleteTopicCmd) (change, error) {
	t, ok := cur.Topics[c.Name]
	if !ok {
		return change{}, errorf(ErrTopicNotFound, "%q", c.Name)
	}
	if c.ID != "" && c.ID != t.ID {
		return change{}, errorf(ErrTopicNotFound, "%q with id %s (the topic now has id %s)", c.Name, c.ID, t.ID)
	}
	topics := maps.Clone(cur.Topics)
	delete(topics, c.Name)

	// The offsets go with the topic: a topic created later under the same
	// name must not inherit positions in a log that no longer exists.
	var changed map[string]groupOffsets
	for g, offs := range offsets {
		var kept groupOffsets
		for tp := range offs {
			if tp.Topic == c.Name {
				kept = maps.Clone(offs)
				break
			}
		}
		if kept == nil {
			continue
		}
		maps.DeleteFunc(kept, func(tp TopicPartition, _ OffsetCommit) bool { return tp.Topic == c.Name })
		if changed == nil {
			changed = make(map[string]groupOffsets)
		}
		changed[g] = kept
	}
	return change{meta: &Metadata{Brokers: cur.Brokers, Topics: topics, acls: cur.acls}, offsets: changed, topic: t}, nil
}

func applyAlterTopicConfig(cur *Metadata, c *alterTopicConfigCmd) (change, error) {
	t, ok := cur.Topics[c.Name]
	if !ok {
		return change{}, errorf(ErrTopicNotFound, "%q", c.Name)
	}
	if err := validateConfigChange(c.Set, c.Delete); err != nil {
		return change{}, err
	}
	cfg := maps.Clone(t.Config)
	if cfg == nil {
		cfg = map[string]string{}
	}
	for _, k := range c.Delete {
		delete(cfg, k)
	}
	maps.Copy(cfg, c.Set)
	nt := *t
	nt.Config = cfg
	return change{meta: withTopic(cur, &nt), topic: &nt}, nil
}

func applyAddPartitions(cur *Metadata, c *addPartitionsCmd) (change, error) {
	t, ok := cur.Topics[c.Name]
	if !ok {
		return change{}, errorf(ErrTopicNotFound, "%q", c.Name)
	}
	if c.ID != t.ID {
		return change{}, errorf(ErrTopicNotFound, "%q with id %s (the topic now has id %s)", c.Name, c.ID, t.ID)
	}
	have := len(t.Partitions)
	if len(c.Partitions) == 0 {
		return change{}, errorf(ErrInvalidPartitions, "%q: no partitions to add (it has %d)", c.Name, have)
	}
	if first := c.Partitions[0].Partition; first != int32(have) {
		// Another increase was applied since this one was planned.
		return change{}, errorf(ErrInvalidPartitions, "%q has %d partitions now; the increase was planned from %d", c.Name, have, first)
	}
	if have+len(c.Partitions) > MaxPartitions {
		return change{}, errorf(ErrInvalidPartitions, "%q: %d partitions: want at most %d", c.Name, have+len(c.Partitions), MaxPartitions)
	}
	if err := validatePartitions(c.Name, c.Partitions, int32(have), cur.Brokers); err != nil {
		return change{}, err
	}
	// Every partition of a topic has as many replicas as its first: the
	// topic's replication factor is one number.
	rf := len(t.Partitions[0].Replicas)
	for _, p := range c.Partitions {
		if len(p.Replicas) != rf {
			return change{}, errorf(ErrInvalidAssignment, "%s/%d: %d replicas, but the topic's replication factor is %d", c.Name, p.Partition, len(p.Replicas), rf)
		}
	}
	nt := *t
	nt.Partitions = make([]PartitionInfo, 0, have+len(c.Partitions))
	nt.Partitions = append(nt.Partitions, t.Partitions...)
	for _, p := range c.Partitions {
		p.ISR = inReplicaOrder(p.Replicas, p.ISR)
		nt.Partitions = append(nt.Partitions, p)
	}
	return change{meta: withTopic(cur, &nt), topic: &nt}, nil
}

func applyCommitOffsets(cur *Metadata, offsets map[string]groupOffsets, c *commitOffsetsCmd) (change, error) {
	reqs := make([]OffsetCommitRequest, len(c.Commits))
	for i, e := range c.Commits {
		reqs[i] = OffsetCommitRequest{Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Metadata: e.Metadata}
	}
	if err := validateOffsetCommit(c.Group, reqs); err != nil {
		return change{}, err
	}
	for _, r := range reqs {
		if _, err := lookupPartition(cur, r.Topic, r.Partition); err != nil {
			return change{}, err
		}
	}
	g := maps.Clone(offsets[c.Group])
	if g == nil {
		g = make(groupOffsets, len(reqs))
	}
	// Entries for the same partition: the last one wins, as it would had
	// they come in separate commands.
	for _, r := range reqs {
		g[TopicPartition{r.Topic, r.Partition}] = OffsetCommit{Offset: r.Offset, Metadata: r.Metadata, CommittedAtMs: c.CommittedAtMs}
	}
	return change{offsets: map[string]groupOffsets{c.Group: g}}, nil
}

func applyDeleteOffsets(offsets map[string]groupOffsets, c *deleteOffsetsCmd) (change, error) {
	cur, ok := offsets[c.Group]
	if !ok {
		return change{}, errorf(ErrGroupNotFound, "group %q has no committed offsets", c.Group)
	}
	if len(c.Partitions) > MaxGroupPartitions {
		return change{}, errorf(ErrInvalidOffsetCommit, "an offset delete names %d partitions; at most %d", len(c.Partitions), MaxGroupPartitions)
	}
	g := maps.Clone(cur)
	for _, tp := range c.Partitions {
		delete(g, TopicPartition{tp.Topic, tp.Partition})
	}
	return change{offsets: map[string]groupOffsets{c.Group: g}}, nil // empty: the group goes
}

func applyChangeLeader(cur *Metadata, c *changeLeaderCmd) (change, error) {
	t, err := lookupTopic(cur, c.Topic)
	if err != nil {
		return change{}, err
	}
	p, err := lookupPartition(cur, c.Topic, c.Partition)
	if err != nil {
		return change{}, err
	}
	if p, err = ChangeLeaderOf(p, c.Topic, c.NewLeader, c.ExpectedEpoch); err != nil {
		return change{}, err
	}
	nt := withPartition(t, p)
	return change{meta: withTopic(cur, nt), topic: nt, partition: p, one: true}, nil
}

// ChangeLeaderOf is the leader change the state machine applies to one
// partition: newLeader (an ISR member, or NoLeader to mark the partition
// offline) leads from the next leader epoch, if expectedEpoch is still the
// current one. Both epochs grow by one. It is exported so that a model of
// the controller applies exactly the rules the cluster does.
func ChangeLeaderOf(p PartitionInfo, topic string, newLeader, expectedEpoch int32) (PartitionInfo, error) {
	if expectedEpoch != p.LeaderEpoch {
		return p, errorf(ErrStaleEpoch, "%s/%d: expected epoch %d, current epoch is %d", topic, p.Partition, expectedEpoch, p.LeaderEpoch)
	}
	// NoLeader is allowed: it is how the controller marks a partition
	// offline when no ISR member is left, and it still bumps the epoch so the
	// old leader is fenced.
	if newLeader != NoLeader && !p.InISR(newLeader) {
		return p, errorf(ErrNotInISR, "%s/%d: new leader %d is not in the ISR %v", topic, p.Partition, newLeader, p.ISR)
	}
	if p.LeaderEpoch == math.MaxInt32 || p.PartitionEpoch == math.MaxInt32 {
		return p, errorf(ErrStaleEpoch, "%s/%d: leader epoch exhausted", topic, p.Partition)
	}
	p.Leader = newLeader
	p.LeaderEpoch++
	p.PartitionEpoch++
	return p, nil
}

func applyChangeISR(cur *Metadata, c *changeISRCmd) (change, error) {
	t, err := lookupTopic(cur, c.Topic)
	if err != nil {
		return change{}, err
	}
	p, err := lookupPartition(cur, c.Topic, c.Partition)
	if err != nil {
		return change{}, err
	}
	partitionEpoch := c.PartitionEpoch
	if c.V < 2 {
		partitionEpoch = p.PartitionEpoch // a v1 command predates partition epochs
	}
	if p, err = ChangeISROf(p, c.Topic, c.ISR, c.LeaderEpoch, partitionEpoch); err != nil {
		return change{}, err
	}
	nt := withPartition(t, p)
	return change{meta: withTopic(cur, nt), topic: nt, partition: p, one: true}, nil
}

// ChangeISROf is the ISR change the state machine applies to one
// partition: isr replaces the ISR if leaderEpoch and partitionEpoch are
// still the current ones (a compare-and-set: of two changes computed from
// the same state, only the first applies), its members are replicas and it
// keeps the leader. The partition epoch grows by one. Exported for models of
// the controller, like ChangeLeaderOf.
func ChangeISROf(p PartitionInfo, topic string, isr []int32, leaderEpoch, partitionEpoch int32) (PartitionInfo, error) {
	if leaderEpoch != p.LeaderEpoch {
		return p, errorf(ErrStaleEpoch, "%s/%d: request carries epoch %d, current epoch is %d", topic, p.Partition, leaderEpoch, p.LeaderEpoch)
	}
	if partitionEpoch != p.PartitionEpoch {
		return p, errorf(ErrStaleEpoch, "%s/%d: the change was computed from partition epoch %d, the current one is %d (the ISR changed meanwhile)", topic, p.Partition, partitionEpoch, p.PartitionEpoch)
	}
	if err := validateISR(fmt.Sprintf("%s/%d", topic, p.Partition), p.Replicas, isr); err != nil {
		return p, err
	}
	if p.Leader == NoLeader {
		return p, errorf(ErrNotInISR, "%s/%d: partition has no leader", topic, p.Partition)
	}
	if !slices.Contains(isr, p.Leader) {
		return p, errorf(ErrNotInISR, "%s/%d: new ISR %v drops the leader %d", topic, p.Partition, isr, p.Leader)
	}
	if p.PartitionEpoch == math.MaxInt32 {
		return p, errorf(ErrStaleEpoch, "%s/%d: partition epoch exhausted", topic, p.Partition)
	}
	p.ISR = inReplicaOrder(p.Replicas, isr)
	p.PartitionEpoch++
	return p, nil
}

func applyAddACLs(cur *Metadata, c *addACLsCmd) (change, error) {
	add, err := commandACLs(c.ACLs)
	if err != nil {
		return change{}, err
	}
	stored := aclSet(cur.acls)
	var next []security.ACL
	for _, a := range add {
		if _, dup := stored[a]; dup {
			continue
		}
		if next == nil {
			// Copy-on-write: the current slice may be held by readers.
			next = slices.Clone(cur.acls)
		}
		next = append(next, a)
		stored[a] = struct{}{}
	}
	if next == nil {
		return change{}, nil // every one is stored already
	}
	if len(next) > MaxACLs {
		return change{}, errorf(ErrTooManyACLs, "%d ACLs are stored and %d of these are new, which would make %d; at most %d (MaxACLs) are allowed",
			len(cur.acls), len(next)-len(cur.acls), len(next), MaxACLs)
	}
	return change{meta: withACLs(cur, next), aclsOnly: true}, nil
}

func applyRemoveACLs(cur *Metadata, c *removeACLsCmd) (change, error) {
	drop, err := commandACLs(c.ACLs)
	if err != nil {
		return change{}, err
	}
	set := aclSet(drop)
	next := slices.DeleteFunc(slices.Clone(cur.acls), func(a security.ACL) bool {
		_, ok := set[a]
		return ok
	})
	removed := len(cur.acls) - len(next)
	if removed == 0 {
		return change{}, nil // none of them is stored
	}
	return change{meta: withACLs(cur, next), removed: removed, aclsOnly: true}, nil
}

// commandACLs decodes and validates the ACLs a command carries.
func commandACLs(entries []aclEntry) ([]security.ACL, error) {
	acls := make([]security.ACL, len(entries))
	for i, e := range entries {
		acls[i] = e.acl()
	}
	if err := validateACLs(acls); err != nil {
		return nil, err
	}
	return acls, nil
}

func aclSet(acls []security.ACL) map[security.ACL]struct{} {
	set := make(map[security.ACL]struct{}, len(acls))
	for _, a := range acls {
		set[a] = struct{}{}
	}
	return set
}

// withACLs returns a new Metadata with acls in place of the stored ACLs. An
// empty list is stored as nil, so that a state whose ACLs were all removed
// equals one that never had any (and a snapshot restores it as such).
func withACLs(cur *Metadata, acls []security.ACL) *Metadata {
	if len(acls) == 0 {
		acls = nil
	}
	return &Metadata{Brokers: cur.Brokers, Topics: cur.Topics, acls: acls}
}

func lookupTopic(m *Metadata, name string) (*TopicInfo, error) {
	t, ok := m.Topics[name]
	if !ok {
		return nil, errorf(ErrTopicNotFound, "%q", name)
	}
	return t, nil
}

func lookupPartition(m *Metadata, topic string, partition int32) (PartitionInfo, error) {
	t, err := lookupTopic(m, topic)
	if err != nil {
		return PartitionInfo{}, err
	}
	p, ok := t.Partition(partition)
	if !ok {
		return PartitionInfo{}, errorf(ErrPartitionNotFound, "%s/%d (the topic has %d partitions)", topic, partition, len(t.Partitions))
	}
	return p, nil
}

// withTopic returns a new Metadata with t in place of the topic of its name.
func withTopic(cur *Metadata, t *TopicInfo) *Metadata {
	topics := maps.Clone(cur.Topics)
	topics[t.Name] = t
	return &Metadata{Brokers: cur.Brokers, Topics: topics, acls: cur.acls}
}

// withPartition returns a copy of t with p in place of its partition.
func withPartition(t *TopicInfo, p PartitionInfo) *TopicInfo {
	nt := *t
	nt.Partitions = slices.Clone(t.Partitions)
	nt.Partitions[p.Partition] = p
	return &nt
}

// inReplicaOrder returns the members of isr ordered as they appear in
// replicas, so that two ISRs with the same members compare equal however the
// proposer listed them.
func inReplicaOrder(replicas, isr []int32) []int32 {
	out := make([]int32, 0, len(isr))
	for _, id := range replicas {
		if slices.Contains(isr, id) {
			out = append(out, id)
		}
	}
	return out
}
