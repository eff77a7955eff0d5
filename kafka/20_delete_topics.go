package kafka

// DeleteTopics, v1 to v6 (v0 left Kafka in 4.0, KIP-896): each topic
// through broker.DeleteTopic, on any broker (one that is not the
// controller passes it on), in request order; the call returns once this
// broker no longer has the topic. Its data goes from every broker, and its
// cold tier in the background.
//
// Topics are named by name (v1 to v5), or by name or id (v6+: a topic id
// no topic has is UNKNOWN_TOPIC_ID; both or neither is INVALID_REQUEST).
// An unknown name is UNKNOWN_TOPIC_OR_PARTITION. timeout_ms bounds each
// deletion as in CreateTopics. Each topic needs admin on it
// (TOPIC_AUTHORIZATION_FAILED).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

func handleDeleteTopics(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	asked := req.Topics
	if req.Version < 6 {
		asked = nil
		for _, name := range req.TopicNames {
			asked = append(asked, kmsg.DeleteTopicsRequestTopic{Topic: &name})
		}
	}
	var byID map[[16]byte]string
	for _, rt := range asked {
		t := kmsg.NewDeleteTopicsResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		fail := func(code int16, msg string) {
			t.ErrorCode, t.ErrorMessage = code, &msg
		}
		name := ""
		switch {
		case rt.Topic != nil && rt.TopicID != [16]byte{}:
			fail(kerr.InvalidRequest.Code, "name a topic by its name or by its id, not both")
		case rt.Topic != nil:
			name = *rt.Topic
		case rt.TopicID == [16]byte{}:
			fail(kerr.InvalidRequest.Code, "a topic needs a name or an id")
		default:
			if byID == nil {
				byID = topicNames(c.s.b)
			}
			n, ok := byID[rt.TopicID]
			if !ok {
				fail(kerr.UnknownTopicID.Code, "no topic has this id")
				break
			}
			name, t.Topic = n, &n
		}
		if name != "" {
			if code, err := c.authorize("DeleteTopics", security.ResourceTopic, broker.TopicNeed(name, security.OpAdmin)); err != nil {
				fail(code, err.Error())
			} else if err := deleteTopic(ctx, c, name, req.TimeoutMillis); err != nil {
				fail(codeOf(err), err.Error())
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

func deleteTopic(ctx context.Context, c *conn, name string, timeoutMs int32) error {
	if timeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(timeoutMs)*time.Millisecond)
		defer cancel()
	}
	return c.s.b.DeleteTopic(ctx, name)
}
