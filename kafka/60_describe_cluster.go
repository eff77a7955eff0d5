package kafka

// DescribeCluster, v0 to v2: the cluster as Metadata shows it: every live
// broker with a Kafka listener at its Kafka address (brokers.go), this one
// named as the controller (it passes controller work on), never fenced; the cluster id is the cluster's name
// (security.cluster_name, "strata" by default). Authorized operations are
// not computed (Kafka's "not asked" value). endpoint_type 2 (controllers)
// is UNSUPPORTED_ENDPOINT_TYPE, as on a Kafka broker: Strata's controller
// is one of the brokers, reached through them. Any authenticated caller may
// ask, as for the gRPC ClusterStatus.

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/security"
)

func handleDescribeCluster(_ context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = 1
	resp.ClusterAuthorizedOperations = math.MinInt32
	resp.ControllerID = -1
	fail := func(code int16, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp, nil
	}
	if code, err := c.authorize("DescribeCluster", security.ResourceCluster); err != nil {
		return fail(code, err.Error())
	}
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.EndpointType = req.EndpointType
		return fail(kerr.UnsupportedEndpointType.Code, "Strata brokers describe brokers only (endpoint type 1): the controller is one of them")
	}
	resp.ClusterID = c.s.b.Settings().Security.ClusterName
	resp.ControllerID = c.s.b.ID()
	for _, e := range c.s.kafkaBrokers(c.s.b.Cluster(nil)) { // as Metadata: brokers.go
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port, db.Rack = e.id, e.host, e.port, e.rack
		resp.Brokers = append(resp.Brokers, db)
	}
	return resp, nil
}
