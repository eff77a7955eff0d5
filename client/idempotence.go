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
//
// A leader that does not expect the batch's sequence (OUT_OF_ORDER_SEQUENCE:
// it lost batches it had acknowledged, say acks=leader and a failover) or
// does not know the producer (UNKNOWN_PRODUCER_ID: it forgot it) wrote
// nothing, and would refuse the same bytes again until the delivery timeout.
// The producer recovers as Kafka's does (KIP-360). When every batch of the
// partition numbered before the refused one had been acknowledged when it
// was sent (so the gap is not an earlier batch still on its way: requests
// in flight together reach the leader in any order), the producer moves to
// its next epoch without asking the cluster (to a new producer id once the
// epoch is at its limit), and every partition starts its sequences again
// at 0 under it. A partition moves to the new identity only once none of
// its batches can still be written under the old one (each was answered,
// or refused): a batch whose answer was lost is resent as it was, so the
// leader can still recognise it, and is never numbered again. Then its
// refused batches are numbered again in their order and resent at once,
// and its new batches follow. Any other refused batch is resent unchanged
// after the usual backoff: the gap may be an earlier batch, which may yet
// land.
//
// A batch that may have been written (an earlier send of it got no answer
// that it was not) is never numbered again: should the leader refuse it,
// because it wrote the batch and forgot it (OUT_OF_ORDER_SEQUENCE,
// expecting a later sequence) or forgot the producer (UNKNOWN_PRODUCER_ID,
// which cannot tell that from a producer whose batches it never had), the
// batch fails with its outcome unknown.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"google.golang.org/grpc/codes"
)

// leaderBatches is how many of a producer's latest batches of a partition
// a leader remembers, so that it recognises one sent again: Kafka's number,
// and Strata's brokers'. A partition never has a batch unanswered that
// leaderBatches batches stamped after it could push out of that memory
// (stampLocked), and a producer keeps at most that many in flight.
const leaderBatches = 5

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
	ident identity // the identity next counts for
	next  int32
}

// stamp readies a batch's producer fields before each send: the first
// time, the producer's identity and the partition's next sequence number;
// after a refusal of its sequence under an identity the producer has since
// left, the current identity and a new number; otherwise (its outcome is
// unknown, or it was refused under the current identity) nothing changes.
// It waits while the partition's other batches must go first (see the top
// of this file). It does nothing without idempotence.
func (p *Producer) stamp(ctx context.Context, pq *partQueue, b *batch) error {
	if !p.cfg.idempotent {
		return nil
	}
	pq.mu.Lock()
	if b.stamped && !b.refused {
		pq.mu.Unlock()
		return nil // the same bytes again: the leader may have written them
	}
	pq.mu.Unlock()
	for {
		cur, err := p.identity(ctx)
		if err != nil {
			return err
		}
		pq.mu.Lock()
		ok := pq.stampLocked(b, cur)
		changed := pq.seqChangedLocked()
		pq.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return newError(codes.DeadlineExceeded, "", true, "waiting for earlier batches of %s before numbering a batch again: %v", b.tp, ctx.Err())
		}
	}
}

// stampLocked stamps b for cur if it may: it reports false when b must
// wait for other batches of its partition.
func (pq *partQueue) stampLocked(b *batch, cur identity) bool {
	if b.stamped && (!b.refused || b.identity == cur) {
		// Unknown outcome, or refused under the current identity because
		// of an earlier batch: the same bytes again.
		b.refused, b.afterAcks = false, pq.afterAcksLocked(b)
		return true
	}
	// b takes cur: it is new, or was refused under an identity the
	// producer has left.
	for _, x := range pq.mu.inflight {
		if x == b {
			continue
		}
		if !x.stamped {
			if !b.stamped && x.takenNo < b.takenNo {
				// Taken first: numbered first, so that sequences follow
				// the order records were produced in, whichever sender
				// gets here first.
				return false
			}
			continue
		}
		if x.identity == cur {
			if pq.mu.stamps+1-x.stampNo >= leaderBatches {
				// x is unanswered and b would be the leaderBatches'th
				// batch after it: once b is written the leader may
				// no longer recognise x if it is resent (its answer
				// lost), and would refuse it as out of order.
				return false
			}
			continue
		}
		if !x.refused && pq.mu.seq.ident != cur {
			// x may still be written under its identity: until it is
			// answered the partition stays there, or cur would fence it.
			return false
		}
		if x.refused && (!b.stamped || x.stampNo < b.stampNo) {
			return false // x came first: it is numbered first
		}
	}
	if pq.mu.seq.ident != cur {
		pq.mu.seq = sequence{ident: cur}
	}
	seq := pq.mu.seq.next
	pq.mu.seq.next = addSequence(seq, int32(len(b.recs)))
	b.data.SetProducer(cur.id, cur.epoch, seq)
	pq.mu.stamps++
	b.stamped, b.identity, b.refused, b.stampNo = true, cur, false, pq.mu.stamps
	b.unanswered = false
	b.afterAcks = pq.afterAcksLocked(b)
	pq.notifySeqLocked()
	return true
}

// afterAcksLocked reports whether every batch of the partition numbered
// before b under b's identity is acknowledged (gone from those in flight).
func (pq *partQueue) afterAcksLocked(b *batch) bool {
	for _, x := range pq.mu.inflight {
		if x != b && x.stamped && x.identity == b.identity && x.stampNo < b.stampNo {
			return false
		}
	}
	return true
}

// mayBeWritten returns the error a batch refused its sequence fails with
// instead of being numbered again, which could write it twice, or nil
// when it may be numbered again: the leader is past it, so it wrote it
// (writtenBefore); or an earlier send of it got no answer and the leader
// does not know the producer, so it cannot tell whether it forgot the
// batch or never had it.
func mayBeWritten(err error, b *batch) error {
	switch {
	case writtenBefore(err, b):
		return fmt.Errorf("the leader wrote this batch before and no longer remembers it (its answer was lost): it is not sent again, and its offsets are unknown: %w", err)
	case b.unanswered && errors.Is(err, ErrUnknownProducerID):
		return fmt.Errorf("an earlier send of this batch got no answer, so it may have been written, and the leader no longer knows the producer to tell: it is not sent again, and whether it was written is unknown: %w", err)
	}
	return nil
}

// writtenBefore reports whether a refusal of b's sequence says the leader
// is past it (OUT_OF_ORDER_SEQUENCE with an expected sequence ahead of
// b's): the leader takes a producer's sequences only one after the other,
// under one identity, so it wrote this batch before, and it was answered
// by a refusal now only because the leader no longer remembers it.
func writtenBefore(err error, b *batch) bool {
	e, ok := AsError(err)
	if !ok || e.Reason != ErrOutOfOrderSequence.Reason {
		return false
	}
	got, err1 := strconv.ParseInt(e.Metadata["sequence"], 10, 32)
	want, err2 := strconv.ParseInt(e.Metadata["expected_sequence"], 10, 32)
	if err1 != nil || err2 != nil || int32(got) != b.data.BaseSequence() {
		return false
	}
	ahead := want - got // how far the leader is past b, wrapping at MaxInt32
	if ahead < 0 {
		ahead += math.MaxInt32 + 1
	}
	return ahead > 0 && ahead <= math.MaxInt32/2
}

// answeredUnwritten reports whether err is a leader's answer that it did
// not append the batch. Any other failure may come after the append: lost
// answers, timeouts, a leader moving while the call was out (NOT_LEADER),
// or a log that failed.
func answeredUnwritten(err error) bool {
	for _, e := range []*Error{ErrOutOfOrderSequence, ErrUnknownProducerID, ErrNotEnoughReplicas, ErrThrottled, ErrLeaderNotAvailable} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// sequenceRefused is told that the leader refused b's sequence
// (OUT_OF_ORDER_SEQUENCE or UNKNOWN_PRODUCER_ID), so nothing was written.
// When every batch of the partition numbered before b under the same
// identity had been acknowledged when b was sent, the gap is not theirs:
// the leader lost or forgot what the producer wrote, and the producer
// moves to its next epoch. It reports whether b is to be numbered again
// under another identity.
func (p *Producer) sequenceRefused(pq *partQueue, b *batch) (renumber bool) {
	pq.mu.Lock()
	b.refused = true
	// Unless every batch numbered before b was acknowledged when b was
	// sent, the gap may be one of theirs (even one refused too: it may
	// have gone before one still earlier), and resending b in turn fills
	// it.
	lost := b.afterAcks
	from := b.identity
	pq.notifySeqLocked()
	pq.mu.Unlock()
	if lost {
		p.bumpEpoch(from)
	}
	p.idem.mu.Lock()
	defer p.idem.mu.Unlock()
	return p.idem.cur != from
}

// bumpEpoch moves the producer from identity from to its next epoch, or,
// at the epoch's limit, to no identity (the next stamp asks for a new
// producer id). Nothing happens if it has left from already.
func (p *Producer) bumpEpoch(from identity) {
	p.idem.mu.Lock()
	defer p.idem.mu.Unlock()
	if p.idem.cur != from {
		return
	}
	if from.epoch == math.MaxInt16 {
		p.idem.cur = noIdentity
		p.log.Info("strata: the producer epoch is at its limit; the producer takes a new producer id", "producer_id", from.id)
		return
	}
	p.idem.cur.epoch++
	p.log.Info("strata: a leader refused the producer's sequence; the producer moves to its next epoch", "producer_id", from.id, "epoch", p.idem.cur.epoch)
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
