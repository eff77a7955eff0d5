package kafka

// DescribeAcls, v1 to v3 (v0 left Kafka in 4.0, KIP-896): the stored ACLs
// (broker.ACLs, this broker's copy of the metadata) as Kafka bindings
// (acls.go) that pass the filter, grouped by resource and pattern. MATCH
// finds every binding that applies to the resource named. A filter value
// Kafka does not define is INVALID_REQUEST. Needs admin on the cluster,
// as the gRPC ListACLs does (CLUSTER_AUTHORIZATION_FAILED).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

func handleDescribeACLs(_ context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	fail := func(code int16, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp, nil
	}
	if code, err := c.authorize("DescribeAcls", security.ResourceCluster, broker.ClusterAdmin()); err != nil {
		return fail(code, err.Error())
	}
	f := aclFilter{resource: req.ResourceType, name: req.ResourceName, pattern: req.ResourcePatternType,
		principal: req.Principal, host: req.Host, op: req.Operation, permission: req.PermissionType}
	if err := f.check(); err != nil {
		return fail(kerr.InvalidRequest.Code, err.Error())
	}
	type resource struct {
		typ     kmsg.ACLResourceType
		name    string
		pattern kmsg.ACLResourcePatternType
	}
	index := map[resource]int{}
	for _, a := range c.s.b.ACLs("") {
		b := bindingOf(a)
		if !f.matches(b) {
			continue
		}
		key := resource{b.resource, b.name, b.pattern}
		i, ok := index[key]
		if !ok {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = b.resource, b.name, b.pattern
			resp.Resources = append(resp.Resources, r)
			i = len(resp.Resources) - 1
			index[key] = i
		}
		acl := kmsg.NewDescribeACLsResponseResourceACL()
		acl.Principal, acl.Host, acl.Operation, acl.PermissionType = b.principal, b.host, b.op, b.permission
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, acl)
	}
	return resp, nil
}
