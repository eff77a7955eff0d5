package broker

// The leader's checks of a producer's batch beyond its header's integrity:
// what its attributes claim, whether its records decode, and whether their
// timestamps are ones the topic accepts. Only Produce runs them, before
// offsets are assigned; a refusal changes nothing. Followers take
// replicated batches as the leader stored them, unchecked.
//
// Records (invariant 7: nothing unreadable is stored). The header checks
// (length, magic, CRC) prove the batch arrived as it was sent, not that
// anyone can read it: a count that disagrees with the records, a varint or
// length out of range, or a codec stream that does not decode would be
// acknowledged, stored and replicated, and every consumer decoding the
// partition would fail at its offset. So the leader decodes the whole
// section, as Kafka's LogValidator does, before it assigns offsets, and
// refuses the batch as CORRUPT_BATCH saying which record and field are
// wrong.
//
// Decompression is bounded by the topic's max.message.bytes: a few bytes
// of gzip or zstd can claim gigabytes, and the check must not hand a
// producer an out-of-memory switch. A batch whose records section expands
// beyond the bound is refused too; a consumer could not rely on reading it.
//
// Keys. A compacted topic (cleanup.policy compact) keeps the last record
// of each key, so a record without a key has no place in it: the whole
// batch is refused as INVALID_RECORD with Kafka's message, counted from
// the same pass over the records, and nothing is appended.
//
// Attributes. Three bits are the broker's to set: control (transaction
// markers, INVALID_RECORD from a producer, as in Kafka), transactional
// (TRANSACTIONS_NOT_SUPPORTED: Strata has no transactions, and a consumer
// would skip or misread a batch whose transaction never ends) and the
// LogAppendTime timestamp type (INVALID_TIMESTAMP). A producer cannot know
// the time the leader appends at, so a batch claiming it is refused on
// every topic rather than cleared: on a CreateTime topic, clearing the bit
// would silently turn every record's time from the header's maxTimestamp
// into its own encoded time, storing other timestamps than the producer
// sent. Kafka refuses it on LogAppendTime topics; on CreateTime topics it
// rewrites the batch, which Strata does not do. A topic's stored timestamp
// type is therefore its message.timestamp.type at the time of the append:
// the leader stamps LogAppendTime batches itself (appendAsLeader).
//
// Timestamps, under CreateTime. The records check hands back the first,
// largest and smallest record timestamp from its one pass, so a compressed
// batch is decoded once. The header must agree with the records: its
// first timestamp is the first record's and its max timestamp the largest
// (CORRUPT_BATCH otherwise: the encoding contradicts itself, the producer's
// clock is not at fault), since the time index, retention by time and
// lookups by time read the header alone. No record may be negative other
// than -1 ("no timestamp"), and none may lie further behind the leader's
// clock than message.timestamp.before.max.ms or further ahead than
// message.timestamp.after.max.ms (INVALID_TIMESTAMP, Kafka's KIP-937): a
// far-future record would hold its segment past retention.ms and answer
// every lookup by time after now. Under LogAppendTime none of this
// applies: the leader overwrites the max timestamp with its clock and
// every reader reports that time for every record, so the producer's
// timestamps are never read, and refusing a batch for them would fail a
// producer over a field the topic discards.

import (
	"errors"
	"time"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/record"
)

// checkAttributes refuses a batch that sets an attribute bit only brokers
// may set. It reads the header alone.
func checkAttributes(p *partition, cfg *config.Topic, batch record.Batch) error {
	switch {
	case batch.IsControl():
		return refuse(ReasonInvalidRecord, nil, "%s: the batch is a control batch (a transaction marker); only brokers write those", p.name())
	case batch.IsTransactional():
		return refuse(ReasonTransactionsNotSupported, nil, "%s: the batch is transactional; transactions are not supported", p.name())
	case batch.TimestampType() == record.LogAppendTime:
		return refuse(ReasonInvalidTimestamp, nil, "%s: the batch has the LogAppendTime timestamp type, which only the broker sets; send CreateTime batches (topic %s has message.timestamp.type %s)",
			p.name(), p.topic, cfg.MessageTimestampType)
	}
	return nil
}

// validateRecords checks that batch, whose header passed Validate, holds
// records every reader can decode, within cfg.MaxMessageBytes once
// decompressed, and, under CreateTime, timestamps the topic accepts at the
// partition's clock. It changes nothing. The CRC is not computed again:
// over a large batch it costs as much as the records check itself.
func validateRecords(p *partition, cfg *config.Topic, batch record.Batch) error {
	times, err := batch.CheckRecordTimes(int(cfg.MaxMessageBytes))
	switch {
	case err == nil:
	case errors.Is(err, record.ErrTooLarge):
		return refuse(ReasonCorruptBatch, err, "%s: records section decompresses to more than %d bytes (max.message.bytes of topic %s)",
			p.name(), cfg.MaxMessageBytes, p.topic).with("max", itoa(cfg.MaxMessageBytes))
	default:
		return refuse(ReasonCorruptBatch, err, "%s: %v", p.name(), err)
	}
	if cfg.Compacted() && times.Keyless > 0 {
		// Kafka's message, so clients that match it keep working; the
		// cleaner keeps one record per key, and a record without one
		// would have no place in a compacted log.
		return refuse(ReasonInvalidRecord, nil, "Compacted topic cannot accept message without key in topic partition %s (%d of the batch's %d records have no key; cleanup.policy of topic %s is %s)",
			p.name(), times.Keyless, batch.NumRecords(), p.topic, cfg.CleanupPolicy).with("keyless", itoa(int64(times.Keyless)))
	}
	if cfg.MessageTimestampType == config.LogAppendTime {
		return nil
	}
	return checkTimestamps(p, cfg, batch, times, p.now().UnixMilli())
}

// checkTimestamps holds a CreateTime batch's header and the timestamps of
// its records (times, from the records check) against the rules above, at
// the leader's clock now (ms). Every difference is taken where it cannot
// overflow: times.Min is at least 0 when it is compared, and now is.
func checkTimestamps(p *partition, cfg *config.Topic, batch record.Batch, times record.RecordTimes, now int64) error {
	if first := batch.FirstTimestamp(); first != times.First {
		return refuse(ReasonCorruptBatch, nil, "%s: the batch header's first timestamp %d is not its first record's (%d)", p.name(), first, times.First)
	}
	if m := batch.MaxTimestamp(); m != times.Max {
		return refuse(ReasonCorruptBatch, nil, "%s: the batch header's max timestamp %d is not the largest of its records' (%d)", p.name(), m, times.Max)
	}
	if times.Min < record.NoTimestamp {
		return refuse(ReasonInvalidTimestamp, nil, "%s: a record has timestamp %d (%s), before 1970; the one negative timestamp allowed is -1, for none",
			p.name(), times.Min, stamp(times.Min)).with("timestamp", itoa(times.Min))
	}
	if before := cfg.MessageTimestampBeforeMaxMs; before != config.Unbounded && times.Min != record.NoTimestamp && now-times.Min > before {
		return refuse(ReasonInvalidTimestamp, nil, "%s: a record has timestamp %d (%s), %s behind the broker's clock; message.timestamp.before.max.ms of topic %s allows %s",
			p.name(), times.Min, stamp(times.Min), config.FormatMillis(now-times.Min), p.topic, config.FormatMillis(before)).
			with("timestamp", itoa(times.Min)).with("earliest", itoa(now-before))
	}
	if after := cfg.MessageTimestampAfterMaxMs; after != config.Unbounded && times.Max-now > after {
		return refuse(ReasonInvalidTimestamp, nil, "%s: a record has timestamp %d (%s), %s ahead of the broker's clock; message.timestamp.after.max.ms of topic %s allows %s",
			p.name(), times.Max, stamp(times.Max), config.FormatMillis(times.Max-now), p.topic, config.FormatMillis(after)).
			with("timestamp", itoa(times.Max)).with("latest", itoa(now+after))
	}
	return nil
}

// stamp renders a record timestamp for people, in UTC.
func stamp(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
