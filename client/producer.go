package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"google.golang.org/grpc/codes"
)

// Producer writes records asynchronously, batching them per partition.
// It is safe for concurrent use.
//
// Each partition it writes to gets one sender goroutine that sends the
// partition's batches one after the other (WithMaxInFlightPerPartition
// more), retrying a failed batch until it is written or out of time before
// it sends the next: records of a partition are written in the order they
// were produced. Close stops every goroutine the producer started.
type Producer struct {
	c   *Client
	cfg producerConfig
	log *slog.Logger
	// cfgErr is the error of invalid options: every call reports it.
	cfgErr error

	acc    *accumulator
	buffer *limiter // bytes of records not yet answered
	idem   idempotence

	// ctx ends in-flight calls and retry waits when Close gives up.
	ctx    context.Context
	cancel context.CancelFunc
	// closing is closed when Close begins: Produce calls waiting for
	// buffer space give up. stop is closed when the senders must exit.
	closing chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup // senders and in-flight sends

	mu struct {
		sync.RWMutex
		closed bool
	}
	closeOnce sync.Once
	closeErr  error
}

// NewProducer creates a Producer writing through c. Invalid options do not
// panic: the producer then fails every call with an error that names them
// (errors.Is(err, ErrInvalidConfig)).
func (c *Client) NewProducer(opts ...ProducerOption) *Producer {
	cfg := defaultProducerConfig()
	for _, o := range opts {
		o.applyProducer(&cfg)
	}
	p := &Producer{c: c, cfg: cfg, log: c.log, closing: make(chan struct{}), stop: make(chan struct{})}
	p.idem.cur = noIdentity
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if err := cfg.validate(); err != nil {
		p.cfgErr = fmt.Errorf("strata: new producer: %w", err)
		return p
	}
	var onClose func(TopicPartition)
	if l, ok := cfg.partitioner.(BatchListener); ok {
		onClose = func(tp TopicPartition) { l.OnBatchClosed(tp.Topic, tp.Partition) }
	}
	p.acc = newAccumulator(cfg.batchBytes, cfg.linger, cfg.compression, onClose)
	p.buffer = newLimiter(cfg.maxBufferedBytes)
	return p
}

// Produce hands r to the producer and returns; done (which may be nil) is
// called once r is written, with r.Offset set, or has failed. It blocks
// only while the buffer is full (WithMaxBufferedBytes) or, for a topic it
// has not seen yet, while the topic's metadata loads; if ctx ends first,
// done gets the error.
//
// ctx also bounds the delivery: a record whose ctx has ended is not sent
// again after a failure (one already sent may still be written; with
// idempotence, it is sent again while other records of its batch still
// wait, see WithIdempotence). Produce sets r.Partition when it is
// AnyPartition and r.Timestamp when it is zero. done is called from a
// producer goroutine, in produce order for the records of one partition;
// it must not block for long, since the partition's next batch waits for
// it.
func (p *Producer) Produce(ctx context.Context, r *Record, done func(*Record, error)) {
	if done == nil {
		done = func(*Record, error) {}
	}
	if p.cfgErr != nil {
		done(r, p.cfgErr)
		return
	}
	select {
	case <-p.closing:
		done(r, ErrClosed)
		return
	default:
	}
	if r == nil {
		done(r, newError(codes.InvalidArgument, "INVALID_REQUEST", false, "produce: nil record"))
		return
	}
	if err := p.prepare(ctx, r); err != nil {
		done(r, wrapOp("produce to "+r.Topic, err))
		return
	}
	tp := TopicPartition{r.Topic, r.Partition}
	size := recordSize(r)
	if size > record.MaxBatchSize {
		done(r, wrapOp("produce to "+tp.String(), newError(codes.InvalidArgument, "RECORD_TOO_LARGE", false,
			"record of about %d bytes is over the batch limit of %d", size, record.MaxBatchSize)))
		return
	}
	if err := p.buffer.acquire(ctx, size, p.closing); err != nil {
		done(r, wrapOp("produce to "+tp.String()+": wait for buffer space", err))
		return
	}

	p.mu.RLock()
	if p.mu.closed {
		p.mu.RUnlock()
		p.buffer.release(size)
		done(r, ErrClosed)
		return
	}
	pq, created := p.acc.queue(tp)
	if created {
		p.wg.Add(1)
		go p.sendLoop(pq)
	}
	wake := p.acc.append(pq, pendingRecord{r: r, ctx: ctx, fn: done}, size, time.Now())
	p.mu.RUnlock()
	if wake {
		pq.wake()
	}
}

// prepare checks r's topic and partition against the metadata, asks the
// partitioner when the partition is AnyPartition and stamps the timestamp.
func (p *Producer) prepare(ctx context.Context, r *Record) error {
	if r.Topic == "" {
		return newError(codes.InvalidArgument, "INVALID_TOPIC_NAME", false, "record without a topic")
	}
	if r.Partition < AnyPartition {
		return newError(codes.InvalidArgument, "PARTITION_NOT_FOUND", false, "partition %d: want >= 0 or AnyPartition", r.Partition)
	}
	n, err := p.c.partitionCount(ctx, r.Topic, r.Partition)
	if err != nil {
		return err
	}
	if r.Partition == AnyPartition {
		part := p.cfg.partitioner.Partition(r, n)
		if part < 0 || part >= n {
			return newError(codes.InvalidArgument, "PARTITION_NOT_FOUND", false,
				"partitioner chose partition %d of topic %q, which has %d", part, r.Topic, n)
		}
		r.Partition = part
	}
	if r.Timestamp.IsZero() {
		r.Timestamp = time.Now()
	}
	// The broker refuses a batch holding a time before 1970 whole (-1 ms
	// is Kafka's "no timestamp"): refused here, the record does not take
	// the records batched with it down too.
	if ms := r.Timestamp.UnixMilli(); ms < record.NoTimestamp {
		e := newError(codes.InvalidArgument, "INVALID_TIMESTAMP", false,
			"record time %s is before 1970, which a record timestamp cannot be", r.Timestamp.UTC().Format(time.RFC3339Nano))
		e.Metadata = map[string]string{"timestamp": strconv.FormatInt(ms, 10), "retriable": "false"}
		return e
	}
	return nil
}

// ProduceSync produces records and waits until each has been written or
// has failed, or ctx ends. It returns the error of the first record (in
// argument order) that failed; every written record has its Offset set.
func (p *Producer) ProduceSync(ctx context.Context, records ...*Record) error {
	if len(records) == 0 {
		return nil
	}
	errs := make([]error, len(records))
	var left atomic.Int64
	left.Store(int64(len(records)))
	all := make(chan struct{})
	for i, r := range records {
		p.Produce(ctx, r, func(_ *Record, err error) {
			errs[i] = err // each callback writes its own slot; all happens-before the read below
			if left.Add(-1) == 0 {
				close(all)
			}
		})
	}
	select {
	case <-all:
	case <-ctx.Done():
		return wrapOp("produce", ctx.Err())
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Flush sends every buffered record without waiting for the linger and
// waits until each has been written or has failed (their callbacks say
// which), or ctx ends. Records produced during the Flush are not waited
// for.
func (p *Producer) Flush(ctx context.Context) error {
	if p.cfgErr != nil {
		return p.cfgErr
	}
	p.acc.flushing.Add(1)
	defer p.acc.flushing.Add(-1)
	for _, b := range p.acc.pending() {
		select {
		case <-b.done:
		case <-ctx.Done():
			return wrapOp("flush", ctx.Err())
		}
	}
	return nil
}

// Prepare obtains now what the producer would otherwise fetch as it sends
// its first batch: with idempotence (the default), its producer id, which
// the controller hands out through a write to the cluster's metadata. A
// producer whose first records must not wait for that (a benchmark's
// clock, a latency-sensitive start) calls it before producing; nothing
// else needs it. Without idempotence it does nothing.
func (p *Producer) Prepare(ctx context.Context) error {
	if p.cfgErr != nil {
		return p.cfgErr
	}
	if !p.cfg.idempotent {
		return nil
	}
	_, err := p.identity(ctx)
	return wrapOp("prepare", err)
}

// Close stops accepting records, waits for the buffered ones for at most
// the delivery timeout (to wait less, call Flush with a deadline first),
// then fails whatever is left with ErrClosed and stops every goroutine of
// the producer. It returns an error when records had to be abandoned.
// Close does not close the Client.
func (p *Producer) Close() error {
	p.closeOnce.Do(func() { p.closeErr = p.close() })
	return p.closeErr
}

func (p *Producer) close() error {
	if p.cfgErr != nil {
		p.cancel()
		return nil
	}
	p.mu.Lock()
	p.mu.closed = true
	close(p.closing)
	p.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.deliveryTimeout)
	flushErr := p.Flush(ctx)
	cancel()

	p.cancel()
	close(p.stop)
	p.wg.Wait()
	// Batches no sender took (possible only when the flush gave up).
	for _, b := range p.acc.drain() {
		p.fail(nil, b, ErrClosed)
	}
	if flushErr != nil {
		return fmt.Errorf("strata: close producer: records still unanswered after %s were failed: %w", p.cfg.deliveryTimeout, ErrClosed)
	}
	return nil
}

// sendLoop is the sender of one partition: it takes the partition's
// batches in order and sends them, inline when one may be in flight (the
// order then holds through retries), else in tracked goroutines.
func (p *Producer) sendLoop(pq *partQueue) {
	defer p.wg.Done()
	slots := make(chan struct{}, p.cfg.maxInFlight)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case slots <- struct{}{}:
		case <-p.stop:
			return
		}
		b := p.waitBatch(pq, timer)
		if b == nil {
			return
		}
		if p.cfg.maxInFlight == 1 {
			p.send(pq, b)
			<-slots
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.send(pq, b)
			<-slots
		}()
	}
}

// waitBatch waits until the partition has a batch due, or the producer
// stops (nil).
func (p *Producer) waitBatch(pq *partQueue, timer *time.Timer) *batch {
	for {
		b, wait := p.acc.next(pq, time.Now())
		if b != nil {
			return b
		}
		var due <-chan time.Time
		if wait >= 0 {
			timer.Reset(wait)
			due = timer.C
		}
		select {
		case <-pq.kick:
		case <-due:
		case <-p.stop:
			timer.Stop()
			return nil
		}
		timer.Stop()
	}
}

// send writes one batch, retrying retriable failures with backoff until it
// is written, its records' contexts end, the retries run out or the
// delivery timeout passes, then gives every record its answer. With
// idempotence the batch is stamped before it is first sent, and resent as
// stamped; a refusal of its sequence moves it to the producer's next epoch
// (idempotence.go), and it is resent at once.
func (p *Producer) send(pq *partQueue, b *batch) {
	op := "produce to " + b.tp.String()
	if err := p.acc.encode(b); err != nil {
		p.fail(pq, b, wrapOp(op, err))
		return
	}
	deadline := b.created.Add(p.cfg.deliveryTimeout)
	var last error
	var sentTo partitionInfo // the leader the last attempt went to
	renumbered, renumberedBefore := false, false
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if p.cfg.retries >= 0 && attempt > p.cfg.retries {
				p.fail(pq, b, wrapOp(fmt.Sprintf("%s: gave up after %d attempts", op, attempt), last))
				return
			}
			// A NOT_LEADER that named the new leader was applied to the
			// metadata: go there at once, the first time. A batch numbered
			// again under a new epoch goes at once too, unless that did
			// not help the time before.
			now := (attempt == 1 && errors.Is(last, ErrNotLeader)) || (renumbered && !renumberedBefore)
			renumberedBefore, renumbered = renumbered, false
			if !now {
				d := p.cfg.backoff.delay(attempt-1, retryAfter(last))
				if time.Now().Add(d).After(deadline) {
					p.fail(pq, b, wrapOp(op, withLast(ErrDeliveryTimeout, last, "(%s) after %d attempts", p.cfg.deliveryTimeout, attempt)))
					return
				}
				var err error
				if leaderSuspect(last) {
					// Or until the partition has a new leader to try.
					err = p.c.backoffUntilLeaderMoves(p.ctx, d, b.tp, sentTo)
				} else {
					err = sleepCtx(p.ctx, d)
				}
				if err != nil {
					p.fail(pq, b, wrapOp(op, withLast(ErrClosed, last, "")))
					return
				}
			}
			left, err := p.dropEnded(b, last)
			if err != nil {
				p.fail(pq, b, wrapOp(op, err))
				return
			}
			if !left {
				p.abandon(b)
				p.acc.finish(pq, b)
				return
			}
		}
		if info, ok := p.c.meta.current().leaderOf(b.tp); ok {
			sentTo = info
		} else {
			sentTo = partitionInfo{leader: noLeader}
		}
		resp, err := p.produceOnce(pq, b, deadline)
		if err == nil {
			p.complete(pq, b, resp)
			return
		}
		last = err
		refused := p.cfg.idempotent && b.stamped && (errors.Is(err, ErrOutOfOrderSequence) || errors.Is(err, ErrUnknownProducerID))
		if refused {
			if ferr := mayBeWritten(err, b); ferr != nil {
				p.fail(pq, b, wrapOp(op, ferr))
				return
			}
		}
		if b.stamped && !answeredUnwritten(err) {
			b.unanswered = true
		}
		if refused {
			renumbered = p.sequenceRefused(pq, b)
		}
		switch {
		case p.ctx.Err() != nil:
			p.fail(pq, b, wrapOp(op, withLast(ErrClosed, last, "")))
			return
		case !refused && !IsRetriable(err):
			p.fail(pq, b, wrapOp(op, err))
			return
		case !time.Now().Before(deadline):
			p.fail(pq, b, wrapOp(op, withLast(ErrDeliveryTimeout, last, "(%s) after %d attempts", p.cfg.deliveryTimeout, attempt+1)))
			return
		}
		p.log.Debug("strata: produce failed, retrying", "partition", b.tp, "attempt", attempt+1, "records", len(b.recs), "err", err)
	}
}

// produceOnce sends the batch to the partition's leader once, stamping it
// first if it needs to be.
func (p *Producer) produceOnce(pq *partQueue, b *batch, deadline time.Time) (*stratav1.ProduceResponse, error) {
	timeout := p.c.cfg.requestTimeout
	moved, leaderMoved := context.WithCancelCause(p.ctx)
	defer leaderMoved(nil)
	ctx, cancel := context.WithDeadline(moved, earliest(time.Now().Add(timeout), deadline))
	defer cancel()
	if err := p.stamp(ctx, pq, b); err != nil {
		return nil, err
	}
	cc, err := p.c.leaderConn(ctx, b.tp)
	if err != nil {
		return nil, toError(err)
	}
	// A leader that stops answering must not hold the partition until the
	// timeout: leaderwatch.go.
	if sentTo, ok := p.c.meta.current().leaderOf(b.tp); ok {
		stop := p.c.watchLeader(ctx, b.tp, sentTo, cc.Target(), func() { leaderMoved(errLeaderMoved) })
		defer stop()
	}
	resp, err := stratav1.NewProduceServiceClient(cc).Produce(ctx, &stratav1.ProduceRequest{
		Topic:     b.tp.Topic,
		Partition: b.tp.Partition,
		Acks:      p.cfg.acks,
		Batch:     b.data,
		// Leave the broker room to answer TIMEOUT before our deadline
		// cuts the call: its answer says more than a transport error.
		TimeoutMs: int32(max(1, (timeout - timeout/5).Milliseconds())),
	})
	if err != nil {
		if errors.Is(context.Cause(moved), errLeaderMoved) && p.ctx.Err() == nil {
			return nil, leaderMovedError(b.tp)
		}
		return nil, p.c.partitionError(ctx, b.tp, err)
	}
	return resp, nil
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// dropEnded fails the records whose context has ended before a retry and
// re-encodes the batch without them. It reports whether records are left.
// A stamped batch's sequence numbers are fixed: it is sent again whole
// while any of its records still waits.
func (p *Producer) dropEnded(b *batch, last error) (left bool, err error) {
	n := 0
	for _, pr := range b.recs {
		if pr.ctx.Err() != nil {
			n++
		}
	}
	if n == 0 || (b.stamped && n < len(b.recs)) {
		return true, nil
	}
	kept := make([]pendingRecord, 0, len(b.recs)-n)
	for _, pr := range b.recs {
		if err := pr.ctx.Err(); err != nil {
			pr.fn(pr.r, wrapOp("produce to "+b.tp.String(), withLast(err, last, "")))
		} else {
			kept = append(kept, pr)
		}
	}
	b.recs = kept
	if len(kept) == 0 {
		p.buffer.release(b.bytes)
		b.bytes = 0
		return false, nil
	}
	return true, p.acc.rebuild(b)
}

// complete gives every record of a written batch its offset, then its
// callback.
func (p *Producer) complete(pq *partQueue, b *batch, resp *stratav1.ProduceResponse) {
	base := resp.GetBaseOffset()
	if n := resp.GetLastOffset() - base + 1; n != int64(len(b.recs)) {
		p.log.Warn("strata: produce answer does not match the batch", "partition", b.tp,
			"records", len(b.recs), "base_offset", base, "last_offset", resp.GetLastOffset())
	}
	if resp.GetDuplicate() {
		p.log.Debug("strata: the broker had written the batch already", "partition", b.tp, "base_offset", base)
	}
	recs := b.recs
	p.buffer.release(b.bytes)
	for i, pr := range recs {
		pr.r.Offset = base + int64(i)
		if t := resp.GetLogAppendTimeMs(); t > 0 {
			pr.r.Timestamp = time.UnixMilli(t)
		}
		pr.fn(pr.r, nil)
	}
	p.acc.finish(pq, b)
}

// fail gives every record of the batch err. pq is nil for a batch that no
// sender took.
func (p *Producer) fail(pq *partQueue, b *batch, err error) {
	if len(b.recs) > 0 {
		p.log.Warn("strata: produce failed", "partition", b.tp, "records", len(b.recs), "err", err)
	}
	p.abandon(b)
	recs := b.recs
	p.buffer.release(b.bytes)
	b.bytes = 0
	for _, pr := range recs {
		pr.fn(pr.r, err)
	}
	p.acc.finish(pq, b)
}
