package kafka

// SyncGroup, v0 to v5.
//
// For a classic member of a consumer group (11_join_group.go): the
// assignment its join was answered, encoded as a consumer protocol
// assignment (kmsg.ConsumerMemberAssignment) of the member's subscription
// version. Assignments the request carries are ignored, as the coordinator
// assigns.
//
// For a member of a classic group of another protocol type (Kafka
// Connect's): the leader's request carries every member's assignment; each
// member's answer is its own, once the leader's has come (a member's
// request waits for it). REBALANCE_IN_PROGRESS when a rebalance began
// meanwhile.
//
// Either way the generation must be the member's (ILLEGAL_GENERATION), the
// member known (UNKNOWN_MEMBER_ID), and v5's protocol type and name those
// it joined with (INCONSISTENT_GROUP_PROTOCOL). Static membership
// (group.instance.id) is not supported: INVALID_REQUEST.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/security"
)

func handleSyncGroup(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SyncGroupRequest)
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.MemberAssignment = []byte{}
	if req.InstanceID != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	if err := c.allowGroup("SyncGroup", req.Group, security.OpRead); err != nil { // auth.go
		resp.ErrorCode = groupCodeOf(err)
		return resp, nil
	}
	s := group.ClassicSync{Group: req.Group, MemberID: req.MemberID, Generation: req.Generation,
		ProtocolType: req.ProtocolType, Protocol: req.Protocol}
	if len(req.GroupAssignment) > 0 {
		s.Assignments = make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			s.Assignments[a.MemberID] = a.MemberAssignment
		}
	}
	a, err := c.s.b.SyncClassicGroup(ctx, s)
	if err != nil {
		resp.ErrorCode = groupCode(err).Code
		return resp, nil
	}
	resp.ProtocolType, resp.Protocol = &a.ProtocolType, &a.Protocol
	if a.Consumer != nil {
		resp.MemberAssignment = consumerAssignment(*a.Consumer)
	} else {
		resp.MemberAssignment = a.Assignment
	}
	return resp, nil
}

// consumerAssignment encodes a classic member's assignment in the consumer
// protocol, at the version of its subscription (the fields are the same in
// every version).
func consumerAssignment(a group.ClassicAssignment) []byte {
	ca := kmsg.NewConsumerMemberAssignment()
	ca.Version = a.Version
	for _, tp := range a.Assigned {
		if n := len(ca.Topics); n == 0 || ca.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewConsumerMemberAssignmentTopic()
			t.Topic = tp.Topic
			ca.Topics = append(ca.Topics, t)
		}
		t := &ca.Topics[len(ca.Topics)-1]
		t.Partitions = append(t.Partitions, tp.Partition)
	}
	return ca.AppendTo(nil)
}
