package console

import (
	"context"

	"github.com/strata-log/strata/broker"
)

// Source is what the console reads from its broker. *broker.Broker
// implements it; the console keeps none of the broker's logic.
type Source interface {
	// ClusterStatus is the cluster as the broker sees it: brokers alive or
	// down by gossip, the controller, partition health, upload lag.
	ClusterStatus() broker.ClusterStatus
	// ListTopics and DescribeTopic are the topics and, for partitions the
	// broker holds, their logs in both tiers.
	ListTopics() []broker.TopicSummary
	DescribeTopic(name string) (broker.TopicDescription, error)
	// ListOffsets resolves a position (earliest, latest, by time) on a
	// partition the broker leads, across both tiers: the timeline's
	// points.
	ListOffsets(ctx context.Context, topic string, partition int32, q broker.OffsetQuery) (broker.OffsetAnswer, error)
	// Fetch reads committed batches from a partition through the broker's
	// normal fetch path (the local log, or the cold tier through its cache):
	// the record browser's reads. The caller releases the result.
	Fetch(ctx context.Context, req broker.FetchRequest) (broker.FetchResult, error)
	// ListGroups and DescribeGroup are the consumer groups, their members
	// and committed offsets.
	ListGroups(ctx context.Context) ([]broker.GroupSummary, error)
	DescribeGroup(ctx context.Context, name string) (broker.GroupDescription, error)
	// ProbeObjectStore returns nil while the bucket answers.
	ProbeObjectStore(ctx context.Context) error
}

var _ Source = (*broker.Broker)(nil)
