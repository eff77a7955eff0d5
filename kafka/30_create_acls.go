package kafka

// CreateAcls, v1 to v3 (v0 left Kafka in 4.0, KIP-896): each binding is
// translated to a Strata ACL (acls.go) and stored by broker.AddACLs, on
// any broker (one that is not the controller passes it on; the call
// returns once this broker has it in force), each with its own result as
// Kafka answers them. A binding Strata cannot express (DENY, a host, an
// operation other than READ, WRITE and ALL, a resource type other than
// topic, group and cluster) is INVALID_REQUEST saying why; one the broker
// refuses (ACL.Validate: a bad principal, WRITE on a group) is
// INVALID_REQUEST with its message. Storing an ACL already stored is not
// an error. Needs admin on the cluster (CLUSTER_AUTHORIZATION_FAILED).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

func handleCreateACLs(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	denyCode, denied := c.authorize("CreateAcls", security.ResourceCluster, broker.ClusterAdmin())
	for _, cr := range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		fail := func(code int16, msg string) {
			r.ErrorCode, r.ErrorMessage = code, &msg
		}
		if denied != nil {
			fail(denyCode, denied.Error())
		} else if a, err := aclOf(binding{cr.ResourceType, cr.ResourceName, cr.ResourcePatternType, cr.Principal, cr.Host, cr.Operation, cr.PermissionType}); err != nil {
			fail(kerr.InvalidRequest.Code, err.Error())
		} else if err := c.s.b.AddACLs(ctx, []security.ACL{a}); err != nil {
			fail(codeOf(err), err.Error())
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
