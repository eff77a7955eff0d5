package kafka

// ConsumerGroupHeartbeat, v0 to v1: KIP-848 consumer group membership,
// mapped field by field onto the broker's group heartbeat
// (broker.GroupHeartbeat), which is KIP-848 already: member epoch 0 joins,
// -1 leaves, any other epoch is a member's beat; each answer carries the
// partitions the member may own now.
//
//   - Member id: the client's (KIP-1082: v1 clients make one and keep it
//     for life, and the Java client never takes another from the answer);
//     a join without one (v0) is named by the coordinator. Joining again
//     under a known id replaces that member, its epochs going on from the
//     old one's. At most 255 bytes (INVALID_REQUEST).
//   - Member epoch -2 (a static member leaving to come back) and a group
//     instance id are refused with INVALID_REQUEST: Strata has no static
//     membership.
//   - Subscription: topic names; null keeps the last. An empty list on a
//     join is INVALID_REQUEST (the coordinator needs a topic), and later an
//     empty list is taken as unchanged. A subscribed topic regex (v1) is
//     INVALID_REQUEST: the coordinator subscribes by name only.
//   - Server assignor: Strata's assignors by name (sticky, range,
//     roundrobin), and Kafka's "uniform", which is Strata's sticky; null
//     means the group's (sticky for a new group). Any other name is
//     UNSUPPORTED_ASSIGNOR. A group keeps the assignor its first member
//     chose; a member asking for another cannot join (INVALID_REQUEST).
//   - Owned partitions: by topic id (kafka/03_metadata.go topicID); null
//     means unchanged since the last beat, so nothing is taken as given up.
//     A topic id no topic has is left out (its topic is gone).
//   - Rebalance timeout: the member's (-1 keeps it; 0 or less on a join
//     takes the coordinator's default, 60 s). The session timeout is the
//     coordinator's default (10 s): Kafka sets it on the broker, not the
//     client. The rack id is ignored.
//   - Answer: never held (Kafka answers a heartbeat at once); the member id,
//     epoch, heartbeat interval (the coordinator's: a third of the session,
//     at most 5 s) and the full assignment on every answer, with topic ids.
//     A leave answers epoch -1.
//
// Errors come from errors.go: UNKNOWN_MEMBER_ID (a member the group does
// not have: expired, removed, or never joined), FENCED_MEMBER_EPOCH (an
// epoch the member was never given, or a claim to a partition it was not
// granted: it must rejoin), GROUP_MAX_SIZE_REACHED (a join to a group with
// as many members as allowed, cluster.MaxGroupMembers), INVALID_REQUEST
// (bad fields, or a new group beyond limits.max_groups),
// NOT_COORDINATOR when it reached a broker that is no longer the controller
// and could not pass it on (groupCode, 10_find_coordinator.go).

import (
	"context"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/security"
)

// staticLeaveEpoch is the member epoch of a static member's leave.
const staticLeaveEpoch = -2

// kafkaAssignors maps Kafka's server assignor names to Strata's.
var kafkaAssignors = map[string]string{"uniform": "sticky"}

func handleConsumerGroupHeartbeat(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = e.Code, &msg
		return resp, nil
	}
	switch {
	case req.MemberEpoch == staticLeaveEpoch || req.InstanceID != nil:
		return fail(kerr.InvalidRequest, "static membership (group.instance.id, member epoch -2) is not supported by Strata")
	case req.SubscribedTopicRegex != nil:
		return fail(kerr.InvalidRequest, "a subscribed topic regex is not supported by Strata; subscribe by topic names")
	}
	if err := c.allowGroup("ConsumerGroupHeartbeat", req.Group, security.OpRead); err != nil { // auth.go
		return fail(kerr.GroupAuthorizationFailed, err.Error())
	}
	for _, t := range req.SubscribedTopicNames {
		if err := c.allowTopic("ConsumerGroupHeartbeat", t, security.OpRead); err != nil {
			return fail(kerr.TopicAuthorizationFailed, err.Error())
		}
	}
	hb := broker.Heartbeat{
		Group:       req.Group,
		MemberID:    req.MemberID,
		MemberEpoch: req.MemberEpoch,
		Topics:      req.SubscribedTopicNames,
		ClientID:    c.clientID,
		NoWait:      true,
		// KIP-1082: the member's id is the one it chose.
		KeepMemberID: true,
	}
	if host, _, err := net.SplitHostPort(c.nc.RemoteAddr().String()); err == nil {
		hb.Host = host
	}
	if req.RebalanceTimeoutMillis > 0 {
		hb.RebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.ServerAssignor != nil {
		name := *req.ServerAssignor
		if s, ok := kafkaAssignors[name]; ok {
			name = s
		}
		if _, ok := group.AssignorByName(name); !ok {
			return fail(kerr.UnsupportedAssignor, "server assignor "+*req.ServerAssignor+" is not one of Strata's (uniform, sticky, range, roundrobin)")
		}
		hb.Assignor = name
	}
	view := c.s.b.Cluster(nil)
	names := make(map[[16]byte]string, len(view.Topics))
	ids := make(map[string][16]byte, len(view.Topics))
	for _, t := range view.Topics {
		id := topicID(t.ID)
		names[id], ids[t.Name] = t.Name, id
	}
	if req.Topics == nil {
		hb.OwnedUnchanged = true
	}
	for _, rt := range req.Topics {
		name, ok := names[rt.TopicID]
		if !ok {
			continue
		}
		for _, p := range rt.Partitions {
			hb.Owned = append(hb.Owned, broker.TopicPartition{Topic: name, Partition: p})
		}
	}

	ans, err := c.s.b.GroupHeartbeat(ctx, hb)
	if err != nil {
		e := groupCode(err)
		resp.ErrorCode, resp.ErrorMessage = e.Code, messageOf(err)
		return resp, nil
	}
	id := ans.MemberID
	resp.MemberID, resp.MemberEpoch = &id, ans.MemberEpoch
	resp.HeartbeatIntervalMillis = int32(ans.HeartbeatInterval / time.Millisecond)
	if ans.MemberEpoch == group.LeaveEpoch {
		return resp, nil
	}
	a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, tp := range ans.Assigned { // sorted by topic, then partition
		if n := len(a.Topics); n == 0 || a.Topics[n-1].TopicID != ids[tp.Topic] {
			t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			t.TopicID = ids[tp.Topic]
			a.Topics = append(a.Topics, t)
		}
		last := &a.Topics[len(a.Topics)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	resp.Assignment = &a
	return resp, nil
}
