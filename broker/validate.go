package broker

// The leader's check of a producer's records section (invariant 7: nothing
// unreadable is stored). The header checks (length, magic, CRC) prove the
// batch arrived as it was sent, not that anyone can read it: a count that
// disagrees with the records, a varint or length out of range, or a codec
// stream that does not decode would be acknowledged, stored and replicated,
// and every consumer decoding the partition would fail at its offset. So
// the leader decodes the whole section, as Kafka's LogValidator does, before
// it assigns offsets, and refuses the batch as CORRUPT_BATCH saying which
// record and field are wrong.
//
// Decompression is bounded by the topic's max.message.bytes: a few bytes
// of gzip or zstd can claim gigabytes, and the check must not hand a
// producer an out-of-memory switch. A batch whose records section expands
// beyond the bound is refused too; a consumer could not rely on reading it.

import (
	"errors"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/record"
)

// validateRecords checks that batch, whose header passed Validate, holds
// records every reader can decode, within cfg.MaxMessageBytes once
// decompressed. It changes nothing. The CRC is not computed again: over a
// large batch it costs as much as the records check itself.
func validateRecords(p *partition, cfg *config.Topic, batch record.Batch) error {
	err := batch.CheckRecords(int(cfg.MaxMessageBytes))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, record.ErrTooLarge):
		return refuse(ReasonCorruptBatch, err, "%s: records section decompresses to more than %d bytes (max.message.bytes of topic %s)",
			p.name(), cfg.MaxMessageBytes, p.topic).with("max", itoa(cfg.MaxMessageBytes))
	}
	return refuse(ReasonCorruptBatch, err, "%s: %v", p.name(), err)
}
