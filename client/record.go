package client

import (
	"fmt"
	"time"

	"github.com/strata-log/strata/record"
)

// AnyPartition in Record.Partition lets the producer's partitioner choose.
const AnyPartition int32 = -1

// Header is one record header: a string key and a value (nil is null).
// It is the batch format's own type, so headers reach the encoder without a
// copy.
type Header = record.Header

// Record is one record as the producer takes it and the consumer returns it.
//
// A record handed to Producer.Produce belongs to the producer until its
// done callback runs: do not modify it, its Key, Value or Headers before
// then (a retry may have to encode them again).
type Record struct {
	// Topic names the topic.
	Topic string
	// Partition is the partition, or AnyPartition (-1) to let the
	// partitioner choose. Note that 0 is a real partition: a zero Record
	// always goes to partition 0. Produce sets it to the chosen partition.
	Partition int32
	// Key and Value: nil is null, which Kafka tells apart from empty. A
	// record with a non-nil key goes to the partition its key hashes to.
	Key, Value []byte
	// Headers travel with the record; nil when there are none.
	Headers []Header
	// Timestamp is the record's time; the zero time means now, and Produce
	// sets it. For a topic with LogAppendTime the broker's time replaces it
	// once the record is written. Under CreateTime it must not be before
	// 1970 (Produce refuses it with ErrInvalidTimestamp) nor further from
	// the broker's clock than the topic's message.timestamp.before.max.ms
	// (unbounded by default) and message.timestamp.after.max.ms (an hour
	// by default) allow: the broker refuses such a record's whole batch.
	Timestamp time.Time
	// Offset is set when the record has been written (producer) or read
	// (consumer).
	Offset int64
}

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String formats the partition as "topic/partition".
func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }
