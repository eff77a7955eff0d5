package broker

// Leader epochs as clients see them (Kafka's KIP-320). A client that read
// a partition's leader epoch from metadata sends it with its fetches and
// offset queries; the broker compares it with the epoch its own metadata
// has: an older one is FENCED_EPOCH (the client's metadata is stale: it
// refreshes and retries), a newer one is LEADER_NOT_AVAILABLE caused by
// ErrUnknownLeaderEpoch (this broker has not caught up yet: retry), and -1
// is not checked. And a client that suspects its log diverged after an
// unclean leader change asks where an epoch ended in the leader's log
// (OffsetForLeaderEpoch), answered from the leader's epoch history, as the
// leader answers its followers (truncation.go), without the follower-only
// rule for epochs older than the history.

import (
	"errors"

	"github.com/strata-log/strata/hotlog"
)

// ErrUnknownLeaderEpoch is the cause of a LEADER_NOT_AVAILABLE refusal
// when the caller knows a newer leader epoch than this broker: a front end
// may tell it apart (Kafka's UNKNOWN_LEADER_EPOCH).
var ErrUnknownLeaderEpoch = errors.New("broker: leader epoch newer than this broker knows")

// CheckLeaderEpoch checks a caller's leader epoch of a partition against
// this broker's metadata (see above); epoch < 0 is not checked, and
// neither is anything on a read replica, which has no leaders.
func (b *Broker) CheckLeaderEpoch(topic string, partition, epoch int32) error {
	return b.role.checkLeaderEpoch(topic, partition, epoch)
}

func (b clusterMember) checkLeaderEpoch(topic string, partition, epoch int32) error {
	if epoch < 0 {
		return nil
	}
	info, err := partitionInfo(b.meta.Metadata(), topic, partition)
	if err != nil {
		return err
	}
	return epochCheck(topic, partition, info.LeaderEpoch, epoch)
}

// epochCheck compares a caller's epoch with the current one.
func epochCheck(topic string, partition, current, asked int32) error {
	switch {
	case asked < current:
		return refuse(ReasonFencedEpoch, nil, "%s/%d: leader epoch %d is older than the current %d", topic, partition, asked, current)
	case asked > current:
		return refuse(ReasonLeaderNotAvailable, ErrUnknownLeaderEpoch, "%s/%d: leader epoch %d is newer than this broker's %d", topic, partition, asked, current)
	}
	return nil
}

// LeaderEpochEnd answers where epoch ended in the log of a partition this
// broker leads: the largest epoch at or below it in the leader's history
// and the start of the next one, or the log end for the latest; an epoch
// older than the history gets itself and the history's first start, one
// newer than it (or -1) hotlog.UndefinedEpoch and -1 (Kafka's rules,
// hotlog.Log.EndOffsetForEpoch).
func (b *Broker) LeaderEpochEnd(topic string, partition, epoch int32) (EpochEnd, error) {
	return b.role.leaderEpochEnd(topic, partition, epoch)
}

func (b clusterMember) leaderEpochEnd(topic string, partition, epoch int32) (EpochEnd, error) {
	p, err := b.leaderPartition(topic, partition)
	if err != nil {
		return EpochEnd{}, err
	}
	e, end := p.log.EndOffsetForEpoch(epoch)
	return EpochEnd{Epoch: e, EndOffset: end}, nil
}

// Diverging is what a fetch in a partition this broker leads, at offset
// after a batch of leader epoch lastEpoch, must be told when the
// fetcher's log parted from the leader's (Kafka's diverging epoch, Fetch
// v12+): the largest epoch at or below lastEpoch that the leader knows
// and where it ended, when that epoch is older than lastEpoch or ends
// before offset; ok is false when the fetcher's log agrees. An epoch older
// than the leader's history (a log reset to the cold tier forgets what
// came before) is not checked: nothing here can tell.
func (b *Broker) Diverging(topic string, partition int32, offset int64, lastEpoch int32) (EpochEnd, bool, error) {
	return b.role.diverging(topic, partition, offset, lastEpoch)
}

func (b clusterMember) diverging(topic string, partition int32, offset int64, lastEpoch int32) (EpochEnd, bool, error) {
	if lastEpoch < 0 {
		return EpochEnd{}, false, nil
	}
	p, err := b.leaderPartition(topic, partition)
	if err != nil {
		return EpochEnd{}, false, err
	}
	h := p.log.Epochs()
	if len(h) == 0 || lastEpoch < h[0].Epoch {
		return EpochEnd{}, false, nil
	}
	e, end := p.log.EndOffsetForEpoch(lastEpoch)
	if e == hotlog.UndefinedEpoch || end < 0 {
		// lastEpoch is newer than the leader's history: the fetcher read
		// what this leader never had. Kafka answers OFFSET_OUT_OF_RANGE.
		return EpochEnd{}, false, refuse(ReasonOffsetOutOfRange, nil, "%s/%d: last fetched epoch %d is newer than the leader's %d", topic, partition, lastEpoch, h[len(h)-1].Epoch)
	}
	if e < lastEpoch || end < offset {
		return EpochEnd{Epoch: e, EndOffset: end}, true, nil
	}
	return EpochEnd{}, false, nil
}

// EpochAt is the leader epoch of the record at offset in a partition this
// broker leads, from its epoch history: the epoch of the latest entry
// starting at or before offset (for the log end, the latest epoch). -1
// when the history does not reach back that far (cold data of a log
// reset to the cold tier), offset is negative, or the partition is not
// led here.
func (b *Broker) EpochAt(topic string, partition int32, offset int64) int32 {
	return b.role.epochAt(topic, partition, offset)
}

func (b clusterMember) epochAt(topic string, partition int32, offset int64) int32 {
	if offset < 0 {
		return -1
	}
	p, err := b.leaderPartition(topic, partition)
	if err != nil {
		return -1
	}
	epoch := int32(-1)
	for _, e := range p.log.Epochs() {
		if e.StartOffset > offset {
			break
		}
		epoch = e.Epoch
	}
	return epoch
}
