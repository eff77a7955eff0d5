package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
)

// Consumer reads assigned partitions. Each assigned partition has one
// fetcher goroutine holding a Fetch stream to the partition's leader; the
// fetchers feed a bounded buffer that Poll drains. Records of a partition
// come out of Poll in offset order. It is safe for concurrent use.
//
// The application assigns partitions (Assign) and keeps its positions
// itself, for instance with Client.CommitOffsets and Client.FetchOffsets
// (a commit made outside a group is refused while the group has members).
// To share partitions with other instances, use a GroupConsumer.
type Consumer struct {
	c      *Client
	cfg    consumerConfig
	log    *slog.Logger
	cfgErr error

	records *limiter // records fetched but not yet returned by Poll
	out     chan chunk
	// polling admits one Poll at a time: two would race on a partition's
	// chunks and could move its position backwards.
	polling chan struct{}
	// changed wakes a blocked Poll when the assignment changes, so it can
	// tell that every remaining partition has reached its end.
	changed chan struct{}

	ctx    context.Context // ends every fetcher on Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // fetchers

	mu struct {
		sync.Mutex
		parts  map[TopicPartition]*assignment
		closed bool
		// err is an error Poll met after it had records to return; the
		// next Poll returns it.
		err error
	}
}

// assignment is one assigned partition and its fetcher.
type assignment struct {
	tp     TopicPartition
	from   OffsetSpec
	cancel context.CancelFunc
	// hw is the high watermark of the latest fetch response, -1 before.
	hw atomic.Int64
	// position is the offset of the next record Poll returns, -1 until the
	// start offset is resolved.
	position atomic.Int64
	// retrying: the fetcher met a failure it retries and no broker has
	// answered it since (WithOnFetchRetry). Only the fetcher uses it.
	retrying bool
	// Guarded by Consumer.mu, and only changed by Poll, in chunk order:
	ended  bool // reached its end (WithStopAtEnd)
	failed bool // its fetcher stopped on an error, returned by Poll
}

// chunk is what a fetcher hands to Poll: records, a new position, the end
// of the partition, or an error that stopped the fetcher.
type chunk struct {
	a    *assignment
	recs []*Record
	// seeked: the position jumped to seek (reset after out of range).
	seeked bool
	seek   int64
	eof    bool
	err    error
}

// NewConsumer creates a Consumer reading through c. Invalid options do not
// panic: the consumer then fails every call with an error that names them
// (errors.Is(err, ErrInvalidConfig)).
func (c *Client) NewConsumer(opts ...ConsumerOption) *Consumer {
	cfg := defaultConsumerConfig()
	for _, o := range opts {
		o.applyConsumer(&cfg)
	}
	k := &Consumer{c: c, cfg: cfg, log: c.log, changed: make(chan struct{}, 1), out: make(chan chunk, 64),
		polling: make(chan struct{}, 1)}
	k.ctx, k.cancel = context.WithCancel(context.Background())
	k.mu.parts = make(map[TopicPartition]*assignment)
	if err := cfg.validate(); err != nil {
		k.cfgErr = fmt.Errorf("strata: new consumer: %w", err)
	}
	k.records = newLimiter(int64(cfg.maxBufferedRecords))
	return k
}

// Assign starts reading a partition from a position: Earliest, Latest or
// AtTime are resolved (ListOffsets) when the fetcher starts, AtOffset is
// used as it is. Assigning a partition again restarts it from the new
// position, dropping what was buffered for it; that is also how to resume
// a partition whose error Poll returned.
func (k *Consumer) Assign(topic string, partition int32, from OffsetSpec) error {
	if k.cfgErr != nil {
		return k.cfgErr
	}
	tp := TopicPartition{topic, partition}
	if err := from.validate("from"); err != nil {
		return wrapOp("assign "+tp.String(), err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.mu.closed {
		return ErrClosed
	}
	if old := k.mu.parts[tp]; old != nil {
		old.cancel()
	}
	ctx, cancel := context.WithCancel(k.ctx)
	a := &assignment{tp: tp, from: from, cancel: cancel}
	a.hw.Store(-1)
	a.position.Store(-1)
	if from.kind == specOffset {
		a.position.Store(from.value)
	}
	k.mu.parts[tp] = a
	k.wg.Add(1)
	go k.fetch(ctx, a)
	k.wake()
	return nil
}

// Unassign stops reading a partition and drops what was buffered for it.
func (k *Consumer) Unassign(topic string, partition int32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	tp := TopicPartition{topic, partition}
	if a := k.mu.parts[tp]; a != nil {
		a.cancel()
		delete(k.mu.parts, tp)
		k.wake()
	}
}

func (k *Consumer) wake() {
	select {
	case k.changed <- struct{}{}:
	default:
	}
}

// Position returns the offset of the next record Poll will return for the
// partition (what to commit), or -1 when it is not assigned or its start
// is not resolved yet.
func (k *Consumer) Position(topic string, partition int32) int64 {
	if a := k.assigned(TopicPartition{topic, partition}); a != nil {
		return a.position.Load()
	}
	return -1
}

// HighWatermark returns the partition's high watermark as of the latest
// fetch response, or -1 before one: HighWatermark - Position is the lag.
func (k *Consumer) HighWatermark(topic string, partition int32) int64 {
	if a := k.assigned(TopicPartition{topic, partition}); a != nil {
		return a.hw.Load()
	}
	return -1
}

func (k *Consumer) assigned(tp TopicPartition) *assignment {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.mu.parts[tp]
}

// Poll returns the records available now from any assigned partition,
// waiting until there is at least one or ctx ends. It returns an error a
// partition met (ErrOffsetOutOfRange without WithResetOnOutOfRange, a
// corrupt batch, a deleted topic); that partition then stops until it is
// assigned again, while the others go on. With WithStopAtEnd, it returns
// io.EOF once every assigned partition has reached its end. Concurrent
// calls take turns.
func (k *Consumer) Poll(ctx context.Context) ([]*Record, error) {
	return k.poll(ctx, nil)
}

// errInterrupted is what poll returns, with no records, when interrupt
// fires while it waits.
var errInterrupted = errors.New("strata: poll interrupted")

// poll is Poll, with a channel that ends a wait for records (a group
// consumer's rebalance).
func (k *Consumer) poll(ctx context.Context, interrupt <-chan struct{}) ([]*Record, error) {
	if k.cfgErr != nil {
		return nil, k.cfgErr
	}
	select {
	case k.polling <- struct{}{}:
		defer func() { <-k.polling }()
	case <-ctx.Done():
		return nil, wrapOp("poll", ctx.Err())
	case <-k.ctx.Done():
		return nil, ErrClosed
	}
	var out []*Record
	for {
		k.mu.Lock()
		if k.mu.closed {
			k.mu.Unlock()
			return nil, ErrClosed
		}
		if err := k.mu.err; err != nil && len(out) == 0 {
			k.mu.err = nil
			k.mu.Unlock()
			return nil, err
		}
		atEnd := k.cfg.stopAtEnd && k.allEndedLocked()
		k.mu.Unlock()

		if len(out) > 0 || atEnd {
			// Take what else is ready, without waiting.
			select {
			case ch := <-k.out:
				out = k.take(ch, out)
				continue
			default:
			}
			if len(out) > 0 {
				return out, nil
			}
			return nil, io.EOF
		}
		select {
		case ch := <-k.out:
			out = k.take(ch, out)
		case <-k.changed:
		case <-interrupt:
			return nil, errInterrupted
		case <-ctx.Done():
			return nil, wrapOp("poll", ctx.Err())
		case <-k.ctx.Done():
			return nil, ErrClosed
		}
	}
}

// allEndedLocked reports whether every assigned partition has ended or
// failed.
func (k *Consumer) allEndedLocked() bool {
	for _, a := range k.mu.parts {
		if !a.ended && !a.failed {
			return false
		}
	}
	return true
}

// take applies one chunk: records are appended to out, positions move,
// ends and errors are recorded. Chunks of a partition that was reassigned
// or unassigned since are dropped.
func (k *Consumer) take(ch chunk, out []*Record) []*Record {
	k.records.release(int64(len(ch.recs)))
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.mu.parts[ch.a.tp] != ch.a {
		return out
	}
	a := ch.a
	switch {
	case ch.err != nil:
		a.failed = true
		if k.mu.err == nil {
			k.mu.err = ch.err
		}
	case ch.eof:
		a.ended = true
	case ch.seeked:
		a.position.Store(ch.seek)
	case len(ch.recs) > 0:
		out = append(out, ch.recs...)
		a.position.Store(ch.recs[len(ch.recs)-1].Offset + 1)
	}
	return out
}

// Close stops every fetcher and waits for them. Poll returns ErrClosed
// after. Close does not close the Client.
func (k *Consumer) Close() error {
	k.mu.Lock()
	k.mu.closed = true
	k.mu.Unlock()
	k.cancel()
	k.wg.Wait()
	return nil
}
