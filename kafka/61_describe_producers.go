package kafka

// DescribeProducers, v0: the idempotent producers each partition asked
// for remembers (broker.Producers, the leader's producer state,
// broker/producers.go): id, epoch, the last sequence written. Only the
// leader answers; another broker is NOT_LEADER_OR_FOLLOWER, an unknown
// topic or partition UNKNOWN_TOPIC_OR_PARTITION. last_timestamp is the
// latest batch's log-append time, -1 under CreateTime (the state keeps no
// producer timestamps); coordinator_epoch and current_txn_start_offset are
// -1 (no transactions). Needs read on the topic
// (TOPIC_AUTHORIZATION_FAILED), as fetching it does.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

func handleDescribeProducers(_ context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewDescribeProducersResponseTopic()
		t.Topic = rt.Topic
		code, denied := c.authorize("DescribeProducers", security.ResourceTopic, broker.TopicNeed(rt.Topic, security.OpRead))
		for _, partition := range rt.Partitions {
			p := kmsg.NewDescribeProducersResponseTopicPartition()
			p.Partition = partition
			if denied != nil {
				p.ErrorCode, p.ErrorMessage = code, messageOf(denied)
				t.Partitions = append(t.Partitions, p)
				continue
			}
			producers, err := c.s.b.Producers(rt.Topic, partition)
			if err != nil {
				p.ErrorCode, p.ErrorMessage = codeOf(err), messageOf(err)
			}
			for _, pv := range producers {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence, ap.LastTimestamp = pv.ID, int32(pv.Epoch), pv.LastSequence, pv.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = -1, -1
				p.ActiveProducers = append(p.ActiveProducers, ap)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
