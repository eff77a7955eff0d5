package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"google.golang.org/grpc"
)

// The admin calls below are thin wrappers over AdminService, OffsetService
// and MetadataService. They go to any broker (which forwards them to the
// controller when needed) and are retried a few times, with backoff within
// ctx, while the errors are retriable.

// CreateTopic creates a topic with the given number of partitions (0 means
// 1), replication factor (0 means the broker's default) and per-topic
// settings (retention.ms, segment.bytes, ...; nil for none). Since the call
// is retried after a lost answer, ErrTopicAlreadyExists can also mean that
// an earlier attempt of this very call succeeded.
func (c *Client) CreateTopic(ctx context.Context, name string, partitions, replicationFactor int32, config map[string]string) (*stratav1.TopicDescription, error) {
	var resp *stratav1.CreateTopicResponse
	err := c.callAny(ctx, fmt.Sprintf("create topic %q", name), func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewAdminServiceClient(cc).CreateTopic(ctx, &stratav1.CreateTopicRequest{
			Name: name, Partitions: partitions, ReplicationFactor: replicationFactor, Config: config,
		})
		return err
	})
	return resp.GetTopic(), err
}

// DeleteTopic deletes a topic and all its data.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	return c.callAny(ctx, fmt.Sprintf("delete topic %q", name), func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := stratav1.NewAdminServiceClient(cc).DeleteTopic(ctx, &stratav1.DeleteTopicRequest{Name: name})
		return err
	})
}

// RestoreTopic brings a topic back from the cold tier: it is created again
// under the id its objects are stored under (id empty: the one written most
// recently), with the partitions and settings its manifests recorded.
// replicationFactor 0 means the broker's default. With RestoreAs,
// RestoreToTime or RestoreToOffset the restore is a copy under a new topic
// id instead (see RestoreAs).
func (c *Client) RestoreTopic(ctx context.Context, name, id string, replicationFactor int32, opts ...RestoreOption) (*stratav1.TopicDescription, error) {
	req := &stratav1.RestoreTopicRequest{Name: name, Id: id, ReplicationFactor: replicationFactor}
	for _, o := range opts {
		o.apply(req)
	}
	var resp *stratav1.RestoreTopicResponse
	err := c.callAny(ctx, fmt.Sprintf("restore topic %q", name), func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewAdminServiceClient(cc).RestoreTopic(ctx, req)
		return err
	})
	return resp.GetTopic(), err
}

// RestoreOption changes what RestoreTopic restores.
type RestoreOption struct {
	apply func(*stratav1.RestoreTopicRequest)
}

// RestoreAs restores into a new topic of that name, beside the topic
// restored from, which may still exist and keep running: the new topic
// gets its own topic id and its own copy of the objects in the bucket, so
// retention or deletion of either never touches the other's data.
func RestoreAs(name string) RestoreOption {
	return RestoreOption{func(r *stratav1.RestoreTopicRequest) { r.As = name }}
}

// RestoreToTime cuts every restored partition's log before its first
// record with a timestamp after t: the records up to and including t are
// kept (to the millisecond). The restore is a copy under a new topic id.
func RestoreToTime(t time.Time) RestoreOption {
	ms := t.UnixMilli()
	return RestoreOption{func(r *stratav1.RestoreTopicRequest) { r.ToTimeMs = &ms }}
}

// RestoreToOffset cuts every restored partition's log before offset: the
// records with offsets below it are kept. The restore is a copy under a
// new topic id.
func RestoreToOffset(offset int64) RestoreOption {
	return RestoreOption{func(r *stratav1.RestoreTopicRequest) { r.ToOffset = &offset }}
}

// ListTopics lists every topic with its partition count and replication
// factor.
func (c *Client) ListTopics(ctx context.Context) ([]*stratav1.TopicSummary, error) {
	var resp *stratav1.ListTopicsResponse
	err := c.callAny(ctx, "list topics", func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewAdminServiceClient(cc).ListTopics(ctx, &stratav1.ListTopicsRequest{})
		return err
	})
	return resp.GetTopics(), err
}

// DescribeTopic returns a topic's settings and partitions, with log figures
// as the answering broker sees them.
func (c *Client) DescribeTopic(ctx context.Context, name string) (*stratav1.TopicDescription, error) {
	var resp *stratav1.DescribeTopicResponse
	err := c.callAny(ctx, fmt.Sprintf("describe topic %q", name), func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewAdminServiceClient(cc).DescribeTopic(ctx, &stratav1.DescribeTopicRequest{Name: name})
		return err
	})
	return resp.GetTopic(), err
}

// AlterTopicConfig sets the settings in set and returns those named in del
// to their defaults; they take effect without a restart.
func (c *Client) AlterTopicConfig(ctx context.Context, name string, set map[string]string, del []string) (*stratav1.TopicDescription, error) {
	var resp *stratav1.AlterTopicConfigResponse
	err := c.callAny(ctx, fmt.Sprintf("alter config of topic %q", name), func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewAdminServiceClient(cc).AlterTopicConfig(ctx, &stratav1.AlterTopicConfigRequest{
			Name: name, Set: set, Delete: del,
		})
		return err
	})
	return resp.GetTopic(), err
}

// AddPartitions raises a topic's partition count to count; the new
// partitions start empty and existing ones are untouched. Keys map to
// partitions by hash(key) mod count, so a key produced after the change
// may go to another partition than before. The client's own metadata is
// refreshed, so its producers use the new partitions at once.
//
// A count not above the current one is refused (ErrInvalidRequest), but
// not when this call's own earlier attempt made the increase and its
// answer was lost: after a retriable failure, a refusal is checked against
// the topic, and a topic that has count partitions is the answer.
func (c *Client) AddPartitions(ctx context.Context, name string, count int32) (*stratav1.TopicDescription, error) {
	var (
		resp    *stratav1.AddPartitionsResponse
		retried bool
	)
	err := c.callAny(ctx, fmt.Sprintf("add partitions to topic %q", name), func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewAdminServiceClient(cc).AddPartitions(ctx, &stratav1.AddPartitionsRequest{Name: name, Count: count})
		if IsRetriable(toError(err)) {
			retried = true
		}
		return err
	})
	if err != nil {
		var e *Error
		if retried && errors.As(err, &e) && e.Metadata["field"] == "partitions" {
			if d, derr := c.DescribeTopic(ctx, name); derr == nil && int32(len(d.GetPartitions())) == count {
				_, _ = c.Metadata(ctx)
				return d, nil
			}
		}
		return nil, err
	}
	_, _ = c.Metadata(ctx) // best effort: a later refresh finds the partitions too
	return resp.GetTopic(), nil
}

// Metadata returns the cluster metadata for the given topics (all when
// none are named): brokers, partitions, leaders and in-sync replicas. An
// answer for all topics also refreshes the client's own cache.
func (c *Client) Metadata(ctx context.Context, topics ...string) (*stratav1.GetMetadataResponse, error) {
	var resp *stratav1.GetMetadataResponse
	err := c.callAny(ctx, "metadata", func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewMetadataServiceClient(cc).GetMetadata(ctx, &stratav1.GetMetadataRequest{Topics: topics})
		return err
	})
	if err == nil && len(topics) == 0 {
		c.meta.install(resp)
	}
	return resp, err
}

// ListOffsets resolves spec to an offset of one partition, asking its
// leader: Earliest, Latest (the high watermark) or AtTime. AtOffset(n)
// returns n without a call.
func (c *Client) ListOffsets(ctx context.Context, topic string, partition int32, spec OffsetSpec) (int64, error) {
	tp := TopicPartition{topic, partition}
	if err := spec.validate("spec"); err != nil {
		return -1, wrapOp("list offsets of "+tp.String(), err)
	}
	req := &stratav1.ListOffsetsRequest{Topic: topic, Partition: partition}
	switch spec.kind {
	case specOffset:
		return spec.value, nil
	case specEarliest:
		req.Query = &stratav1.ListOffsetsRequest_Spec{Spec: stratav1.OffsetSpec_OFFSET_SPEC_EARLIEST}
	case specLatest:
		req.Query = &stratav1.ListOffsetsRequest_Spec{Spec: stratav1.OffsetSpec_OFFSET_SPEC_LATEST}
	case specTime:
		req.Query = &stratav1.ListOffsetsRequest_TimestampMs{TimestampMs: spec.value}
	}
	var resp *stratav1.ListOffsetsResponse
	err := c.callLeader(ctx, fmt.Sprintf("list offsets %s of %s", spec, tp), tp, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewFetchServiceClient(cc).ListOffsets(ctx, req)
		return err
	})
	if err != nil {
		return -1, err
	}
	return resp.GetOffset(), nil
}

// CommitOffsets stores a consumer group's positions: for each partition the
// next offset the group will consume (Consumer.Position). It commits from
// outside the group, so it is refused (ErrGroupNotEmpty) while the group
// has members; members commit with GroupConsumer.Commit.
func (c *Client) CommitOffsets(ctx context.Context, group string, offsets map[TopicPartition]int64) error {
	req := &stratav1.CommitOffsetsRequest{Group: group, Offsets: committedOffsets(offsets)}
	return c.callAny(ctx, fmt.Sprintf("commit offsets of group %q", group), func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := stratav1.NewOffsetServiceClient(cc).CommitOffsets(ctx, req)
		return err
	})
}

// committedOffsets is the wire form of positions to commit, by partition,
// stamped with the time now.
func committedOffsets(offsets map[TopicPartition]int64) []*stratav1.CommittedOffset {
	now := time.Now().UnixMilli()
	out := make([]*stratav1.CommittedOffset, 0, len(offsets))
	for _, tp := range slices.SortedFunc(maps.Keys(offsets), compareTPs) {
		out = append(out, &stratav1.CommittedOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: offsets[tp], CommitTimeMs: now})
	}
	return out
}

// FetchOffsets returns every position a consumer group has committed.
func (c *Client) FetchOffsets(ctx context.Context, group string) (map[TopicPartition]int64, error) {
	var resp *stratav1.FetchOffsetsResponse
	err := c.callAny(ctx, fmt.Sprintf("fetch offsets of group %q", group), func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewOffsetServiceClient(cc).FetchOffsets(ctx, &stratav1.FetchOffsetsRequest{Group: group})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make(map[TopicPartition]int64, len(resp.GetOffsets()))
	for _, o := range resp.GetOffsets() {
		out[TopicPartition{o.GetTopic(), o.GetPartition()}] = o.GetOffset()
	}
	return out, nil
}
