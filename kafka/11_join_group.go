package kafka

// JoinGroup, v0 to v9 (v0 and v1 as Kafka 4.1 keeps them, KAFKA-19444:
// librdkafka before 2.11 turns groups off without v0, and
// segmentio/kafka-go sends v1 and v2).
//
// Protocol type "consumer": the member is a classic member of Strata's
// group (group/classic.go, after Kafka 4's classic members in a consumer
// group). Its first protocol's metadata is its consumer protocol
// subscription (kmsg.ConsumerMemberMetadata: topics, and from v1 the
// partitions it owns); the coordinator assigns server-side and never runs
// the client's assignor. The answer names the first protocol the member
// offered that every other classic member of the group offered too
// (INCONSISTENT_GROUP_PROTOCOL when there is none), the member epoch as
// the generation, and no leader (an empty leader id and no members), so
// the client is a follower: it syncs with no assignments and SyncGroup
// hands it the coordinator's. The answer leaves once the member and its
// grants are written to the Raft state.
//
// Member ids: a v4+ join without one gets MEMBER_ID_REQUIRED and an id to
// join with (KIP-394), and nothing changes; v0-v3 joins are given one at
// once. An id the coordinator does not know joins as a new member under
// it. Owned partitions the coordinator did not grant the member are
// ignored; those it granted and no longer targets are freed when the join
// no longer reports them (eager clients report nothing: they gave
// everything up before joining again).
//
// Session and rebalance timeouts come from the request (v0: the rebalance
// timeout is the session timeout, as Kafka does), between the
// coordinator's bounds (INVALID_REQUEST otherwise). Static membership
// (group.instance.id, v5+) is not supported: INVALID_REQUEST. A
// subscription that does not decode is INVALID_REQUEST; nothing changes.
//
// Other protocol types (Kafka Connect's "connect", or any custom one): a
// classic group proper (group/classic_group.go), as Kafka runs one. The
// join waits for the group's join phase: every member joins again, or
// the longest rebalance timeout passes. The answer names the protocol
// every member offers that most members prefer, the generation, and the
// leader; the leader's answer lists every member with its metadata, and
// its SyncGroup carries the assignments. A member whose protocol type or
// protocols do not match the group's, or a consumer member of such a
// group (and the reverse), is INCONSISTENT_GROUP_PROTOCOL. These groups
// are not written to the Raft state: after a change of controller their
// members join again.

import (
	"context"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/security"
)

func handleJoinGroup(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.JoinGroupRequest)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = -1
	resp.MemberID = req.MemberID
	empty := ""
	resp.Protocol = &empty
	if req.InstanceID != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code // static membership
		return resp, nil
	}
	if err := c.allowGroup("JoinGroup", req.Group, security.OpRead); err != nil { // auth.go
		resp.ErrorCode = groupCodeOf(err)
		return resp, nil
	}
	if req.ProtocolType != group.ConsumerProtocolType {
		return joinProtocolGroup(ctx, c, req, resp)
	}
	j, code := consumerJoin(req, c.clientID, remoteHost(c.nc))
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	for _, t := range j.Topics { // as a KIP-848 member: read on every topic subscribed
		if err := c.allowTopic("JoinGroup", t, security.OpRead); err != nil {
			resp.ErrorCode = codeOf(err)
			return resp, nil
		}
	}
	ans, err := c.s.b.JoinClassicGroup(ctx, j)
	if err != nil {
		resp.ErrorCode = groupCode(err).Code // a full group is GROUP_MAX_SIZE_REACHED
		return resp, nil
	}
	resp.MemberID = ans.MemberID
	if ans.MemberIDRequired {
		resp.ErrorCode = kerr.MemberIDRequired.Code
		return resp, nil
	}
	protocolType := consumerProtocolType
	resp.ProtocolType = &protocolType
	resp.Protocol = &ans.Protocol
	resp.Generation = ans.Generation
	resp.LeaderID = "" // no leader: the coordinator assigns
	return resp, nil
}

// joinProtocolGroup serves a join of a classic group proper.
func joinProtocolGroup(ctx context.Context, c *conn, req *kmsg.JoinGroupRequest, resp *kmsg.JoinGroupResponse) (kmsg.Response, error) {
	rebalance := req.RebalanceTimeoutMillis
	if req.Version == 0 {
		rebalance = req.SessionTimeoutMillis
	}
	j := group.ClassicGroupJoin{Group: req.Group, MemberID: req.MemberID, RequireKnownID: req.Version >= 4,
		ProtocolType: req.ProtocolType, SessionTimeout: millis(req.SessionTimeoutMillis), RebalanceTimeout: millis(rebalance),
		ClientID: c.clientID, Host: remoteHost(c.nc)}
	for _, p := range req.Protocols {
		j.Protocols = append(j.Protocols, group.ClassicProtocol{Name: p.Name, Metadata: p.Metadata})
	}
	ans, err := c.s.b.JoinClassicProtocolGroup(ctx, j)
	if err != nil {
		resp.ErrorCode = groupCode(err).Code // a full group is GROUP_MAX_SIZE_REACHED
		return resp, nil
	}
	resp.MemberID = ans.MemberID
	if ans.MemberIDRequired {
		resp.ErrorCode = kerr.MemberIDRequired.Code
		return resp, nil
	}
	resp.Generation, resp.LeaderID = ans.Generation, ans.Leader
	resp.ProtocolType, resp.Protocol = &ans.ProtocolType, &ans.Protocol
	for _, m := range ans.Members {
		rm := kmsg.NewJoinGroupResponseMember()
		rm.MemberID, rm.ProtocolMetadata = m.ID, m.Metadata
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}

// consumerJoin reads a consumer-type JoinGroup: its first protocol's
// metadata is the member's subscription. A code other than 0 refuses it.
func consumerJoin(req *kmsg.JoinGroupRequest, clientID, host string) (group.ClassicJoin, int16) {
	if len(req.Protocols) == 0 {
		return group.ClassicJoin{}, kerr.InconsistentGroupProtocol.Code
	}
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(req.Protocols[0].Metadata); err != nil {
		return group.ClassicJoin{}, kerr.InvalidRequest.Code
	}
	rebalance := req.RebalanceTimeoutMillis
	if req.Version == 0 {
		rebalance = req.SessionTimeoutMillis
	}
	j := group.ClassicJoin{
		Group:            req.Group,
		MemberID:         req.MemberID,
		RequireKnownID:   req.Version >= 4,
		Version:          meta.Version,
		Topics:           meta.Topics,
		SessionTimeout:   millis(req.SessionTimeoutMillis),
		RebalanceTimeout: millis(rebalance),
		ClientID:         clientID,
		Host:             host,
	}
	for _, p := range req.Protocols {
		j.Protocols = append(j.Protocols, p.Name)
	}
	for _, o := range meta.OwnedPartitions {
		for _, p := range o.Partitions {
			j.Owned = append(j.Owned, group.TopicPartition{Topic: o.Topic, Partition: p})
		}
	}
	return j, 0
}

// millis is a request's milliseconds; a negative value is 0, the
// default.
func millis(ms int32) time.Duration { return time.Duration(max(ms, 0)) * time.Millisecond }

func remoteHost(nc net.Conn) string {
	host, _, err := net.SplitHostPort(nc.RemoteAddr().String())
	if err != nil {
		return nc.RemoteAddr().String()
	}
	return "/" + host
}
