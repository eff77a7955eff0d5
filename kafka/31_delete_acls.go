package kafka

// DeleteAcls, v1 to v3 (v0 left Kafka in 4.0, KIP-896): each filter
// (acls.go; MATCH as in DescribeAcls) picks stored ACLs from this
// broker's copy of the metadata, which broker.RemoveACLs then removes, on
// any broker (one that is not the controller passes it on; the call
// returns once this broker no longer has them). Each filter's result lists
// the bindings it matched. A filter value Kafka does not define is
// INVALID_REQUEST for that filter. Needs admin on the cluster
// (CLUSTER_AUTHORIZATION_FAILED).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

func handleDeleteACLs(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	denyCode, denied := c.authorize("DeleteAcls", security.ResourceCluster, broker.ClusterAdmin())
	stored := c.s.b.ACLs("")
	for _, rf := range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		fail := func(code int16, msg string) {
			r.ErrorCode, r.ErrorMessage = code, &msg
		}
		f := aclFilter{resource: rf.ResourceType, name: rf.ResourceName, pattern: rf.ResourcePatternType,
			principal: rf.Principal, host: rf.Host, op: rf.Operation, permission: rf.PermissionType}
		if denied != nil {
			fail(denyCode, denied.Error())
		} else if err := f.check(); err != nil {
			fail(kerr.InvalidRequest.Code, err.Error())
		} else {
			var matched []security.ACL
			for _, a := range stored {
				if f.matches(bindingOf(a)) {
					matched = append(matched, a)
				}
			}
			if len(matched) > 0 {
				if _, err := c.s.b.RemoveACLs(ctx, matched); err != nil {
					fail(codeOf(err), err.Error())
					matched = nil
				}
			}
			for _, a := range matched {
				b := bindingOf(a)
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName, m.ResourcePatternType = b.resource, b.name, b.pattern
				m.Principal, m.Host, m.Operation, m.PermissionType = b.principal, b.host, b.op, b.permission
				r.MatchingACLs = append(r.MatchingACLs, m)
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
