package kafka

// CreatePartitions, v0 to v3: each topic through broker.AddPartitions, on
// any broker (a broker that is not the controller passes it on), in
// request order. Kafka's rules and codes:
//
//   - Each topic needs admin on it (TOPIC_AUTHORIZATION_FAILED); a name
//     given twice is INVALID_REQUEST for each; an unknown topic is
//     UNKNOWN_TOPIC_OR_PARTITION.
//   - The count must be above the topic's current one and at most
//     cluster.MaxPartitions: INVALID_PARTITIONS otherwise.
//   - Assignments are honoured: one replica list per new partition, each
//     as long as the topic's replication factor, of registered brokers,
//     the first leading; otherwise INVALID_REPLICA_ASSIGNMENT. Without
//     them Strata places the new partitions as it places a new topic's,
//     and a replication factor above the brokers registered is
//     INVALID_REPLICATION_FACTOR.
//   - validate_only answers as the change would (broker.ValidateAddPartitions)
//     and changes nothing.
//   - timeout_ms bounds the wait for each topic (REQUEST_TIMED_OUT after
//     it; the partitions may still come); 0 or less means the listener's
//     request timeout.
//
// Clients see the new partitions in Metadata once their broker has them;
// a producer's partitioner then maps keys over the new count.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

func handleCreatePartitions(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	count := map[string]int{}
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	for _, rt := range req.Topics {
		t := kmsg.NewCreatePartitionsResponseTopic()
		t.Topic = rt.Topic
		if code, msg := createPartitions(ctx, c, req, rt, count[rt.Topic]); code != 0 {
			t.ErrorCode, t.ErrorMessage = code, &msg
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// createPartitions adds (or validates adding) one topic's partitions: 0
// when done, else the code and message that refuse it.
func createPartitions(ctx context.Context, c *conn, req *kmsg.CreatePartitionsRequest, rt kmsg.CreatePartitionsRequestTopic, named int) (int16, string) {
	if named > 1 {
		return kerr.InvalidRequest.Code, fmt.Sprintf("topic %q is named more than once in this request", rt.Topic)
	}
	if code, err := c.authorize("CreatePartitions", security.ResourceTopic, broker.TopicNeed(rt.Topic, security.OpAdmin)); err != nil {
		return code, err.Error()
	}
	var assignment [][]int32
	if rt.Assignment != nil {
		assignment = make([][]int32, len(rt.Assignment))
		for i, a := range rt.Assignment {
			assignment[i] = a.Replicas
		}
	}
	if req.ValidateOnly {
		if err := c.s.b.ValidateAddPartitions(rt.Topic, rt.Count, assignment); err != nil {
			return createPartitionsCode(err), err.Error()
		}
		return 0, ""
	}
	if req.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	if _, err := c.s.b.AddPartitions(ctx, rt.Topic, rt.Count, assignment); err != nil {
		return createPartitionsCode(err), err.Error()
	}
	return 0, ""
}

// createPartitionsCode refines the one error table with the codes Kafka
// gives an increase: which field of the request was at fault.
func createPartitionsCode(err error) int16 {
	var be *broker.Error
	if errors.As(err, &be) {
		switch {
		case be.Meta["field"] == "partitions":
			return kerr.InvalidPartitions.Code
		case be.Meta["field"] == "assignment":
			return kerr.InvalidReplicaAssignment.Code
		case be.Reason == broker.ReasonInvalidConfig && be.Meta["key"] == "replication.factor":
			return kerr.InvalidReplicationFactor.Code
		}
	}
	return codeOf(err)
}
