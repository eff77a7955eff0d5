package client

// Idempotence (WithIdempotence): the producer asks the cluster for a
// producer id once, lazily, when it first sends a batch, and stamps every
// batch with the id, its epoch and the sequence number of the batch's first
// record in its partition. The sequence is fixed when the batch is first
// sent (sequences of a partition follow the order batches are sent in, and a
// batch that never leaves uses none) and every retry resends the same
// bytes, so the leader recognises a batch it already wrote and answers with
// its original offsets (ProduceResponse.duplicate).
//
// A stamped batch that fails for good leaves its partition's sequence in
// doubt (the leader may or may not have written it, and the next batch would
// either follow it or leave a gap), so the producer drops its id and takes a
// new one, whose sequences start again at 0, for the batches it sends next.

import (
	"context"
	"math"
	"sync"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"google.golang.org/grpc/codes"
)

// identity is an idempotent producer's id and epoch.
type identity struct {
	id    int64
	epoch int16
}

// noIdentity: the producer has no id (yet, or any more).
var noIdentity = identity{id: -1, epoch: -1}

// idempotence is a Producer's identity, and the request for one under way.
type idempotence struct {
	mu   sync.Mutex
	cur  identity
	call *initCall
}

// initCall is one InitProducer request, which every sender that needs an
// identity meanwhile waits for.
type initCall struct {
	done chan struct{}
	id   identity
	err  error
}

// sequence is what a partition's next batch is stamped with.
type sequence struct {
	producer int64 // the id next counts for
	next     int32
}

// stamp gives a batch, the first time it is sent, the producer's identity
// and the partition's next sequence number. It does nothing without
// idempotence or for a batch stamped before.
func (p *Producer) stamp(ctx context.Context, pq *partQueue, b *batch) error {
	if !p.cfg.idempotent || b.stamped {
		return nil
	}
	id, err := p.identity(ctx)
	if err != nil {
		return err
	}
	pq.mu.Lock()
	if pq.mu.seq.producer != id.id {
		pq.mu.seq = sequence{producer: id.id}
	}
	seq := pq.mu.seq.next
	pq.mu.seq.next = addSequence(seq, int32(len(b.recs)))
	pq.mu.Unlock()
	b.data.SetProducer(id.id, id.epoch, seq)
	b.stamped, b.identity = true, id
	return nil
}

// abandon is told that a batch failed for good (or was given up): if it
// was stamped, the producer takes a new identity for the batches after it.
func (p *Producer) abandon(b *batch) {
	if !b.stamped {
		return
	}
	p.idem.mu.Lock()
	if p.idem.cur == b.identity {
		p.idem.cur = noIdentity
		p.log.Debug("strata: a sent batch failed; the producer takes a new producer id", "partition", b.tp, "producer_id", b.identity.id)
	}
	p.idem.mu.Unlock()
}

// identity returns the producer's identity, asking the cluster for one when
// it has none. One request runs at a time; other callers wait for it, or
// for ctx. The request itself is bounded by the request timeout per broker
// and by the producer's life, not by ctx.
func (p *Producer) identity(ctx context.Context) (identity, error) {
	p.idem.mu.Lock()
	if cur := p.idem.cur; cur != noIdentity {
		p.idem.mu.Unlock()
		return cur, nil
	}
	call := p.idem.call
	if call == nil {
		call = &initCall{done: make(chan struct{})}
		p.idem.call = call
		p.idem.mu.Unlock()
		call.id, call.err = p.c.initProducer(p.ctx)
		p.idem.mu.Lock()
		if call.err == nil {
			p.idem.cur = call.id
		}
		p.idem.call = nil
		p.idem.mu.Unlock()
		close(call.done)
		return call.id, call.err
	}
	p.idem.mu.Unlock()
	select {
	case <-call.done:
		return call.id, call.err
	case <-ctx.Done():
		// Like a call that ran out of time: retriable.
		return noIdentity, newError(codes.DeadlineExceeded, "", true, "waiting for a producer id: %v", ctx.Err())
	}
}

// initProducer asks the cluster for a producer identity. Only the
// controller hands them out: the brokers are tried in turn, and one that
// names the controller in its refusal sends the next try there.
func (c *Client) initProducer(ctx context.Context) (identity, error) {
	var last error
	tried := map[string]bool{}
	for queue := c.brokerAddrs(); len(queue) > 0; {
		addr := queue[0]
		queue = queue[1:]
		if tried[addr] {
			continue
		}
		tried[addr] = true
		cc, err := c.conn(addr)
		if err != nil {
			return noIdentity, err
		}
		rctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
		resp, err := stratav1.NewProduceServiceClient(cc).InitProducer(rctx, &stratav1.InitProducerRequest{})
		cancel()
		if err == nil {
			if resp.GetProducerId() < 0 || resp.GetProducerEpoch() < 0 || resp.GetProducerEpoch() > math.MaxInt16 {
				return noIdentity, newError(codes.Internal, "", false, "broker %s answered producer id %d epoch %d", addr, resp.GetProducerId(), resp.GetProducerEpoch())
			}
			return identity{id: resp.GetProducerId(), epoch: int16(resp.GetProducerEpoch())}, nil
		}
		last = toError(err)
		if ctx.Err() != nil {
			return noIdentity, ctxError(ctx, last)
		}
		if !IsRetriable(last) {
			break
		}
		if e, ok := AsError(last); ok && e.Metadata["controller_address"] != "" {
			queue = append([]string{e.Metadata["controller_address"]}, queue...)
		}
	}
	if last == nil {
		last = newError(codes.Unavailable, "", true, "no broker address known")
	}
	return noIdentity, wrapOp("init producer", last)
}

// addSequence returns the sequence n records after seq, wrapping from
// MaxInt32 to 0 as the brokers (and Kafka's producers) do.
func addSequence(seq, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}
