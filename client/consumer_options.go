package client

import (
	"errors"
	"fmt"
	"math"
)

// ConsumerOption configures a Consumer (Client.NewConsumer).
type ConsumerOption interface {
	applyConsumer(*consumerConfig)
}

type consumerOption func(*consumerConfig)

func (o consumerOption) applyConsumer(c *consumerConfig) { o(c) }

// consumerConfig holds a Consumer's settings; defaultConsumerConfig gives
// the values used when no option says otherwise.
type consumerConfig struct {
	fetchMaxBytes      int
	maxBufferedRecords int
	resetOnOutOfRange  OffsetSpec // zero: report OFFSET_OUT_OF_RANGE
	stopAtEnd          bool
	serverDecode       bool
	onFetchRetry       func(tp TopicPartition, err error)
}

func defaultConsumerConfig() consumerConfig {
	return consumerConfig{
		fetchMaxBytes:      1 << 20,
		maxBufferedRecords: 10_000,
	}
}

func (c *consumerConfig) validate() error {
	var errs []error
	if c.fetchMaxBytes <= 0 || c.fetchMaxBytes > math.MaxInt32 {
		errs = append(errs, configError("WithFetchMaxBytes", c.fetchMaxBytes, fmt.Sprintf("bytes in [1, %d]", math.MaxInt32)))
	}
	if c.maxBufferedRecords <= 0 {
		errs = append(errs, configError("WithMaxBufferedRecords", c.maxBufferedRecords, "records > 0"))
	}
	switch c.resetOnOutOfRange.kind {
	case specNone, specEarliest, specLatest, specTime:
	default:
		errs = append(errs, configError("WithResetOnOutOfRange", c.resetOnOutOfRange, "Earliest(), Latest() or AtTime(t)"))
	}
	return errors.Join(errs...)
}

// WithFetchMaxBytes sets the bytes of batches the broker puts in one fetch
// response (a larger batch still comes whole). Default 1 MiB.
func WithFetchMaxBytes(n int) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.fetchMaxBytes = n })
}

// WithMaxBufferedRecords bounds the records fetched but not yet returned by
// Poll, over all partitions: when it is reached, fetching pauses (and the
// broker's stream with it) until Poll takes some. A single response larger
// than the bound is still let through alone. Default 10,000.
func WithMaxBufferedRecords(n int) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.maxBufferedRecords = n })
}

// WithResetOnOutOfRange makes a partition whose position is outside the log
// (retention deleted it, or it is past the end) jump to spec (Earliest(),
// Latest() or AtTime(t)) instead of Poll returning ErrOffsetOutOfRange.
// The jump is logged, since records may be skipped.
func WithResetOnOutOfRange(spec OffsetSpec) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.resetOnOutOfRange = spec })
}

// WithStopAtEnd makes the consumer read what is there and stop: each
// partition is read up to the high watermark it has when the consumer gets
// there, and once every assigned partition has reached its end (or failed)
// and its records have been returned, Poll returns io.EOF.
func WithStopAtEnd(stop bool) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.stopAtEnd = stop })
}

// WithServerDecode asks brokers for decoded records instead of raw batches.
// Raw batches (the default) are checked end to end: the consumer verifies
// each batch's CRC itself. Decoded records save the client the decoding
// and decompression, at the cost of that check and of a larger response.
func WithServerDecode(decode bool) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.serverDecode = decode })
}

// WithOnFetchRetry calls fn when a partition's fetcher meets a failure it
// retries (the broker is down, the leader moved, the stream broke), with
// that failure, and again with a nil error once, after such failures, a
// broker answers it. Between the two the fetcher retries with backoff, so
// an application can say that it is reconnecting rather than stay silent.
// fn runs on the fetcher's goroutine and must not block; a fetcher that
// stops (Unassign, Close) while retrying makes no second call.
func WithOnFetchRetry(fn func(tp TopicPartition, err error)) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.onFetchRetry = fn })
}
