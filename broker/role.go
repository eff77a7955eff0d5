package broker

// A broker is one of two kinds, and the front ends (rpc, kafka, the admin
// endpoint, the auth layer) cannot tell which: they hold a *Broker and call
// its methods. What differs between the two is this interface, implemented
// by:
//
//   - clusterMember (below): a member of the cluster that writes the bucket, with
//     its Raft metadata, gossip, partitions and tiering. Its methods are
//     the bodies of Broker's, in the files beside them.
//   - readOnly (readreplica_role.go): a read-only replica of a bucket
//     another cluster writes (readreplica.go), which answers reads from
//     the bucket's manifest heads and refuses every write with
//     READ_REPLICA.
//
// A Broker method whose behaviour depends on the kind does what both kinds
// share (checks, limits, forwarding to the controller, the fetch loop) and
// calls b.role for the rest, so the read replica's behaviour is all in
// readreplica*.go and no other code asks which kind it is.
// Broker.ReadReplica says, for strata serve's start-up line.

import (
	"context"
	"io"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/security"
	"github.com/strata-log/strata/tiering"
)

// role is what a member and a read replica do differently; each method is
// named after the Broker method that calls it.
type role interface {
	// Reads: a member answers from its metadata and partitions, a read
	// replica from the bucket's heads.
	fetch(ctx context.Context, req FetchRequest) (FetchResult, error)
	listOffsets(ctx context.Context, topic string, partition int32, q OffsetQuery) (OffsetAnswer, error)
	listSpecialOffset(ctx context.Context, topic string, partition int32, q SpecialOffset) (OffsetAnswer, error)
	cluster(topics []string) ClusterView
	listTopics() []TopicSummary
	describeTopic(name string) (TopicDescription, error)
	clusterStatus() ClusterStatus
	ready(ctx context.Context) error
	liveBrokers() map[int32]bool
	raftAddr() string
	writeMetrics(w io.Writer)
	knows(topic string) bool
	checkLeaderEpoch(topic string, partition, epoch int32) error
	diverging(topic string, partition int32, offset int64, lastEpoch int32) (EpochEnd, bool, error)
	epochAt(topic string, partition int32, offset int64) int32
	acls(principal string) []security.ACL
	aclsInForce() []security.ACL
	scramCredential(user, mechanism string) (cluster.SCRAMCredential, bool)
	scramUsers() map[string][]string
	fetchOffsets(ctx context.Context, group string, partitions []TopicPartition) ([]CommittedOffset, error)
	committedOffsets(group string, partitions []TopicPartition) []CommittedOffset

	// Writes: a member makes them, a read replica refuses them.
	produce(ctx context.Context, req ProduceRequest) (ProduceResult, error)
	initProducer(ctx context.Context) (id int64, epoch int16, err error)
	newTopic(name string, partitions, replicationFactor int32, overrides map[string]string) (newTopic, error)
	planPartitions(name string, count int32, assignment [][]int32) ([]cluster.PartitionInfo, error)
	deleteTopic(ctx context.Context, name string) error
	restoreTopic(ctx context.Context, name, id string, replicationFactor int32) (TopicDescription, error)
	restoreTopicCut(ctx context.Context, name, id string, replicationFactor int32, as string, cut tiering.RestoreCut) (TopicDescription, error)
	topicConfigChange(ctx context.Context, name string, set map[string]string, del []string) (map[string]string, error)
	coordinator(ctx context.Context) (*group.Coordinator, error)
	commitOffsetsCall(ctx context.Context, group, memberID string, memberEpoch int32, offsets []CommittedOffset) error
	deleteOffsets(ctx context.Context, name string, partitions []TopicPartition) ([]string, error)
	addACLs(ctx context.Context, acls []security.ACL) error
	removeACLs(ctx context.Context, acls []security.ACL) (int, error)
	setSCRAMCredential(ctx context.Context, user, mechanism string, salt []byte, iterations int, saltedPassword []byte) error
	deleteSCRAMCredential(ctx context.Context, user, mechanism string) error
	alterISRCall(ctx context.Context, req ISRRequest) (cluster.PartitionInfo, error)
	newLeaderEpochCall(ctx context.Context, req ISRRequest) (cluster.PartitionInfo, error)
	leaderEpochEnd(topic string, partition, epoch int32) (EpochEnd, error)
	serveReplication(ctx context.Context, stream ReplicaStream) error
	endOffsetForEpoch(q EpochQuery) (EpochEnd, error)

	// close releases what the role holds beyond the Broker's own.
	close()
}

// clusterMember is a broker of the cluster that writes the bucket. Embedding the
// Broker lets the methods keep their bodies as they were written on it.
type clusterMember struct{ *Broker }

var _ role = clusterMember{}

// close: a member holds nothing beyond the Broker's own.
func (clusterMember) close() {}
