package kafka

// Authorization of the admin APIs: each handler says what a request needs,
// as the gRPC front end's rules do for its calls (rpc/auth.go), and asks
// the broker's Auth (broker/authz.go), so one copy of the rules serves
// both front ends. The needs are the gRPC ones for the same work: admin on
// a topic to create, delete or alter it; any permission on it to describe
// its settings; read on it to see its producers; admin on the cluster for
// ACLs, broker settings and log dirs; an authenticated caller for
// DescribeCluster (as ClusterStatus).
//
// A refusal is answered with Kafka's code for the kind of resource:
// TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED, or, for an anonymous
// caller, the error table's code for UNAUTHENTICATED. Without
// Config.Auth every request is allowed.

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

// authorize returns nil when the caller may make call, which needs
// needs, else the Kafka code refusing it, for a resource of kind r.
func (c *conn) authorize(call string, r security.ResourceType, needs ...broker.Need) (int16, error) {
	if c.s.cfg.Auth == nil {
		return 0, nil
	}
	err := c.s.cfg.Auth.Authorize(c.auth.p, call, broker.Needs(needs...))
	return authCode(err, r), err
}

// authCode is the code of an authorization refusal of a request on a
// resource of kind r.
func authCode(err error, r security.ResourceType) int16 {
	if broker.ReasonOf(err) != broker.ReasonPermissionDenied {
		return codeOf(err)
	}
	switch r {
	case security.ResourceCluster:
		return kerr.ClusterAuthorizationFailed.Code
	case security.ResourceGroup:
		return kerr.GroupAuthorizationFailed.Code
	}
	return kerr.TopicAuthorizationFailed.Code
}
