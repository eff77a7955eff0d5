package kafka

// ListGroups, v0 to v5: every consumer group the coordinator knows, those
// with members and those with only committed offsets (broker.ListGroups).
//
// Every Strata group is a KIP-848 "consumer" group: protocol type
// "consumer", group type "consumer" (v5+). States (v4+) are Kafka's names
// for a consumer group's: Empty (no members, committed offsets only),
// Reconciling (partitions are moving between members) and Stable; Strata
// has no Assigning step (the target is computed within the heartbeat that
// changes it) and no Dead groups in a listing. The states filter (v4+)
// and types filter (v5+) match case-insensitively, as Kafka's do; an empty
// filter matches every group. Errors (the controller is not reachable, for
// one) come from errors.go as the request's error code.

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/security"
)

// groupType is the Kafka group type of every Strata group.
const groupType = "consumer"

// consumerProtocolType is what Kafka calls the protocol of consumer groups.
const consumerProtocolType = "consumer"

func handleListGroups(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	groups, err := c.s.b.ListGroups(ctx)
	if err != nil {
		resp.ErrorCode = codeOf(err)
		return resp, nil
	}
	matches := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	if !matches(req.TypesFilter, groupType) {
		return resp, nil
	}
	for _, g := range groups {
		state := groupState(g.State)
		if !matches(req.StatesFilter, state) || c.allowGroup("ListGroups", g.Group, security.OpRead) != nil {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.Group, consumerProtocolType, state, groupType
		resp.Groups = append(resp.Groups, lg)
	}
	return resp, nil
}

// groupState is Kafka's name for a Strata group state.
func groupState(s string) string {
	switch s {
	case group.StateEmpty:
		return "Empty"
	case group.StateStable:
		return "Stable"
	case group.StateReconciling:
		return "Reconciling"
	}
	return "Unknown"
}
