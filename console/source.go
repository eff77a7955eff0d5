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
	// The actions: the same calls, and so the same validation, as `strata
	// topic create`, `strata topic alter` and `strata group reset`.
	CreateTopic(ctx context.Context, name string, partitions, replicationFactor int32, overrides map[string]string) (broker.TopicDescription, error)
	AlterTopicConfig(ctx context.Context, name string, set map[string]string, del []string) (broker.TopicDescription, error)
	AddPartitions(ctx context.Context, name string, count int32, assignment [][]int32) (broker.TopicDescription, error)
	ResetGroupOffsets(ctx context.Context, name string, offsets []broker.CommittedOffset, force bool) (int, error)
	// ProbeObjectStore returns nil while the bucket answers.
	ProbeObjectStore(ctx context.Context) error
}

var _ Source = (*broker.Broker)(nil)
