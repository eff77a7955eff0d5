package kafka

// Produce, v0 to v12: each partition's records go to broker.Produce as
// they came (the stored batch is the client's, its header given offsets by
// the broker), with every check the broker makes (a batch is validated as
// a gRPC one is). Partitions of one request are produced concurrently and
// answered together.
//
// acks: 0, 1 and -1 are Strata's none, leader and all; any other value is
// INVALID_REQUIRED_ACKS for every partition, nothing written. The request's
// timeout bounds acks=all waits (0 means the broker's 30 s). With acks=0
// nothing is answered, and, as Kafka does, a refused partition closes the
// connection so the client notices.
//
// Errors per partition come from errors.go (one table): offsets and times
// -1, the broker's message in ErrorMessage (v8+); over the produce quota
// (THROTTLED) the wait is also the response's ThrottleMillis. A resend of
// an idempotent producer's batch is answered with the original offsets.
// v0 to v2 carry old message formats, which the broker refuses as corrupt
// (CORRUPT_MESSAGE); they are advertised because older clients look for
// v0. v13 (topics by id) is not served. Transactional produce is refused
// by the broker (TRANSACTIONS_NOT_SUPPORTED). With authentication, each
// topic needs write (auth.go): TOPIC_AUTHORIZATION_FAILED for its
// partitions otherwise, nothing written.

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/security"
)

func handleProduce(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	acks, acksOK := map[int16]broker.Acks{0: broker.AcksNone, 1: broker.AcksLeader, -1: broker.AcksAll}[req.Acks]
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := false
	for _, rt := range req.Topics {
		t := kmsg.NewProduceResponseTopic()
		t.Topic = rt.Topic
		t.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		denied := c.allowTopic("Produce", rt.Topic, security.OpWrite) // auth.go
		for i, rp := range rt.Partitions {
			p := &t.Partitions[i]
			*p = kmsg.NewProduceResponseTopicPartition()
			p.Partition = rp.Partition
			if !acksOK || denied != nil {
				p.ErrorCode = kerr.InvalidRequiredAcks.Code
				if denied != nil {
					p.ErrorCode, p.ErrorMessage = codeOf(denied), messageOf(denied)
				}
				p.BaseOffset, p.LogAppendTime, p.LogStartOffset = -1, -1, -1
				failed = true
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := c.s.b.Produce(ctx, broker.ProduceRequest{
					Topic:     rt.Topic,
					Partition: rp.Partition,
					Batch:     record.Batch(rp.Records),
					Acks:      acks,
					Timeout:   time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond,
				})
				if err != nil {
					p.ErrorCode, p.ErrorMessage = codeOf(err), messageOf(err)
					p.BaseOffset, p.LogAppendTime, p.LogStartOffset = -1, -1, -1
					mu.Lock()
					failed = true
					resp.ThrottleMillis = max(resp.ThrottleMillis, throttleOf(err))
					mu.Unlock()
					return
				}
				p.BaseOffset, p.LogAppendTime, p.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
			}()
		}
		resp.Topics = append(resp.Topics, t)
	}
	wg.Wait()
	c.s.produceLeaderHints(resp) // brokers.go
	if req.Acks == 0 {
		if failed {
			return nil, errCloseConnection
		}
		return nil, nil
	}
	return resp, nil
}

// throttleOf is how long a THROTTLED refusal asks the client to wait, in
// milliseconds; 0 for other errors.
func throttleOf(err error) int32 {
	var e *broker.Error
	if broker.ReasonOf(err) != broker.ReasonThrottled || !asBrokerError(err, &e) {
		return 0
	}
	return int32(min(e.RetryAfter.Milliseconds(), 1<<31-1))
}
