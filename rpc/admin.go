package rpc

// Metadata, topic admin and consumer offsets: straight translations.

import (
	"context"

	"github.com/strata-log/strata/broker"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

type metadataService struct {
	stratav1.UnimplementedMetadataServiceServer
	b *broker.Broker
}

func (s *metadataService) GetMetadata(ctx context.Context, req *stratav1.GetMetadataRequest) (*stratav1.GetMetadataResponse, error) {
	v := s.b.Cluster(req.Topics)
	resp := &stratav1.GetMetadataResponse{ControllerId: v.ControllerID, Version: v.Version}
	for _, b := range v.Brokers {
		resp.Brokers = append(resp.Brokers, &stratav1.Broker{Id: b.ID, Address: b.Addr, Rack: b.Rack})
	}
	for _, t := range v.Topics {
		tm := &stratav1.TopicMetadata{Name: t.Name, Id: t.ID}
		for _, p := range t.Partitions {
			tm.Partitions = append(tm.Partitions, partitionMetadata(p))
		}
		resp.Topics = append(resp.Topics, tm)
	}
	return resp, nil
}

func partitionMetadata(p broker.PartitionView) *stratav1.PartitionMetadata {
	return &stratav1.PartitionMetadata{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, Isr: p.ISR}
}

type adminService struct {
	stratav1.UnimplementedAdminServiceServer
	b *broker.Broker
}

func (s *adminService) CreateTopic(ctx context.Context, req *stratav1.CreateTopicRequest) (*stratav1.CreateTopicResponse, error) {
	d, err := s.b.CreateTopic(ctx, req.Name, req.Partitions, req.ReplicationFactor, req.Config)
	if err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.CreateTopicResponse{Topic: topicDescription(d)}, nil
}

func (s *adminService) DeleteTopic(ctx context.Context, req *stratav1.DeleteTopicRequest) (*stratav1.DeleteTopicResponse, error) {
	if err := s.b.DeleteTopic(ctx, req.Name); err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.DeleteTopicResponse{}, nil
}

func (s *adminService) ListTopics(ctx context.Context, req *stratav1.ListTopicsRequest) (*stratav1.ListTopicsResponse, error) {
	resp := &stratav1.ListTopicsResponse{}
	for _, t := range s.b.ListTopics() {
		resp.Topics = append(resp.Topics, &stratav1.TopicSummary{Name: t.Name, Partitions: t.Partitions, ReplicationFactor: t.ReplicationFactor})
	}
	return resp, nil
}

func (s *adminService) DescribeTopic(ctx context.Context, req *stratav1.DescribeTopicRequest) (*stratav1.DescribeTopicResponse, error) {
	d, err := s.b.DescribeTopic(req.Name)
	if err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.DescribeTopicResponse{Topic: topicDescription(d)}, nil
}

func (s *adminService) AlterTopicConfig(ctx context.Context, req *stratav1.AlterTopicConfigRequest) (*stratav1.AlterTopicConfigResponse, error) {
	d, err := s.b.AlterTopicConfig(ctx, req.Name, req.Set, req.Delete)
	if err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.AlterTopicConfigResponse{Topic: topicDescription(d)}, nil
}

func (s *adminService) AddPartitions(ctx context.Context, req *stratav1.AddPartitionsRequest) (*stratav1.AddPartitionsResponse, error) {
	d, err := s.b.AddPartitions(ctx, req.Name, req.Count, replicaLists(req.Assignment))
	if err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.AddPartitionsResponse{Topic: topicDescription(d)}, nil
}

// replicaLists is an assignment as the broker takes it: nil when none is
// given.
func replicaLists(in []*stratav1.ReplicaList) [][]int32 {
	if len(in) == 0 {
		return nil
	}
	out := make([][]int32, len(in))
	for i, l := range in {
		out[i] = l.GetBrokers()
	}
	return out
}

func (s *adminService) RestoreTopic(ctx context.Context, req *stratav1.RestoreTopicRequest) (*stratav1.RestoreTopicResponse, error) {
	var (
		d   broker.TopicDescription
		err error
	)
	rc := broker.RestoreCopy{As: req.As, ToOffset: req.ToOffset, ToTime: req.ToTimeMs}
	if rc.Copies() {
		d, err = s.b.RestoreTopicCopy(ctx, req.Name, req.Id, req.ReplicationFactor, rc)
	} else {
		d, err = s.b.RestoreTopic(ctx, req.Name, req.Id, req.ReplicationFactor)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.RestoreTopicResponse{Topic: topicDescription(d)}, nil
}

func topicDescription(d broker.TopicDescription) *stratav1.TopicDescription {
	td := &stratav1.TopicDescription{Name: d.Name, Id: d.ID, Config: d.Config, Overrides: d.Overrides}
	for _, p := range d.Partitions {
		td.Partitions = append(td.Partitions, &stratav1.PartitionDescription{
			Metadata:          partitionMetadata(p.PartitionView),
			LogStartOffset:    p.LogStartOffset,
			HighWatermark:     p.HighWatermark,
			LogEndOffset:      p.LogEndOffset,
			LocalStartOffset:  p.LocalStartOffset,
			LocalBytes:        p.LocalBytes,
			LocalSegments:     p.LocalSegments,
			ColdBytes:         p.ColdBytes,
			ColdSegments:      p.ColdSegments,
			ColdEndOffset:     p.ColdEndOffset,
			UploadLagBytes:    p.UploadLagBytes,
			UploadLagSegments: p.UploadLagSegs,
			TieringError:      p.TieringError,
			ColdLoading:       p.ColdLoading,
			UploadLagMs:       p.UploadLagMs,
			HeadAgeMs:         p.HeadAgeMs,
			HeadGeneration:    p.HeadGeneration,
		})
	}
	return td
}

type offsetService struct {
	stratav1.UnimplementedOffsetServiceServer
	b *broker.Broker
}

func (s *offsetService) CommitOffsets(ctx context.Context, req *stratav1.CommitOffsetsRequest) (*stratav1.CommitOffsetsResponse, error) {
	if err := s.b.CommitOffsets(ctx, req.GetGroup(), req.GetMemberId(), req.GetMemberEpoch(), fromProtoOffsets(req.GetOffsets())); err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.CommitOffsetsResponse{}, nil
}

func (s *offsetService) FetchOffsets(ctx context.Context, req *stratav1.FetchOffsetsRequest) (*stratav1.FetchOffsetsResponse, error) {
	if req.Group == "" {
		return nil, invalid("group is required")
	}
	var tps []broker.TopicPartition
	for _, tp := range req.Partitions {
		tps = append(tps, broker.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	offsets, err := s.b.FetchOffsets(ctx, req.Group, tps)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &stratav1.FetchOffsetsResponse{}
	for _, o := range offsets {
		resp.Offsets = append(resp.Offsets, &stratav1.CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata, CommitTimeMs: o.CommitTimeMs})
	}
	return resp, nil
}
