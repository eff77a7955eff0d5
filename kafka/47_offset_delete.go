package kafka

// OffsetDelete, v0: remove some of a group's committed offsets
// (broker.DeleteOffsets), as kadm's DeleteOffsets and
// kafka-consumer-groups --delete-offsets do.
//
// The partitions of a topic that a member of the group subscribes to now
// keep their offsets and answer GROUP_SUBSCRIBED_TO_TOPIC, as Kafka
// answers for a consumer group; the check and the deletion happen under
// the group's lock. The others' offsets are removed in one write; a
// partition never committed, or of a topic that does not exist, is no
// error (there is nothing to remove). A group with neither members nor
// committed offsets is GROUP_ID_NOT_FOUND and an invalid group name
// INVALID_GROUP_ID, for the whole request (the top-level code); other
// errors come from errors.go, also for the whole request.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/cluster"
)

func handleOffsetDelete(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if err := cluster.ValidateGroupName(req.Group); err != nil || req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	var tps []broker.TopicPartition
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			tps = append(tps, broker.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
		}
	}
	inUse, err := c.s.b.DeleteOffsets(ctx, req.Group, tps)
	if err != nil {
		resp.ErrorCode = codeOf(err)
		return resp, nil
	}
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetDeleteResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetDeleteResponseTopicPartition()
			p.Partition = rp.Partition
			if slices.Contains(inUse, rt.Topic) {
				p.ErrorCode = kerr.GroupSubscribedToTopic.Code
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
