package kafka

// Heartbeat, v0 to v4. For a classic member of a consumer group: keeps its
// session, and answers REBALANCE_IN_PROGRESS when its assignment is to
// change (it must give a partition up, or may take one it lacks), which
// makes the client join again to hear it (a cooperative client keeps
// consuming meanwhile; an eager one gives everything up first). A member
// told to give a partition up that does not join again without it within
// its rebalance timeout is removed. UNKNOWN_MEMBER_ID for a member the
// coordinator does not know (its session expired: it lost its partitions
// and joins again), ILLEGAL_GENERATION for a generation not its own.
// Static membership (group.instance.id) is not supported: INVALID_REQUEST.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/security"
)

func handleHeartbeat(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if req.InstanceID != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	if err := c.allowGroup("Heartbeat", req.Group, security.OpRead); err != nil { // auth.go
		resp.ErrorCode = groupCodeOf(err)
		return resp, nil
	}
	resp.ErrorCode = groupCode(c.s.b.HeartbeatClassicGroup(ctx, req.Group, req.MemberID, req.Generation)).Code
	return resp, nil
}
