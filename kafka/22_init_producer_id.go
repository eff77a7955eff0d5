package kafka

// InitProducerId, v0 to v5: an idempotent producer's identity, from
// broker.InitProducer: a producer id no other producer of the cluster has
// had, and epoch 0. The id and epoch a v3+ request names (a producer
// bumping its epoch after an error, KIP-360) are not continued: the
// producer gets a fresh id, which starts its sequences again just as a
// bumped epoch would.
//
// Transactions are not served: a request with a transactional id is
// refused at once with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and its
// message says Strata has no transactions, so a transactional producer
// fails clearly instead of waiting. Only the controller hands out ids, and
// any other broker passes the call on to it (broker/controller.go), so
// every broker answers. Should the controller move while the call is on
// its way, the answer is BROKER_NOT_AVAILABLE (retriable).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleInitProducerID(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	id, epoch, err := c.s.b.InitProducer(ctx)
	if err != nil {
		resp.ErrorCode = codeOf(err)
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, epoch
	return resp, nil
}
