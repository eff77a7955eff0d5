package kafka

// CreatePartitions, v0 to v3: Strata cannot add partitions to a topic (a
// topic keeps the partition count it was created with), so every topic is
// answered INVALID_PARTITIONS with a message saying so; nothing changes,
// validate_only or not. The usual checks come first, so a client learns
// the most specific answer: admin on the topic
// (TOPIC_AUTHORIZATION_FAILED), the topic exists
// (UNKNOWN_TOPIC_OR_PARTITION), a name given twice (INVALID_REQUEST), and
// a count not above the current one (INVALID_PARTITIONS, as Kafka says).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

func handleCreatePartitions(_ context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	count := map[string]int{}
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	for _, rt := range req.Topics {
		t := kmsg.NewCreatePartitionsResponseTopic()
		t.Topic = rt.Topic
		code, msg := createPartitions(c, rt, count[rt.Topic])
		t.ErrorCode, t.ErrorMessage = code, &msg
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

func createPartitions(c *conn, rt kmsg.CreatePartitionsRequestTopic, named int) (int16, string) {
	if named > 1 {
		return kerr.InvalidRequest.Code, fmt.Sprintf("topic %q is named more than once in this request", rt.Topic)
	}
	if code, err := c.authorize("CreatePartitions", security.ResourceTopic, broker.TopicNeed(rt.Topic, security.OpAdmin)); err != nil {
		return code, err.Error()
	}
	d, err := c.s.b.DescribeTopic(rt.Topic)
	if err != nil {
		return codeOf(err), err.Error()
	}
	if have := int32(len(d.Partitions)); rt.Count <= have {
		return kerr.InvalidPartitions.Code, fmt.Sprintf("topic %q has %d partitions; the count asked for, %d, must be more", rt.Topic, have, rt.Count)
	}
	return kerr.InvalidPartitions.Code, fmt.Sprintf("Strata cannot add partitions to an existing topic: %q keeps its %d partitions (create a new topic with more)", rt.Topic, len(d.Partitions))
}
