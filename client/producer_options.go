package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// ProducerOption configures a Producer (Client.NewProducer).
type ProducerOption interface {
	applyProducer(*producerConfig)
}

type producerOption func(*producerConfig)

func (o producerOption) applyProducer(c *producerConfig) { o(c) }

// producerConfig holds a Producer's settings; defaultProducerConfig gives
// the values used when no option says otherwise.
type producerConfig struct {
	maxBufferedBytes int64
	batchBytes       int
	linger           time.Duration
	compression      record.Compression
	acks             stratav1.Acks
	maxInFlight      int
	retries          int // -1: until the delivery timeout
	backoff          backoff
	deliveryTimeout  time.Duration
	partitioner      Partitioner
	idempotent       bool
}

func defaultProducerConfig() producerConfig {
	return producerConfig{
		maxBufferedBytes: 64 << 20,
		batchBytes:       1 << 20,
		linger:           5 * time.Millisecond,
		compression:      record.CompressionNone,
		acks:             stratav1.Acks_ACKS_ALL,
		maxInFlight:      1,
		retries:          -1,
		backoff:          backoff{min: 100 * time.Millisecond, max: time.Second},
		deliveryTimeout:  2 * time.Minute,
		partitioner:      NewDefaultPartitioner(),
		idempotent:       true,
	}
}

func (c *producerConfig) validate() error {
	var errs []error
	if c.maxBufferedBytes <= 0 {
		errs = append(errs, configError("WithMaxBufferedBytes", c.maxBufferedBytes, "bytes > 0"))
	}
	if c.batchBytes <= 0 || c.batchBytes > record.MaxBatchSize {
		errs = append(errs, configError("WithBatchBytes", c.batchBytes, fmt.Sprintf("bytes in [1, %d]", record.MaxBatchSize)))
	}
	if c.linger < 0 {
		errs = append(errs, configError("WithLinger", c.linger, "a duration >= 0"))
	}
	if !c.compression.Valid() {
		errs = append(errs, configError("WithCompression", c.compression, "none, gzip, snappy, lz4 or zstd"))
	}
	if _, ok := stratav1.Acks_name[int32(c.acks)]; !ok {
		errs = append(errs, configError("WithAcks", c.acks, "ACKS_NONE, ACKS_LEADER or ACKS_ALL"))
	}
	if c.maxInFlight < 1 {
		errs = append(errs, configError("WithMaxInFlightPerPartition", c.maxInFlight, "at least 1"))
	} else if c.idempotent && c.maxInFlight > leaderBatches {
		errs = append(errs, configError("WithMaxInFlightPerPartition", c.maxInFlight, fmt.Sprintf("1 to %d with WithIdempotence(true): a leader recognises a resent batch among the producer's last %d", leaderBatches, leaderBatches)))
	}
	if c.retries < -1 {
		errs = append(errs, configError("WithRetries", c.retries, "retries >= 0, or -1 for no limit"))
	}
	if c.backoff.min <= 0 || c.backoff.max < c.backoff.min {
		errs = append(errs, configError("WithRetryBackoff", fmt.Sprintf("(%s, %s)", c.backoff.min, c.backoff.max), "0 < min <= max"))
	}
	if c.deliveryTimeout <= 0 {
		errs = append(errs, configError("WithDeliveryTimeout", c.deliveryTimeout, "a duration > 0"))
	}
	if c.partitioner == nil {
		errs = append(errs, configError("WithPartitioner", "nil", "a Partitioner"))
	}
	return errors.Join(errs...)
}

// WithMaxBufferedBytes bounds the bytes of records waiting to be written
// (in batches being filled, queued or in flight). When it is reached,
// Produce blocks until space frees up or its context ends. Default 64 MiB.
func WithMaxBufferedBytes(n int64) ProducerOption {
	return producerOption(func(c *producerConfig) { c.maxBufferedBytes = n })
}

// WithBatchBytes sets the size, before compression, at which a partition's
// batch is closed and sent without waiting for the linger. A record larger
// than this travels alone in its own batch. Default 1 MiB.
func WithBatchBytes(n int) ProducerOption {
	return producerOption(func(c *producerConfig) { c.batchBytes = n })
}

// WithLinger sets how long a batch waits for more records after its first
// before it is sent: more latency, fewer and larger requests. Zero sends as
// soon as the partition has nothing in flight (records arriving meanwhile
// still share a batch). Default 5 ms.
func WithLinger(d time.Duration) ProducerOption {
	return producerOption(func(c *producerConfig) { c.linger = d })
}

// WithCompression sets the codec of the batches. Default none.
func WithCompression(codec record.Compression) ProducerOption {
	return producerOption(func(c *producerConfig) { c.compression = codec })
}

// WithAcks sets when the broker answers a produce: ACKS_ALL (default, and
// what ACKS_UNSPECIFIED means) once every in-sync replica has the batch,
// ACKS_LEADER once the leader's log has it, ACKS_NONE once the leader wrote
// it, before any fsync: the last two can lose acknowledged records when a
// broker fails.
func WithAcks(acks stratav1.Acks) ProducerOption {
	return producerOption(func(c *producerConfig) { c.acks = acks })
}

// WithMaxInFlightPerPartition sets how many batches of one partition may be
// awaiting their answer at once. The default, 1, keeps records in the order
// they were produced, retries included. More raises the throughput of a
// partition over a slow link. With idempotence (the default) it may be at
// most 5, as with Kafka: the leader recognises a resent batch among the
// producer's last five, and the producer holds back a new batch while one
// five batches before it is still unanswered; records keep the order they
// were produced in, since batches are numbered in that order and the leader
// takes each producer's batches only in sequence. Without idempotence a
// retried batch can land after a later one.
func WithMaxInFlightPerPartition(n int) ProducerOption {
	return producerOption(func(c *producerConfig) { c.maxInFlight = n })
}

// WithRetries bounds how many times a batch is sent again after a
// retriable error (NOT_LEADER, NOT_ENOUGH_REPLICAS, THROTTLED, a broken
// connection, ...). Default -1: no bound other than the delivery timeout
// and each record's context. Without idempotence (WithIdempotence) a retry
// after a lost answer can write a batch twice: delivery is at least once.
func WithRetries(n int) ProducerOption {
	return producerOption(func(c *producerConfig) { c.retries = n })
}

// WithRetryBackoff sets the wait before retries: starting at min, doubling
// up to max, with random jitter; a THROTTLED answer's retry delay is
// honoured when longer. Default 100 ms to 1 s.
func WithRetryBackoff(min, max time.Duration) ProducerOption {
	return producerOption(func(c *producerConfig) { c.backoff = backoff{min: min, max: max} })
}

// WithDeliveryTimeout bounds the time from Produce returning to the done
// callback, retries included: a record not written by then fails with the
// last error seen. Default 2 minutes.
func WithDeliveryTimeout(d time.Duration) ProducerOption {
	return producerOption(func(c *producerConfig) { c.deliveryTimeout = d })
}

// WithPartitioner replaces the default partitioner (NewDefaultPartitioner)
// for records produced with AnyPartition.
func WithPartitioner(p Partitioner) ProducerOption {
	return producerOption(func(c *producerConfig) { c.partitioner = p })
}

// WithIdempotence turns the idempotent producer on (the default) or off.
// The producer takes a producer id from the cluster before its first batch
// and stamps each batch with it and a per-partition sequence number, fixed
// when the batch is first sent; a retry resends the same bytes, so a leader
// that already wrote the batch (its answer was lost, it timed out, it failed
// over after replicating it) answers with the original offsets instead of
// writing it again: every acknowledged record is in its partition once, as
// long as the leader still knows the producer (its last 5 batches per
// partition are remembered, up to 10,000 producers per partition; brokers
// keep that across restarts, failovers and the cold tier).
//
// Some consequences. A batch is resent only whole, so a record whose
// context ended is still sent again while other records of its batch wait.
// When a batch fails for good after it was first sent, nobody knows whether
// the leader wrote it, so the producer takes a new producer id for the
// batches after it (a request to the controller). A leader refuses a batch
// that leaves a gap (OUT_OF_ORDER_SEQUENCE) or whose producer it does not
// know and that does not start at sequence 0 (UNKNOWN_PRODUCER_ID): with
// one batch in flight per partition (the default) that only happens when
// the leader lost acknowledged batches (acks other than ACKS_ALL, then a
// failover) or forgot the producer. The producer then moves to its next
// epoch on its own, starts every partition's sequences again at 0 (each
// once none of its batches can still be written under the old epoch) and
// resends the refused batch at once; nothing that may have been written is
// numbered again. A refused batch that may have been written before (an
// earlier send of it got no answer) fails instead, with its outcome
// unknown: ErrOutOfOrderSequence when the leader is past it, so it wrote
// it, or ErrUnknownProducerID when the leader forgot the producer and
// cannot tell. With more batches in flight a gap also appears while an
// earlier batch is retried, and resolves when that one lands.
func WithIdempotence(on bool) ProducerOption {
	return producerOption(func(c *producerConfig) { c.idempotent = on })
}
