package broker

// readOnly is the role (role.go) of a read-only replica of a bucket another
// cluster writes (readreplica.go): every answer it gives that a member of
// the writing cluster gives differently is here or, for the larger ones
// (cluster, listTopics, describeTopic, clusterStatus, writeMetrics), in
// readreplica.go beside the catalog they read.

import (
	"context"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/security"
	"github.com/strata-log/strata/tiering"
)

// readOnly is a Broker in read-only replica mode with the catalog it
// serves from.
type readOnly struct {
	*Broker
	replica *readReplica
}

var _ role = readOnly{}

func (b readOnly) close() { b.replica.close() }

// Reads, from the bucket's heads.

func (b readOnly) fetch(ctx context.Context, req FetchRequest) (FetchResult, error) {
	return b.replica.fetch(ctx, req)
}

func (b readOnly) listOffsets(ctx context.Context, topic string, partition int32, q OffsetQuery) (OffsetAnswer, error) {
	return b.replica.listOffsets(ctx, topic, partition, q)
}

func (b readOnly) listSpecialOffset(_ context.Context, topic string, partition int32, _ SpecialOffset) (OffsetAnswer, error) {
	return OffsetAnswer{}, InvalidRequest("%s/%d: a read replica answers only earliest, latest and times", topic, partition)
}

func (b readOnly) knows(topic string) bool { return b.replica.knows(topic) }

// ready: Start read the bucket's catalog before it returned.
func (readOnly) ready(context.Context) error { return nil }

// liveBrokers is unknown: a read replica gossips with no one.
func (readOnly) liveBrokers() map[int32]bool { return nil }

// raftAddr: a read replica has no metadata transport.
func (readOnly) raftAddr() string { return "" }

// Leader epochs are not checked: a read replica has no leaders.
func (readOnly) checkLeaderEpoch(string, int32, int32) error { return nil }

func (readOnly) diverging(string, int32, int64, int32) (EpochEnd, bool, error) {
	return EpochEnd{}, false, nil
}

func (readOnly) epochAt(string, int32, int64) int32 { return -1 }

// ACLs, SCRAM credentials and committed offsets live in the writing
// cluster's metadata, which a read replica does not read: it has none of
// them, so only superusers and brokers pass its ACL checks, and a consumer
// group starts from its reset policy.

func (readOnly) acls(string) []security.ACL { return nil }

func (readOnly) aclsInForce() []security.ACL { return nil }

func (readOnly) scramCredential(string, string) (cluster.SCRAMCredential, bool) {
	return cluster.SCRAMCredential{}, false
}

func (readOnly) scramUsers() map[string][]string { return map[string][]string{} }

func (readOnly) fetchOffsets(context.Context, string, []TopicPartition) ([]CommittedOffset, error) {
	return nil, nil
}

func (readOnly) committedOffsets(string, []TopicPartition) []CommittedOffset { return nil }

// Writes, all refused with READ_REPLICA (errReadReplica).

func (readOnly) produce(context.Context, ProduceRequest) (ProduceResult, error) {
	return ProduceResult{}, errReadReplica("accept produce")
}

func (readOnly) initProducer(context.Context) (int64, int16, error) {
	return 0, 0, errReadReplica("assign producer ids")
}

func (readOnly) newTopic(string, int32, int32, map[string]string) (newTopic, error) {
	return newTopic{}, errReadReplica("create topics")
}

func (readOnly) planPartitions(string, int32, [][]int32) ([]cluster.PartitionInfo, error) {
	return nil, errReadReplica("add partitions")
}

func (readOnly) deleteTopic(context.Context, string) error {
	return errReadReplica("delete topics")
}

func (readOnly) restoreTopic(context.Context, string, string, int32) (TopicDescription, error) {
	return TopicDescription{}, errReadReplica("restore topics")
}

func (readOnly) restoreTopicCut(context.Context, string, string, int32, string, tiering.RestoreCut) (TopicDescription, error) {
	return TopicDescription{}, errReadReplica("restore topics")
}

func (readOnly) topicConfigChange(context.Context, string, map[string]string, []string) (map[string]string, error) {
	return nil, errReadReplica("alter topic settings")
}

func (readOnly) coordinator(context.Context) (*group.Coordinator, error) {
	return nil, errReadReplica("coordinate consumer groups (they live in the writing cluster)")
}

func (readOnly) commitOffsetsCall(context.Context, string, string, int32, []CommittedOffset) error {
	return errReadReplica("commit consumer offsets (they live in the writing cluster's metadata)")
}

func (readOnly) deleteOffsets(context.Context, string, []TopicPartition) ([]string, error) {
	return nil, errReadReplica("delete consumer offsets (they live in the writing cluster's metadata)")
}

func (readOnly) addACLs(context.Context, []security.ACL) error {
	return errReadReplica("change ACLs")
}

func (readOnly) removeACLs(context.Context, []security.ACL) (int, error) {
	return 0, errReadReplica("change ACLs")
}

func (readOnly) setSCRAMCredential(context.Context, string, string, []byte, int, []byte) error {
	return errReadReplica("change SCRAM credentials")
}

func (readOnly) deleteSCRAMCredential(context.Context, string, string) error {
	return errReadReplica("change SCRAM credentials")
}

func (readOnly) alterISRCall(context.Context, ISRRequest) (cluster.PartitionInfo, error) {
	return cluster.PartitionInfo{}, errReadReplica("change ISRs")
}

func (readOnly) newLeaderEpochCall(context.Context, ISRRequest) (cluster.PartitionInfo, error) {
	return cluster.PartitionInfo{}, errReadReplica("change leader epochs")
}

func (readOnly) leaderEpochEnd(string, int32, int32) (EpochEnd, error) {
	return EpochEnd{}, errReadReplica("answer leader epochs")
}

func (readOnly) serveReplication(context.Context, ReplicaStream) error {
	return errReadReplica("serve replication")
}

func (readOnly) endOffsetForEpoch(EpochQuery) (EpochEnd, error) {
	return EpochEnd{}, errReadReplica("serve replication")
}

// errReadReplica refuses a write on a read-only replica, naming what was
// asked.
func errReadReplica(what string) *Error {
	return refuse(ReasonReadReplica, nil, "this broker is a read-only replica of a bucket another cluster writes (read_replica): it cannot %s; send it to a broker of the writing cluster", what)
}
