package kafka

// Leader epochs on Fetch and ListOffsets (KIP-320), the broker's rules
// (broker/leader_epoch.go) put on Kafka's fields.
//
// current_leader_epoch (Fetch v9+, ListOffsets v4+, OffsetForLeaderEpoch
// v2+) is checked against the partition's leader epoch: older is
// FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH, -1 unchecked. Fetch
// v12+'s last_fetched_epoch is compared with the leader's epoch history,
// as Kafka's leader does for every fetcher: when the fetcher's epoch ended
// earlier in the leader's log than its fetch offset, or the leader does
// not know that epoch, the partition is answered with no records and the
// diverging epoch (the largest epoch the leader knows at or below it, and
// where it ended), and the client truncates to it (franz-go, librdkafka).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
)

// fetchEpochs checks one partition of a fetch before it is read, filling
// p; done says it is answered (an error, or a diverging epoch) and is not
// to be read.
func fetchEpochs(ctx context.Context, b *broker.Broker, version int16, topic string, rp kmsg.FetchRequestTopicPartition, p *kmsg.FetchResponseTopicPartition) (done bool) {
	if version >= 9 {
		if err := b.CheckLeaderEpoch(topic, rp.Partition, rp.CurrentLeaderEpoch); err != nil {
			p.ErrorCode = codeOf(err)
			return true
		}
	}
	if version < 12 || rp.LastFetchedEpoch < 0 {
		return false
	}
	div, diverged, err := b.Diverging(topic, rp.Partition, rp.FetchOffset, rp.LastFetchedEpoch)
	if err != nil {
		p.ErrorCode = codeOf(err)
		return true
	}
	if !diverged {
		return false
	}
	p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = div.Epoch, div.EndOffset
	if ans, err := b.ListOffsets(ctx, topic, rp.Partition, broker.OffsetQuery{Latest: true}); err == nil {
		p.HighWatermark, p.LastStableOffset, p.LogStartOffset = ans.HighWatermark, ans.HighWatermark, ans.LogStartOffset
	}
	return true
}
