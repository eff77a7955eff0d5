package kafka

// ConsumerGroupDescribe, v0 to v1: each KIP-848 group's state, epochs,
// assignor and members (broker.DescribeGroup), whichever front end its
// members joined through.
//
// State names are ListGroups' (Empty, Reconciling, Stable). The group
// epoch is the coordinator's, bumped whenever it computes a new target
// assignment, so the assignment epoch is the same number. Each member has
// its id, member epoch, client id and host, subscribed topic names (never
// a regex), its assignment (the partitions it owns now, including any it
// has been asked to give up) and its target assignment (what it is to own
// once partitions finish moving), topics by id and name; member type (v1)
// is 1 for a consumer-protocol member, 0 for a classic (JoinGroup) one.
// No instance or rack ids. Authorized
// operations are not computed (Kafka's "not asked" value) even when asked
// for.
//
// A group with neither members nor committed offsets is GROUP_ID_NOT_FOUND;
// one with committed offsets only is Empty with no members (every Strata
// group is a consumer group). An invalid name is INVALID_GROUP_ID; other
// errors come from errors.go.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/security"
)

// consumerMemberType is ConsumerGroupDescribe's member type of a KIP-848
// member, classicMemberType of a classic (JoinGroup) one.
const (
	consumerMemberType = 1
	classicMemberType  = 0
)

func handleConsumerGroupDescribe(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	var ids map[string][16]byte
	for _, name := range req.Groups {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group = name
		if err := cluster.ValidateGroupName(name); err != nil || name == "" {
			g.ErrorCode = kerr.InvalidGroupID.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		if err := c.allowGroup("ConsumerGroupDescribe", name, security.OpRead); err != nil { // auth.go
			g.ErrorCode, g.ErrorMessage = groupCodeOf(err), messageOf(err)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		d, err := c.s.b.DescribeGroup(ctx, name)
		if err != nil {
			g.ErrorCode, g.ErrorMessage = codeOf(err), messageOf(err)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		if ids == nil {
			ids = map[string][16]byte{}
			for _, t := range c.s.b.Cluster(nil).Topics {
				ids[t.Name] = topicID(t.ID)
			}
		}
		g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = groupState(d.State), d.Epoch, d.Epoch, d.Assignor
		for _, m := range d.Members {
			dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			dm.MemberID, dm.MemberEpoch, dm.ClientID, dm.ClientHost = m.ID, m.Epoch, m.ClientID, m.Host
			dm.SubscribedTopics = m.Topics
			if dm.SubscribedTopics == nil {
				dm.SubscribedTopics = []string{}
			}
			dm.MemberType = consumerMemberType
			if m.ClassicProtocol != "" {
				dm.MemberType = classicMemberType
			}
			dm.Assignment = describedAssignment(m.Owned, ids)
			dm.TargetAssignment = describedAssignment(targetOf(m), ids)
			g.Members = append(g.Members, dm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil
}

// targetOf is what a member is to own: what it owns and keeps, and what
// it waits for.
func targetOf(m group.MemberDescription) []group.TopicPartition {
	revoking := map[group.TopicPartition]bool{}
	for _, tp := range m.Revoking {
		revoking[tp] = true
	}
	var out []group.TopicPartition
	for _, tp := range m.Owned {
		if !revoking[tp] {
			out = append(out, tp)
		}
	}
	out = append(out, m.Pending...)
	group.SortPartitions(out)
	return out
}

func describedAssignment(tps []group.TopicPartition, ids map[string][16]byte) kmsg.Assignment {
	a := kmsg.NewAssignment()
	a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	for _, tp := range tps { // sorted by topic, then partition
		if n := len(a.TopicPartitions); n == 0 || a.TopicPartitions[n-1].Topic != tp.Topic {
			t := kmsg.NewAssignmentTopicPartition()
			t.Topic, t.TopicID = tp.Topic, ids[tp.Topic]
			a.TopicPartitions = append(a.TopicPartitions, t)
		}
		last := &a.TopicPartitions[len(a.TopicPartitions)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	return a
}
