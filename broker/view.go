package broker

import "github.com/strata-log/strata/cluster"

// Views of the cluster and of topics handed to the API layer. They are
// copies: the caller may keep and change them.

// BrokerView is one broker of the cluster.
type BrokerView struct {
	ID   int32
	Addr string
	Rack string
	// KafkaAddr is the broker's Kafka address (host:port), empty when it
	// opens no Kafka listener.
	KafkaAddr string
}

// PartitionView is one partition's assignment and leadership.
type PartitionView struct {
	Partition   int32
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
}

// TopicView is one topic's partitions.
type TopicView struct {
	Name       string
	ID         string
	Partitions []PartitionView
}

// ClusterView is the metadata a client needs to route requests.
type ClusterView struct {
	Brokers      []BrokerView
	Topics       []TopicView
	ControllerID int32
	Version      uint64
}

// TopicDescription is a topic with its settings and, for the partitions this
// broker holds, its log figures.
type TopicDescription struct {
	Name       string
	ID         string
	Config     map[string]string // every setting in force
	Overrides  map[string]string // those set on the topic
	Partitions []PartitionDescription
}

// PartitionDescription is one partition as this broker sees it. Hosted is
// false when this broker has no replica, and the log figures are then zero.
type PartitionDescription struct {
	PartitionView
	Hosted           bool
	LogStartOffset   int64 // first readable offset, either tier
	HighWatermark    int64
	LogEndOffset     int64
	LocalStartOffset int64
	LocalBytes       int64
	LocalSegments    int32
	ColdBytes        int64
	ColdSegments     int32
	ColdEndOffset    int64 // -1 while the cold tier is empty
	UploadLagBytes   int64
	UploadLagSegs    int32
	TieringError     string
	// ColdLoading is true while this broker has not read the partition's
	// manifest head since it opened it: LogStartOffset is then the local
	// start, and the cold and upload-lag figures are unknown (zero).
	ColdLoading bool
	// UploadLagMs is how long the oldest acknowledged record not yet in
	// the cold tier has waited for it (0: none waits); -1 where this
	// broker cannot tell (not the leader, loading, no cold tier).
	UploadLagMs int64
	// HeadAgeMs and HeadGeneration are a read-only replica's
	// (readreplica.go): how long ago it last read the partition's
	// manifest head, and that head's generation. -1 and 0 elsewhere.
	HeadAgeMs      int64
	HeadGeneration uint64
}

// TopicSummary is one line of a topic listing.
type TopicSummary struct {
	Name              string
	Partitions        int32
	ReplicationFactor int32
}

// TopicPartition names one partition of one topic (cluster's type, which
// keys the broker's partitions and the committed offsets).
type TopicPartition = cluster.TopicPartition

// CommittedOffset is a consumer group's position in one partition.
type CommittedOffset struct {
	Topic        string
	Partition    int32
	Offset       int64
	Metadata     string
	CommitTimeMs int64
}
