package rpc

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/strata-log/strata/broker"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

type groupService struct {
	stratav1.UnimplementedGroupServiceServer
	b *broker.Broker
}

func (s *groupService) GroupHeartbeat(ctx context.Context, req *stratav1.GroupHeartbeatRequest) (*stratav1.GroupHeartbeatResponse, error) {
	hb := broker.Heartbeat{
		Group:            req.GetGroup(),
		MemberID:         req.GetMemberId(),
		MemberEpoch:      req.GetMemberEpoch(),
		Topics:           req.GetTopics(),
		Assignor:         req.GetAssignor(),
		SessionTimeout:   time.Duration(req.GetSessionTimeoutMs()) * time.Millisecond,
		RebalanceTimeout: time.Duration(req.GetRebalanceTimeoutMs()) * time.Millisecond,
		Owned:            fromProtoPartitions(req.GetOwned()),
		ClientID:         req.GetClientId(),
		Host:             callerHost(ctx),
		NoWait:           req.GetNoWait(),
	}
	if req.GetSessionTimeoutMs() < 0 || req.GetRebalanceTimeoutMs() < 0 {
		return nil, invalid("session_timeout_ms and rebalance_timeout_ms cannot be negative")
	}
	ans, err := s.b.GroupHeartbeat(ctx, hb)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &stratav1.GroupHeartbeatResponse{
		MemberId:            ans.MemberID,
		MemberEpoch:         ans.MemberEpoch,
		HeartbeatIntervalMs: int32(ans.HeartbeatInterval / time.Millisecond),
		Assigned:            toProtoPartitions(ans.Assigned),
		Pending:             int32(ans.Pending),
	}
	for _, o := range ans.Committed {
		resp.Committed = append(resp.Committed, &stratav1.CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
			Metadata: o.Metadata, CommitTimeMs: o.CommitTimeMs})
	}
	return resp, nil
}

// callerHost is the client's address as the coordinator should show it:
// the original caller's when the call was forwarded by another broker.
func callerHost(ctx context.Context) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get(forwardedHeader)) > 0 {
		if v := md.Get(callerHostHeader); len(v) > 0 {
			return v[0]
		}
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		if host, _, err := net.SplitHostPort(p.Addr.String()); err == nil {
			return host
		}
		return p.Addr.String()
	}
	return ""
}

func (s *groupService) ListGroups(ctx context.Context, _ *stratav1.ListGroupsRequest) (*stratav1.ListGroupsResponse, error) {
	groups, err := s.b.ListGroups(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &stratav1.ListGroupsResponse{}
	for _, g := range groups {
		resp.Groups = append(resp.Groups, &stratav1.GroupSummary{Group: g.Group, State: g.State, Members: int32(g.Members), Assignor: g.Assignor})
	}
	return resp, nil
}

func (s *groupService) DescribeGroup(ctx context.Context, req *stratav1.DescribeGroupRequest) (*stratav1.DescribeGroupResponse, error) {
	d, err := s.b.DescribeGroup(ctx, req.GetGroup())
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &stratav1.DescribeGroupResponse{Group: d.Group, State: d.State, Assignor: d.Assignor, GroupEpoch: d.Epoch}
	for _, m := range d.Members {
		resp.Members = append(resp.Members, &stratav1.GroupMember{
			MemberId: m.ID, ClientId: m.ClientID, Host: m.Host, MemberEpoch: m.Epoch, Topics: m.Topics,
			Owned: toProtoPartitions(m.Owned), Revoking: toProtoPartitions(m.Revoking), Pending: toProtoPartitions(m.Pending),
			LastHeartbeatMs: m.LastHeartbeat.UnixMilli(),
		})
	}
	for _, o := range d.Offsets {
		resp.Offsets = append(resp.Offsets, &stratav1.CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata, CommitTimeMs: o.CommitTimeMs})
	}
	return resp, nil
}

func (s *groupService) ResetGroupOffsets(ctx context.Context, req *stratav1.ResetGroupOffsetsRequest) (*stratav1.ResetGroupOffsetsResponse, error) {
	n, err := s.b.ResetGroupOffsets(ctx, req.GetGroup(), fromProtoOffsets(req.GetOffsets()), req.GetForce())
	if err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.ResetGroupOffsetsResponse{RemovedMembers: int32(n)}, nil
}

func (s *groupService) DeleteGroup(ctx context.Context, req *stratav1.DeleteGroupRequest) (*stratav1.DeleteGroupResponse, error) {
	n, err := s.b.DeleteGroup(ctx, req.GetGroup(), req.GetForce())
	if err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.DeleteGroupResponse{RemovedMembers: int32(n)}, nil
}

func fromProtoPartitions(in []*stratav1.TopicPartition) []broker.TopicPartition {
	out := make([]broker.TopicPartition, len(in))
	for i, tp := range in {
		out[i] = broker.TopicPartition{Topic: tp.GetTopic(), Partition: tp.GetPartition()}
	}
	return out
}

func toProtoPartitions(in []broker.TopicPartition) []*stratav1.TopicPartition {
	out := make([]*stratav1.TopicPartition, len(in))
	for i, tp := range in {
		out[i] = &stratav1.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
	}
	return out
}

func fromProtoOffsets(in []*stratav1.CommittedOffset) []broker.CommittedOffset {
	out := make([]broker.CommittedOffset, 0, len(in))
	for _, o := range in {
		out = append(out, broker.CommittedOffset{Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset(), Metadata: o.GetMetadata()})
	}
	return out
}
