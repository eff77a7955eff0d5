package broker

// Kafka's special ListOffsets queries (v7+), on a partition this broker
// leads, beside ListOffsets' earliest, latest and by time:
//
//   - OffsetMaxTimestamp (-3, KIP-734): the first record with the largest
//     timestamp in the hot tier, with that timestamp. Kafka looks only at
//     the local log too; a record older than local retention is not
//     considered. Nothing committed: offset and time -1. A record with the
//     largest time that is not committed yet is not answered (-1) until
//     it is: a client is never told an offset it cannot read.
//   - OffsetEarliestLocal (-4, KIP-405): the hot tier's first offset.
//   - OffsetLatestTiered (-5, KIP-1005): the last offset in the cold tier,
//     -1 when it holds none (or the topic is not tiered).
//
// Both -4 and -5 answer time -1. A read replica, which has no hot tier,
// refuses them (INVALID_REQUEST).

import "context"

// SpecialOffset is one of Kafka's special ListOffsets queries.
type SpecialOffset int

// The special queries, by their Kafka timestamps.
const (
	OffsetMaxTimestamp  SpecialOffset = -3
	OffsetEarliestLocal SpecialOffset = -4
	OffsetLatestTiered  SpecialOffset = -5
)

// ListSpecialOffset answers a special query (see above).
func (b *Broker) ListSpecialOffset(ctx context.Context, topic string, partition int32, q SpecialOffset) (OffsetAnswer, error) {
	return b.role.listSpecialOffset(ctx, topic, partition, q)
}

func (b clusterMember) listSpecialOffset(ctx context.Context, topic string, partition int32, q SpecialOffset) (OffsetAnswer, error) {
	p, err := b.leaderPartition(topic, partition)
	if err != nil {
		return OffsetAnswer{}, err
	}
	if err := b.ensureTier(ctx, p); err != nil {
		return OffsetAnswer{}, err
	}
	ans := OffsetAnswer{Offset: -1, TimestampMs: -1, LogStartOffset: p.logStart(), HighWatermark: p.log.HighWatermark()}
	switch q {
	case OffsetEarliestLocal:
		ans.Offset = p.log.LogStartOffset()
	case OffsetLatestTiered:
		if st := p.tier.Load(); st.coldEnd >= 0 {
			ans.Offset = st.coldEnd - 1
		}
	case OffsetMaxTimestamp:
		maxTs := int64(-1)
		for _, s := range p.log.Segments() {
			maxTs = max(maxTs, s.MaxTimestamp)
		}
		if maxTs < 0 {
			return ans, nil
		}
		off, ts, found, err := p.log.OffsetForTimestamp(maxTs)
		if err != nil {
			return OffsetAnswer{}, p.readError(0, err)
		}
		if found && off < ans.HighWatermark {
			ans.Offset, ans.TimestampMs = off, ts
		}
	default:
		return OffsetAnswer{}, InvalidRequest("%s/%d: no special offset query %d", topic, partition, q)
	}
	return ans, nil
}
