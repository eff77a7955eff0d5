package kafka

// LeaveGroup, v0 to v5: the member leaves and its partitions are free at
// once. v0-v2 name one member (the answer's error is its); v3+ name a
// batch, each answered on its own. A member the coordinator does not know
// is UNKNOWN_MEMBER_ID. Members named by group.instance.id (static
// membership) are not supported: INVALID_REQUEST for each.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/security"
)

func handleLeaveGroup(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if err := c.allowGroup("LeaveGroup", req.Group, security.OpRead); err != nil { // auth.go
		resp.ErrorCode = groupCodeOf(err)
		return resp, nil
	}
	if req.Version < 3 {
		resp.ErrorCode = groupCode(c.s.b.LeaveClassicGroup(ctx, req.Group, req.MemberID)).Code
		return resp, nil
	}
	for _, m := range req.Members {
		r := kmsg.NewLeaveGroupResponseMember()
		r.MemberID, r.InstanceID = m.MemberID, m.InstanceID
		if m.InstanceID != nil {
			r.ErrorCode = kerr.InvalidRequest.Code
		} else {
			r.ErrorCode = groupCode(c.s.b.LeaveClassicGroup(ctx, req.Group, m.MemberID)).Code
		}
		resp.Members = append(resp.Members, r)
	}
	return resp, nil
}
