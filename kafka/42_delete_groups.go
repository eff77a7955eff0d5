package kafka

// DeleteGroups, v0 to v2: remove groups and their committed offsets
// (broker.DeleteGroup, never forced). A group with members is
// NON_EMPTY_GROUP and keeps everything; one with neither members nor
// committed offsets is GROUP_ID_NOT_FOUND; an invalid name is
// INVALID_GROUP_ID. Each group is answered on its own, in the order asked.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/cluster"
)

func handleDeleteGroups(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = name
		if err := cluster.ValidateGroupName(name); err != nil || name == "" {
			g.ErrorCode = kerr.InvalidGroupID.Code
		} else if _, err := c.s.b.DeleteGroup(ctx, name, false); err != nil {
			g.ErrorCode = codeOf(err)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}
