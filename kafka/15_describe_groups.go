package kafka

// DescribeGroups, v0 to v6: each group's state and members
// (broker.DescribeGroup), as Kafka describes a KIP-848 consumer group to
// the classic API.
//
// Protocol type "consumer"; the protocol is the group's assignor (Strata's
// name: sticky, range or roundrobin), "" for a group without members.
// Each member has its id, client id and host; its metadata is a consumer
// protocol subscription (v0) of the topics it subscribes to, and its
// assignment a consumer protocol assignment (v0) of the partitions it
// owns now, as Kafka encodes them for consumer groups. No member has a
// group instance id (Strata has no static membership). Authorized
// operations (v3+) are not computed (Kafka's "not asked" value). State
// names are ListGroups' (16_list_groups.go). A classic group of another
// protocol type (Kafka Connect's) has its protocol type and the protocol
// its members chose, and members with empty metadata and assignments: the
// coordinator does not keep what it cannot read.
//
// A group with neither members nor committed offsets is "Dead", with
// GROUP_ID_NOT_FOUND from v6 (and a message) and no error before, as Kafka
// answers. An invalid group name is INVALID_GROUP_ID; other errors come
// from errors.go.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/security"
)

// authorizedOperationsNotAsked is Kafka's value for "not computed".
const authorizedOperationsNotAsked = -2147483648

func handleDescribeGroups(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group, g.AuthorizedOperations = name, authorizedOperationsNotAsked
		if err := cluster.ValidateGroupName(name); err != nil || name == "" {
			g.ErrorCode = kerr.InvalidGroupID.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		if err := c.allowGroup("DescribeGroups", name, security.OpRead); err != nil { // auth.go
			g.ErrorCode = groupCodeOf(err)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		d, err := c.s.b.DescribeGroup(ctx, name)
		switch {
		case broker.ReasonOf(err) == broker.ReasonGroupNotFound:
			g.State = "Dead"
			if req.Version >= 6 {
				g.ErrorCode, g.ErrorMessage = kerr.GroupIDNotFound.Code, messageOf(err)
			}
		case err != nil:
			g.ErrorCode = codeOf(err)
			if req.Version >= 6 {
				g.ErrorMessage = messageOf(err)
			}
		default:
			g.State, g.ProtocolType, g.Protocol = groupState(d.State), consumerProtocolType, d.Assignor
			if d.ProtocolType != "" {
				// A classic group of another protocol type: its members'
				// metadata and assignments are opaque to the coordinator,
				// which does not keep them.
				g.ProtocolType = d.ProtocolType
			}
			for _, m := range d.Members {
				dm := describedMember(m)
				if d.ProtocolType != "" {
					dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
				}
				g.Members = append(g.Members, dm)
			}
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

func describedMember(m group.MemberDescription) kmsg.DescribeGroupsResponseGroupMember {
	dm := kmsg.NewDescribeGroupsResponseGroupMember()
	dm.MemberID, dm.ClientID, dm.ClientHost = m.ID, m.ClientID, m.Host
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = m.Topics
	dm.ProtocolMetadata = meta.AppendTo(nil)
	asg := kmsg.NewConsumerMemberAssignment()
	for _, tp := range m.Owned {
		if n := len(asg.Topics); n == 0 || asg.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewConsumerMemberAssignmentTopic()
			t.Topic = tp.Topic
			asg.Topics = append(asg.Topics, t)
		}
		last := &asg.Topics[len(asg.Topics)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	dm.MemberAssignment = asg.AppendTo(nil)
	return dm
}
