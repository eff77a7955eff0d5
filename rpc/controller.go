package rpc

// The broker's client of the controller (broker.ControllerClient) over
// gRPC: a call the broker passes on to the controller (broker/controller.go)
// is the same gRPC call a client would make, on the peer connection to the
// controller, with three headers:
//
//   - forwardedHeader marks it passed on: the controller's broker serves it
//     with broker.Forwarded and never passes it on again;
//   - principalHeader names the principal it is made for (with TLS, where
//     calls carry principals), which only a broker may send and the
//     controller authorizes as that principal;
//   - callerHostHeader, on a heartbeat, the member's host, for display.
//
// Errors come back as the controller's *broker.Error (fromStatus).

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/group"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/security"
)

const forwardedHeader = "strata-forwarded"

// callerHostHeader carries, on a forwarded call, the address the client
// called from, so the controller can show it (group members' host). It is
// for display only: nothing trusts it.
const callerHostHeader = "strata-caller-host"

// Controller implements broker.Peers.
func (ps *Peers) Controller(to broker.Peer) (broker.ControllerClient, error) {
	conn, err := ps.conn(to)
	if err != nil {
		return nil, err
	}
	return controllerClient{conn}, nil
}

type controllerClient struct {
	conn *grpc.ClientConn
}

// outgoing marks a call passed on for the principal of ctx.
func outgoing(ctx context.Context, host string) context.Context {
	kv := []string{forwardedHeader, "1"}
	if host != "" {
		kv = append(kv, callerHostHeader, host)
	}
	if p, ok := security.PrincipalFrom(ctx); ok && !p.Broker {
		kv = append(kv, principalHeader, p.Name)
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// markForwarded serves a call another broker passed on with
// broker.Forwarded, so it is not passed on again.
func markForwarded(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get(forwardedHeader)) > 0 {
		ctx = broker.Forwarded(ctx)
	}
	return handler(ctx, req)
}

func (c controllerClient) admin() stratav1.AdminServiceClient {
	return stratav1.NewAdminServiceClient(c.conn)
}
func (c controllerClient) groups() stratav1.GroupServiceClient {
	return stratav1.NewGroupServiceClient(c.conn)
}

func (c controllerClient) CreateTopic(ctx context.Context, name string, partitions, rf int32, overrides map[string]string) (broker.TopicDescription, error) {
	resp, err := c.admin().CreateTopic(outgoing(ctx, ""), &stratav1.CreateTopicRequest{Name: name, Partitions: partitions, ReplicationFactor: rf, Config: overrides})
	if err != nil {
		return broker.TopicDescription{}, fromStatus(err)
	}
	return fromTopicDescription(resp.GetTopic()), nil
}

func (c controllerClient) DeleteTopic(ctx context.Context, name string) error {
	_, err := c.admin().DeleteTopic(outgoing(ctx, ""), &stratav1.DeleteTopicRequest{Name: name})
	return fromStatus(err)
}

func (c controllerClient) AlterTopicConfig(ctx context.Context, name string, set map[string]string, del []string) (broker.TopicDescription, error) {
	resp, err := c.admin().AlterTopicConfig(outgoing(ctx, ""), &stratav1.AlterTopicConfigRequest{Name: name, Set: set, Delete: del})
	if err != nil {
		return broker.TopicDescription{}, fromStatus(err)
	}
	return fromTopicDescription(resp.GetTopic()), nil
}

func (c controllerClient) AddPartitions(ctx context.Context, name string, count int32, assignment [][]int32) (broker.TopicDescription, error) {
	req := &stratav1.AddPartitionsRequest{Name: name, Count: count}
	for _, replicas := range assignment {
		req.Assignment = append(req.Assignment, &stratav1.ReplicaList{Brokers: replicas})
	}
	resp, err := c.admin().AddPartitions(outgoing(ctx, ""), req)
	if err != nil {
		return broker.TopicDescription{}, fromStatus(err)
	}
	return fromTopicDescription(resp.GetTopic()), nil
}

func (c controllerClient) RestoreTopic(ctx context.Context, name, id string, rf int32, rc broker.RestoreCopy) (broker.TopicDescription, error) {
	resp, err := c.admin().RestoreTopic(outgoing(ctx, ""), &stratav1.RestoreTopicRequest{Name: name, Id: id, ReplicationFactor: rf,
		As: rc.As, ToOffset: rc.ToOffset, ToTimeMs: rc.ToTime})
	if err != nil {
		return broker.TopicDescription{}, fromStatus(err)
	}
	return fromTopicDescription(resp.GetTopic()), nil
}

func (c controllerClient) CommitOffsets(ctx context.Context, group, memberID string, memberEpoch int32, offsets []broker.CommittedOffset) error {
	_, err := stratav1.NewOffsetServiceClient(c.conn).CommitOffsets(outgoing(ctx, ""), &stratav1.CommitOffsetsRequest{
		Group: group, MemberId: memberID, MemberEpoch: memberEpoch, Offsets: toProtoOffsets(offsets)})
	return fromStatus(err)
}

func (c controllerClient) FetchOffsets(ctx context.Context, group string, partitions []broker.TopicPartition) ([]broker.CommittedOffset, error) {
	req := &stratav1.FetchOffsetsRequest{Group: group}
	for _, tp := range partitions {
		req.Partitions = append(req.Partitions, &stratav1.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	resp, err := stratav1.NewOffsetServiceClient(c.conn).FetchOffsets(outgoing(ctx, ""), req)
	if err != nil {
		return nil, fromStatus(err)
	}
	return fromProtoCommitted(resp.GetOffsets()), nil
}

func (c controllerClient) GroupHeartbeat(ctx context.Context, hb broker.Heartbeat) (broker.GroupAnswer, error) {
	resp, err := c.groups().GroupHeartbeat(outgoing(ctx, hb.Host), &stratav1.GroupHeartbeatRequest{
		Group: hb.Group, MemberId: hb.MemberID, MemberEpoch: hb.MemberEpoch, Topics: hb.Topics, Assignor: hb.Assignor,
		SessionTimeoutMs:   int32(hb.SessionTimeout / time.Millisecond),
		RebalanceTimeoutMs: int32(hb.RebalanceTimeout / time.Millisecond),
		Owned:              toProtoPartitions(hb.Owned), ClientId: hb.ClientID, NoWait: hb.NoWait,
	})
	if err != nil {
		return broker.GroupAnswer{}, fromStatus(err)
	}
	return broker.GroupAnswer{
		MemberAnswer: broker.MemberAnswer{MemberID: resp.GetMemberId(), MemberEpoch: resp.GetMemberEpoch(),
			HeartbeatInterval: time.Duration(resp.GetHeartbeatIntervalMs()) * time.Millisecond,
			Assigned:          fromProtoPartitions(resp.GetAssigned()), Pending: int(resp.GetPending())},
		Committed: fromProtoCommitted(resp.GetCommitted()),
	}, nil
}

func (c controllerClient) ListGroups(ctx context.Context) ([]broker.GroupSummary, error) {
	resp, err := c.groups().ListGroups(outgoing(ctx, ""), &stratav1.ListGroupsRequest{})
	if err != nil {
		return nil, fromStatus(err)
	}
	out := make([]broker.GroupSummary, 0, len(resp.GetGroups()))
	for _, g := range resp.GetGroups() {
		out = append(out, broker.GroupSummary{Group: g.GetGroup(), State: g.GetState(), Members: int(g.GetMembers()), Assignor: g.GetAssignor()})
	}
	return out, nil
}

func (c controllerClient) DescribeGroup(ctx context.Context, name string) (broker.GroupDescription, error) {
	resp, err := c.groups().DescribeGroup(outgoing(ctx, ""), &stratav1.DescribeGroupRequest{Group: name})
	if err != nil {
		return broker.GroupDescription{}, fromStatus(err)
	}
	d := broker.GroupDescription{Description: group.Description{Group: resp.GetGroup(), State: resp.GetState(),
		Assignor: resp.GetAssignor(), Epoch: resp.GetGroupEpoch()}, Offsets: fromProtoCommitted(resp.GetOffsets())}
	for _, m := range resp.GetMembers() {
		d.Members = append(d.Members, group.MemberDescription{ID: m.GetMemberId(), ClientID: m.GetClientId(), Host: m.GetHost(),
			Epoch: m.GetMemberEpoch(), Topics: m.GetTopics(), Owned: fromProtoPartitions(m.GetOwned()),
			Revoking: fromProtoPartitions(m.GetRevoking()), Pending: fromProtoPartitions(m.GetPending()),
			LastHeartbeat: time.UnixMilli(m.GetLastHeartbeatMs())})
	}
	return d, nil
}

func (c controllerClient) ResetGroupOffsets(ctx context.Context, name string, offsets []broker.CommittedOffset, force bool) (int, error) {
	resp, err := c.groups().ResetGroupOffsets(outgoing(ctx, ""), &stratav1.ResetGroupOffsetsRequest{Group: name, Offsets: toProtoOffsets(offsets), Force: force})
	if err != nil {
		return 0, fromStatus(err)
	}
	return int(resp.GetRemovedMembers()), nil
}

func (c controllerClient) DeleteGroup(ctx context.Context, name string, force bool) (int, error) {
	resp, err := c.groups().DeleteGroup(outgoing(ctx, ""), &stratav1.DeleteGroupRequest{Group: name, Force: force})
	if err != nil {
		return 0, fromStatus(err)
	}
	return int(resp.GetRemovedMembers()), nil
}

func (c controllerClient) InitProducer(ctx context.Context) (int64, int16, error) {
	resp, err := stratav1.NewProduceServiceClient(c.conn).InitProducer(outgoing(ctx, ""), &stratav1.InitProducerRequest{})
	if err != nil {
		return 0, 0, fromStatus(err)
	}
	return resp.GetProducerId(), int16(resp.GetProducerEpoch()), nil
}

func (c controllerClient) AddACLs(ctx context.Context, acls []security.ACL) error {
	_, err := c.admin().CreateACLs(outgoing(ctx, ""), &stratav1.CreateACLsRequest{Acls: toProtoACLs(acls)})
	return fromStatus(err)
}

func (c controllerClient) RemoveACLs(ctx context.Context, acls []security.ACL) (int, error) {
	resp, err := c.admin().DeleteACLs(outgoing(ctx, ""), &stratav1.DeleteACLsRequest{Acls: toProtoACLs(acls)})
	if err != nil {
		return 0, fromStatus(err)
	}
	return int(resp.GetRemoved()), nil
}

func (c controllerClient) SetSCRAMCredential(ctx context.Context, user, mechanism string, salt []byte, iterations int, saltedPassword []byte) error {
	_, err := stratav1.NewUserServiceClient(c.conn).SetSCRAMCredential(outgoing(ctx, ""), &stratav1.SetSCRAMCredentialRequest{
		User: user, Mechanism: mechanism, Salt: salt, Iterations: int32(iterations), SaltedPassword: saltedPassword})
	return fromStatus(err)
}

func (c controllerClient) DeleteSCRAMCredential(ctx context.Context, user, mechanism string) error {
	_, err := stratav1.NewUserServiceClient(c.conn).DeleteSCRAMCredential(outgoing(ctx, ""), &stratav1.DeleteSCRAMCredentialRequest{User: user, Mechanism: mechanism})
	return fromStatus(err)
}

func toProtoACLs(in []security.ACL) []*stratav1.ACL {
	out := make([]*stratav1.ACL, len(in))
	for i, a := range in {
		out[i] = &stratav1.ACL{Principal: a.Principal, ResourceType: string(a.Resource), Name: a.Name, Prefix: a.Prefix, Operation: string(a.Op)}
	}
	return out
}

func toProtoOffsets(in []broker.CommittedOffset) []*stratav1.CommittedOffset {
	out := make([]*stratav1.CommittedOffset, len(in))
	for i, o := range in {
		out[i] = &stratav1.CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata, CommitTimeMs: o.CommitTimeMs}
	}
	return out
}

func fromProtoCommitted(in []*stratav1.CommittedOffset) []broker.CommittedOffset {
	var out []broker.CommittedOffset
	for _, o := range in {
		out = append(out, broker.CommittedOffset{Topic: o.GetTopic(), Partition: o.GetPartition(), Offset: o.GetOffset(),
			Metadata: o.GetMetadata(), CommitTimeMs: o.GetCommitTimeMs()})
	}
	return out
}

// fromTopicDescription is topicDescription's inverse.
func fromTopicDescription(td *stratav1.TopicDescription) broker.TopicDescription {
	d := broker.TopicDescription{Name: td.GetName(), ID: td.GetId(), Config: td.GetConfig(), Overrides: td.GetOverrides()}
	for _, p := range td.GetPartitions() {
		m := p.GetMetadata()
		d.Partitions = append(d.Partitions, broker.PartitionDescription{
			PartitionView: broker.PartitionView{Partition: m.GetPartition(), Leader: m.GetLeader(), LeaderEpoch: m.GetLeaderEpoch(),
				Replicas: m.GetReplicas(), ISR: m.GetIsr()},
			LogStartOffset: p.GetLogStartOffset(), HighWatermark: p.GetHighWatermark(), LogEndOffset: p.GetLogEndOffset(),
			LocalStartOffset: p.GetLocalStartOffset(), LocalBytes: p.GetLocalBytes(), LocalSegments: p.GetLocalSegments(),
			ColdBytes: p.GetColdBytes(), ColdSegments: p.GetColdSegments(), ColdEndOffset: p.GetColdEndOffset(),
			UploadLagBytes: p.GetUploadLagBytes(), UploadLagSegs: p.GetUploadLagSegments(), TieringError: p.GetTieringError(),
			ColdLoading: p.GetColdLoading(), UploadLagMs: p.GetUploadLagMs(), HeadAgeMs: p.GetHeadAgeMs(), HeadGeneration: p.GetHeadGeneration(),
		})
	}
	return d
}
