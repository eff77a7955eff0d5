package kafka

// DescribeCluster, v0 to v2: the cluster as Metadata shows it: this broker
// only, at its Kafka address (brokers do not publish their Kafka addresses
// yet, see 03_metadata.go), named as the controller (it passes controller
// work on), never fenced; the cluster id is the cluster's name
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
	self := kmsg.NewDescribeClusterResponseBroker()
	self.NodeID, self.Host, self.Port = c.s.b.ID(), c.s.host, c.s.port
	for _, bv := range c.s.b.Cluster(nil).Brokers {
		if bv.ID == self.NodeID && bv.Rack != "" {
			rack := bv.Rack
			self.Rack = &rack
		}
	}
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{self}
	return resp, nil
}
