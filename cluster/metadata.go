package cluster

import (
	"slices"
	"sort"
	"strconv"

	"github.com/strata-log/strata/security"
)

// NoLeader is the Leader of a partition that has none (every ISR member is
// gone and unclean election is off).
const NoLeader int32 = -1

// FirstProducerID is the first producer id Node.AllocateProducerID hands
// out; ids grow from there. Ids below it are never handed out, so they can
// never be mistaken for an allocated one.
const FirstProducerID int64 = 1000

// The JSON tags on the types below are the encoding of commands in the Raft
// log and of snapshots on disk: renaming a tag is a format change.

// BrokerInfo is what the cluster knows about one broker.
type BrokerInfo struct {
	// ID is the broker id, unique in the cluster, >= 0.
	ID int32 `json:"id"`
	// Addr is the advertised gRPC address, host:port.
	Addr string `json:"addr"`
	// RaftAddr is the broker's Raft address, host:port, or empty.
	RaftAddr string `json:"raftAddr,omitempty"`
	// Rack is the broker's rack or zone, or empty.
	Rack string `json:"rack,omitempty"`
	// KafkaAddr is the address Kafka clients are told for the broker
	// (kafka.advertise, or kafka.listen), host:port; empty when it opens
	// no Kafka listener.
	KafkaAddr string `json:"kafkaAddr,omitempty"`
}

// TopicInfo describes one topic. Values handed out by Metadata are shared
// and read-only: neither the cluster package nor its callers change them.
type TopicInfo struct {
	// Name is the topic name.
	Name string `json:"name"`
	// ID is 32 lowercase hex characters chosen at random when the topic is
	// created, so a topic deleted and created again under the same name is a
	// different topic (stale requests and cold-tier objects can tell).
	ID string `json:"id"`
	// Config holds the per-topic overrides only, as canonical key=value
	// strings validated by the caller; never nil.
	Config map[string]string `json:"config"`
	// Partitions are indexed by partition number: Partitions[i].Partition == i.
	Partitions []PartitionInfo `json:"partitions"`
	// CreatedAtMs is the proposer's wall clock at creation, Unix milliseconds.
	CreatedAtMs int64 `json:"createdAtMs"`
}

// Partition returns partition p of the topic.
func (t *TopicInfo) Partition(p int32) (PartitionInfo, bool) {
	if p < 0 || int(p) >= len(t.Partitions) {
		return PartitionInfo{}, false
	}
	return t.Partitions[p], true
}

// PartitionInfo is the replica assignment and leadership of one partition.
// Its slices are shared and read-only.
type PartitionInfo struct {
	// Partition is the partition number, 0-based.
	Partition int32 `json:"partition"`
	// Replicas are the brokers holding the partition; the first is the
	// preferred leader.
	Replicas []int32 `json:"replicas"`
	// ISR are the in-sync replicas, a subset of Replicas in replica order.
	ISR []int32 `json:"isr"`
	// Leader is the leading broker, or NoLeader.
	Leader int32 `json:"leader"`
	// LeaderEpoch grows by one on every leadership change.
	LeaderEpoch int32 `json:"leaderEpoch"`
	// PartitionEpoch grows by one on every change of the leader or the ISR.
	// An ISR change names the partition epoch it was computed from and
	// applies only if it is still current, so two changes decided from the
	// same state never both take effect.
	PartitionEpoch int32 `json:"partitionEpoch"`
}

// InISR reports whether broker id is in the partition's ISR.
func (p PartitionInfo) InISR(id int32) bool { return slices.Contains(p.ISR, id) }

// TopicPartition names one partition of one topic. It is the one such
// type of the broker's packages: group and broker name it under their own
// package (type aliases), so a partition key passes between them as is.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String is the partition as topic/partition.
func (tp TopicPartition) String() string { return tp.Topic + "/" + strconv.Itoa(int(tp.Partition)) }

// OffsetCommit is a consumer group's committed position in one partition.
type OffsetCommit struct {
	// Offset is the next offset the group will consume.
	Offset int64
	// Metadata is an opaque string the consumer stored with the offset.
	Metadata string
	// CommittedAtMs is the proposer's wall clock at commit, Unix milliseconds.
	CommittedAtMs int64
}

// OffsetCommitRequest is one partition's entry in a CommitOffsets call.
type OffsetCommitRequest struct {
	Topic     string
	Partition int32
	Offset    int64
	Metadata  string
}

// aclEntry is a security.ACL as commands and snapshots encode it. The
// cluster owns this encoding rather than marshalling security.ACL itself, so
// that a field renamed in that package cannot change the Raft log format.
type aclEntry struct {
	Principal string `json:"principal"`
	Resource  string `json:"resource"`
	Name      string `json:"name,omitempty"`
	Prefix    bool   `json:"prefix,omitempty"`
	Op        string `json:"op"`
}

func aclEntries(acls []security.ACL) []aclEntry {
	out := make([]aclEntry, len(acls))
	for i, a := range acls {
		out[i] = aclEntry{Principal: a.Principal, Resource: string(a.Resource), Name: a.Name, Prefix: a.Prefix, Op: string(a.Op)}
	}
	return out
}

func (e aclEntry) acl() security.ACL {
	return security.ACL{Principal: e.Principal, Resource: security.ResourceType(e.Resource), Name: e.Name, Prefix: e.Prefix, Op: security.Operation(e.Op)}
}

// Metadata is an immutable snapshot of the cluster's brokers, topics and
// ACLs. Every applied change produces a new value that shares whatever did
// not change with the previous one, so holding on to a Metadata is cheap
// and it never changes under the holder. Callers must not modify it or
// anything reachable from it.
//
// Committed consumer offsets live beside it (Node.CommittedOffset) so that a
// reader of topics does not copy them around, but an offset commit is a
// change like any other: it bumps Version too.
type Metadata struct {
	// Version is the Raft index of the last command that changed the state
	// (brokers, topics, offsets or ACLs); 0 for the empty state. A refused
	// command does not bump it.
	Version uint64
	// Brokers by id.
	Brokers map[int32]BrokerInfo
	// Topics by name.
	Topics map[string]*TopicInfo
	// acls are the stored ACLs in the order they were added, free of
	// duplicates; nil when there are none. Unexported so that ACLs is the
	// one way to read them.
	acls []security.ACL
}

// emptyMetadata is the state of a cluster before its first command.
func emptyMetadata() *Metadata {
	return &Metadata{Brokers: map[int32]BrokerInfo{}, Topics: map[string]*TopicInfo{}}
}

// Topic returns the named topic.
func (m *Metadata) Topic(name string) (*TopicInfo, bool) {
	t, ok := m.Topics[name]
	return t, ok
}

// Partition returns partition p of the named topic.
func (m *Metadata) Partition(topic string, p int32) (PartitionInfo, bool) {
	t, ok := m.Topics[topic]
	if !ok {
		return PartitionInfo{}, false
	}
	return t.Partition(p)
}

// TopicNames returns the names of all topics, sorted.
func (m *Metadata) TopicNames() []string {
	names := make([]string, 0, len(m.Topics))
	for name := range m.Topics {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// ACLs returns the stored ACLs in the order they were added. The slice is
// shared and read-only, like everything Metadata hands out: authorization
// reads it on every request, so it is not copied. Its capacity is clipped,
// so a caller that appends to it gets a new array rather than writing into
// the shared one.
func (m *Metadata) ACLs() []security.ACL { return slices.Clip(m.acls) }

// Broker returns the registered broker with that id.
func (m *Metadata) Broker(id int32) (BrokerInfo, bool) {
	b, ok := m.Brokers[id]
	return b, ok
}

// BrokerIDs returns the ids of all registered brokers, sorted.
func (m *Metadata) BrokerIDs() []int32 {
	ids := make([]int32, 0, len(m.Brokers))
	for id := range m.Brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
