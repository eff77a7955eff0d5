package kafka

// FindCoordinator, v0 to v6: the broker a client talks to about a group.
//
// Every broker answers with itself. Groups are coordinated on the
// controller, and any broker serves a group request by passing it to the
// controller through the broker core, so the client's coordinator is
// simply the broker it asked, and a change of controller never sends it
// looking for a new one. Keys of type 0 (groups) only: a transactional
// coordinator (type 1) is COORDINATOR_NOT_AVAILABLE, since Strata has no
// transactions, and any other type is INVALID_REQUEST. An invalid group
// name is INVALID_GROUP_ID. v4+ asks for several keys at once and gets an
// answer per key; v0–v3 ask for one.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/cluster"
)

const (
	coordinatorGroup       = 0
	coordinatorTransaction = 1
)

func handleFindCoordinator(_ context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version < 4 {
		code, msg := c.coordinatorFor(req.CoordinatorType, req.CoordinatorKey)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		resp.NodeID, resp.Host, resp.Port = -1, "", -1
		if code == 0 {
			resp.NodeID, resp.Host, resp.Port = c.s.b.ID(), c.s.host, c.s.port
		}
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		k := kmsg.NewFindCoordinatorResponseCoordinator()
		k.Key = key
		k.ErrorCode, k.ErrorMessage = c.coordinatorFor(req.CoordinatorType, key)
		k.NodeID, k.Host, k.Port = -1, "", -1
		if k.ErrorCode == 0 {
			k.NodeID, k.Host, k.Port = c.s.b.ID(), c.s.host, c.s.port
		}
		resp.Coordinators = append(resp.Coordinators, k)
	}
	return resp, nil
}

// coordinatorFor says whether this broker coordinates key of type kind:
// 0 and no message when it does, else the error code and why.
func (c *conn) coordinatorFor(kind int8, key string) (int16, *string) {
	why := func(s string) *string { return &s }
	switch kind {
	case coordinatorGroup:
		if key == "" {
			return kerr.InvalidGroupID.Code, why("a consumer group name is required")
		}
		if err := cluster.ValidateGroupName(key); err != nil {
			return kerr.InvalidGroupID.Code, why(err.Error())
		}
		return 0, nil
	case coordinatorTransaction:
		return kerr.CoordinatorNotAvailable.Code, why("Strata has no transactions")
	default:
		return kerr.InvalidRequest.Code, why("unknown coordinator type")
	}
}
