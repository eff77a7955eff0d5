package kafka

// CreateTopics, v2 to v7 (v0 and v1 left Kafka in 4.0, KIP-896): each
// topic through broker.CreateTopic, on any broker (a broker that is not
// the controller passes it on), in request order.
//
//   - num_partitions -1 and replication_factor -1 mean the broker's
//     defaults (1 partition; the replication.factor setting); 0 or below
//     -1 is INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR.
//   - Manual replica assignments are INVALID_REPLICA_ASSIGNMENT: Strata
//     places replicas itself.
//   - Settings go to the broker under their names (configs.go): one Strata
//     lacks is INVALID_CONFIG naming it, never a silent default.
//   - A name given twice in one request is INVALID_REQUEST for each.
//   - validate_only answers as a create would (broker.ValidateCreateTopic,
//     TOPIC_ALREADY_EXISTS included) and creates nothing.
//   - timeout_ms bounds the wait for each creation (REQUEST_TIMED_OUT
//     after it; the topic may still come); 0 or less means the listener's
//     request timeout, not "do not wait".
//   - Each topic needs admin on it (TOPIC_AUTHORIZATION_FAILED).
//
// A created topic's answer carries its id (v7: the 16 bytes Metadata
// gives), partitions, replication factor and settings (v5+).

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

func handleCreateTopics(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	count := map[string]int{}
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	for _, rt := range req.Topics {
		t := kmsg.NewCreateTopicsResponseTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = rt.Topic, -1, -1
		fail := func(code int16, msg string) {
			t.ErrorCode, t.ErrorMessage = code, &msg
		}
		if count[rt.Topic] > 1 {
			fail(kerr.InvalidRequest.Code, fmt.Sprintf("topic %q is named more than once in this request", rt.Topic))
			resp.Topics = append(resp.Topics, t)
			continue
		}
		if code, err := c.authorize("CreateTopics", security.ResourceTopic, broker.TopicNeed(rt.Topic, security.OpAdmin)); err != nil {
			fail(code, err.Error())
			resp.Topics = append(resp.Topics, t)
			continue
		}
		d, code, msg := createTopic(ctx, c, req, rt)
		if code != 0 {
			fail(code, msg)
			resp.Topics = append(resp.Topics, t)
			continue
		}
		if d.Name != "" { // created, not validated only
			t.TopicID = topicID(d.ID)
			t.NumPartitions = int32(len(d.Partitions))
			if len(d.Partitions) > 0 {
				t.ReplicationFactor = int16(len(d.Partitions[0].Replicas))
			}
			for _, e := range topicConfigs(c.s.b.TopicDefaults(), d) {
				tc := kmsg.NewCreateTopicsResponseTopicConfig()
				v := e.value
				tc.Name, tc.Value, tc.ReadOnly, tc.Source = e.name, &v, e.readOnly, int8(e.source)
				t.Configs = append(t.Configs, tc)
			}
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// createTopic creates (or validates) one topic: its description when
// created, an empty one when only validated, or the code and message that
// refuse it.
func createTopic(ctx context.Context, c *conn, req *kmsg.CreateTopicsRequest, rt kmsg.CreateTopicsRequestTopic) (broker.TopicDescription, int16, string) {
	var none broker.TopicDescription
	partitions, rf := rt.NumPartitions, int32(rt.ReplicationFactor)
	switch {
	case partitions == -1:
		partitions = 0 // the broker's default
	case partitions < 1:
		return none, kerr.InvalidPartitions.Code, fmt.Sprintf("num_partitions %d: want 1 or more, or -1 for the default", partitions)
	}
	switch {
	case rf == -1:
		rf = 0 // the replication.factor setting
	case rf < 1:
		return none, kerr.InvalidReplicationFactor.Code, fmt.Sprintf("replication_factor %d: want 1 or more, or -1 for the default", rf)
	}
	if len(rt.ReplicaAssignment) > 0 {
		return none, kerr.InvalidReplicaAssignment.Code, "manual replica assignment is not supported: Strata places replicas itself; give num_partitions and replication_factor instead"
	}
	names := make([]string, len(rt.Configs))
	values := make([]*string, len(rt.Configs))
	for i, cfg := range rt.Configs {
		names[i], values[i] = cfg.Name, cfg.Value
	}
	overrides, refusal := topicSettings(names, values)
	if refusal != nil {
		return none, refusal.code, refusal.msg
	}
	if req.ValidateOnly {
		if err := c.s.b.ValidateCreateTopic(rt.Topic, partitions, rf, overrides); err != nil {
			return none, codeOf(err), err.Error()
		}
		return none, 0, ""
	}
	if req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	d, err := c.s.b.CreateTopic(ctx, rt.Topic, partitions, rf, overrides)
	if err != nil {
		return none, codeOf(err), err.Error()
	}
	return d, 0, ""
}
