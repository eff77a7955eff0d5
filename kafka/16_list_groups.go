package kafka

// ListGroups, v0 to v5: every consumer group the coordinator knows, those
// with members and those with only committed offsets (broker.ListGroups).
//
// A Strata consumer group (KIP-848 and classic consumer members alike) is
// protocol type "consumer", group type "consumer" (v5+). States (v4+) are
// Kafka's names for a consumer group's: Empty (no members, committed
// offsets only), Reconciling (partitions are moving between members) and
// Stable; Strata has no Assigning step (the target is computed within the
// heartbeat that changes it) and no Dead groups in a listing. A classic
// group of another protocol type (Kafka Connect's) is listed with its
// protocol type, group type "classic", and states PreparingRebalance,
// CompletingRebalance or Stable. The states filter (v4+)
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

// groupType is the Kafka group type of Strata's consumer groups, and
// classicGroupType that of classic groups of other protocol types
// (Kafka Connect's; group/classic_group.go).
const (
	groupType        = "consumer"
	classicGroupType = "classic"
)

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
	for _, g := range groups {
		state := groupState(g.State)
		protocolType, typ := consumerProtocolType, groupType
		if g.ProtocolType != "" { // a classic group of another protocol type
			protocolType, typ = g.ProtocolType, classicGroupType
		}
		if !matches(req.StatesFilter, state) || !matches(req.TypesFilter, typ) ||
			c.allowGroup("ListGroups", g.Group, security.OpRead) != nil {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.Group, protocolType, state, typ
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
	case group.StatePreparingRebalance:
		return "PreparingRebalance"
	case group.StateCompletingRebalance:
		return "CompletingRebalance"
	}
	return "Unknown"
}
