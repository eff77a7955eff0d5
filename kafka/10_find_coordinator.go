package kafka

// FindCoordinator, v0 to v6: the broker a client talks to about a group.
//
// Groups are coordinated on the controller, so the answer is the
// controller, at the Kafka address it published (brokers.go), as a Kafka
// broker names the leader of the group's coordinator partition. A group
// call that reaches a broker that is no longer the controller (it moved)
// is NOT_COORDINATOR there, and the client asks again. While no
// controller is known the answer is COORDINATOR_NOT_AVAILABLE, which
// clients retry. A controller without a Kafka listener cannot be named:
// the broker asked names itself, and passes the calls it can on to the
// controller (KIP-848 heartbeats, offsets, group admin), but classic
// JoinGroup/SyncGroup/Heartbeat/LeaveGroup are then NOT_COORDINATOR: give
// every broker a Kafka listener.
//
// Keys of type 0 (groups) only: a transactional coordinator (type 1) is
// COORDINATOR_NOT_AVAILABLE, since Strata has no transactions, and any
// other type is INVALID_REQUEST. An invalid group name is
// INVALID_GROUP_ID. v4+ asks for several keys at once and gets an answer
// per key; v0–v3 ask for one.

import (
	"context"
	"errors"

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
	coord, ok := c.s.groupCoordinator()
	if req.Version < 4 {
		code, msg := c.coordinatorFor(req.CoordinatorType, req.CoordinatorKey, ok)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		resp.NodeID, resp.Host, resp.Port = -1, "", -1
		if code == 0 {
			resp.NodeID, resp.Host, resp.Port = coord.id, coord.host, coord.port
		}
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		k := kmsg.NewFindCoordinatorResponseCoordinator()
		k.Key = key
		k.ErrorCode, k.ErrorMessage = c.coordinatorFor(req.CoordinatorType, key, ok)
		k.NodeID, k.Host, k.Port = -1, "", -1
		if k.ErrorCode == 0 {
			k.NodeID, k.Host, k.Port = coord.id, coord.host, coord.port
		}
		resp.Coordinators = append(resp.Coordinators, k)
	}
	return resp, nil
}

// groupCoordinator is the Kafka endpoint of the controller, or of this
// broker when the controller has none; false while no controller is known.
func (s *Server) groupCoordinator() (endpoint, bool) {
	view := s.b.Cluster(nil)
	if view.ControllerID < 0 {
		return endpoint{}, false
	}
	brokers := s.kafkaBrokers(view)
	for _, e := range brokers {
		if e.id == view.ControllerID {
			return e, true
		}
	}
	return brokers[0], true // this broker (kafkaBrokers lists it first)
}

// coordinatorFor says whether key of type kind has a coordinator: 0 and no
// message when it does, else the error code and why.
func (c *conn) coordinatorFor(kind int8, key string, known bool) (int16, *string) {
	why := func(s string) *string { return &s }
	switch kind {
	case coordinatorGroup:
		if key == "" {
			return kerr.InvalidGroupID.Code, why("a consumer group name is required")
		}
		if err := cluster.ValidateGroupName(key); err != nil {
			return kerr.InvalidGroupID.Code, why(err.Error())
		}
		if !known {
			return kerr.CoordinatorNotAvailable.Code, why("no controller is known yet")
		}
		return 0, nil
	case coordinatorTransaction:
		return kerr.CoordinatorNotAvailable.Code, why("Strata has no transactions")
	default:
		return kerr.InvalidRequest.Code, why("unknown coordinator type")
	}
}

// groupCode is the Kafka code of a group call's refusal: NOT_COORDINATOR
// when it reached a broker that is not the controller and could not be
// passed on (the client finds the coordinator again), else as the
// heartbeat maps it.
func groupCode(err error) *kerr.Error {
	var nc *cluster.NotControllerError
	if errors.As(err, &nc) {
		return kerr.NotCoordinator
	}
	return heartbeatCode(err)
}
