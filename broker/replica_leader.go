package broker

// The leader's side of replication. A follower opens one stream to each
// broker it follows and tells it, per partition, its position (its log end,
// counting what its flush policy made durable) in the leader epoch it
// follows. For each such partition the leader runs a pusher that sends
// batches from that position as soon as its log has them, a few chunks
// ahead of the follower's acknowledgements, and the high watermark whenever
// it moves. Each acknowledgement moves the follower's position and the high
// watermark, and may bring the follower back into the ISR. A pusher serves
// one leader epoch: when the partition's epoch moves on, its stream says so
// and stops.

import (
	"context"
	"fmt"

	"github.com/strata-log/strata/cluster"
)

// ReplicaPosition is a follower's position in one partition.
type ReplicaPosition struct {
	Topic       string
	TopicID     string
	Partition   int32
	LeaderEpoch int32
	LogEnd      int64
	Stop        bool
}

// ReplicaUpdate is one message from a follower.
type ReplicaUpdate struct {
	FollowerID int32
	Positions  []ReplicaPosition
}

// ReplicaChunk is one message to a follower: batches of one partition, or
// why the leader cannot serve it.
type ReplicaChunk struct {
	Topic         string
	TopicID       string
	Partition     int32
	LeaderEpoch   int32
	Batches       []byte
	HighWatermark int64
	LogStart      int64
	ErrReason     Reason
	ErrMessage    string
	// ReadFrom is the offset the leader read Batches from: Batches hold
	// every batch of its log at or after it, so offsets missing before and
	// between them are gaps of the leader's log (a compacted topic's),
	// which a follower whose log end is at or past ReadFrom keeps
	// (hotlog.Log.AppendReplicaFrom). NoReadFrom when unknown (a leader
	// that predates compaction): the follower then takes no gap.
	ReadFrom int64
	// TombstoneFloor is, for a compacted topic, the lowest log end among
	// the partition's replicas as the leader knows it (0: not known):
	// the follower's cleaner removes no tombstone at or past it
	// (replicaState.tombstoneFloor).
	TombstoneFloor int64
	// Release, when set, gives back the buffer Batches lie in, once its
	// borrower is done with it. To a follower the transport lends the
	// received buffer, and the follower calls Release once it has applied
	// the chunk and keeps nothing of Batches. A leader's pusher lends its
	// read buffer to ReplicaStream.Send, which calls Release once the
	// bytes are written, possibly after it returned.
	Release func()
}

// NoReadFrom is ReplicaChunk.ReadFrom when the leader did not say.
const NoReadFrom = -1

// ReplicaStream is the transport of one follower's stream, the leader's
// end (FollowerStream is the follower's). Send keeps the chunk's Batches
// until it calls the chunk's Release (gRPC writes them from that buffer,
// without a copy); a chunk without Release it must be done with when it
// returns.
type ReplicaStream interface {
	Recv() (ReplicaUpdate, error)
	Send(ReplicaChunk) error
}

const (
	// replicaChunkBytes is the most a chunk carries (but always one whole
	// batch).
	replicaChunkBytes = 1 << 20
	// replicaWindow is how many chunks may be unacknowledged.
	replicaWindow = 4
)

// ServeReplication serves one follower's stream until it ends.
func (b *Broker) ServeReplication(ctx context.Context, stream ReplicaStream) error {
	return b.role.serveReplication(ctx, stream)
}

// serveReplication reads the follower's positions until its stream ends
// and returns why it ended: the stream's own error (from Recv, or from a
// Send that failed). A position this leader refuses is not an error of
// the stream: the refusal goes to the follower as a chunk, and the stream
// goes on. Every pusher the stream started is stopped, and waited for,
// before it returns; the pushers also stop when the broker's lifetime
// ends, whether or not the transport has ended the stream yet.
func (b clusterMember) serveReplication(ctx context.Context, stream ReplicaStream) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.life, cancel)()
	ps := newPushers(ctx, stream, func(run func()) bool {
		return b.goTask(func(context.Context) { run() })
	})
	defer ps.stopAll()
	for {
		upd, streamErr := stream.Recv()
		if streamErr != nil {
			return streamErr
		}
		for _, pos := range upd.Positions {
			if streamErr := b.servePosition(ps, upd.FollowerID, pos); streamErr != nil {
				return streamErr
			}
		}
	}
}

// servePosition acts on one position of follower: it stops the pusher of
// a partition the follower left; it counts a position this leader accepts
// and starts, replaces or moves on the partition's pusher
// (positionStep); it stops the pusher of a partition whose position it
// refuses and tells the follower why. It returns only the stream's error,
// from sending that refusal.
func (b clusterMember) servePosition(ps *pushers, follower int32, pos ReplicaPosition) error {
	tp := cluster.TopicPartition{Topic: pos.Topic, Partition: pos.Partition}
	if pos.Stop {
		ps.stop(tp)
		return nil
	}
	p, refusal := b.acceptPosition(follower, pos)
	if refusal != nil {
		ps.stop(tp)
		return ps.send(ReplicaChunk{Topic: pos.Topic, TopicID: pos.TopicID, Partition: pos.Partition, ErrReason: refusal.Reason, ErrMessage: refusal.Message})
	}
	cur := ps.running(tp)
	step := positionStartPusher
	if cur != nil {
		step = positionStep(cur.p == p, cur.epoch, pos.LeaderEpoch)
	}
	switch step {
	case positionStartPusher, positionRestartPusher:
		ps.start(tp, p, follower, pos.LeaderEpoch, pos.LogEnd)
	case positionAck:
		cur.ack(pos.LogEnd)
	}
	return nil
}

// acceptPosition counts a follower's position in a partition this broker
// leads in the epoch the follower follows, and proposes the ISR change it
// brings, if any. It returns the partition, or why the position is
// refused.
func (b clusterMember) acceptPosition(follower int32, pos ReplicaPosition) (*partition, *Error) {
	p, refusal := b.ledForReplication(pos)
	if refusal != nil {
		return nil, refusal
	}
	change, refusal := p.takeReport(follower, pos)
	if change != nil {
		b.proposeISR(p, change)
	}
	if refusal != nil {
		return nil, refusal
	}
	return p, nil
}

// takeReport counts a follower's position, and returns the ISR change it
// brings, if any. A position beyond what this leader holds or has sent the
// follower is OFFSET_OUT_OF_RANGE, as Kafka answers a fetch past the log
// end: the follower truncates by leader epoch again before it goes on.
func (p *partition) takeReport(follower int32, pos ReplicaPosition) (*isrChange, *Error) {
	verdict, change := p.followerReport(follower, pos.LeaderEpoch, pos.LogEnd)
	switch verdict {
	case reportStale:
		return nil, refuse(ReasonFencedEpoch, nil, "%s: leader epoch %d is not the current one", p.name(), pos.LeaderEpoch)
	case reportBeyond:
		end := p.log.LogEndOffset()
		p.logger.Warn("refused a follower position beyond what this leader sent it", "follower", follower, "position", pos.LogEnd, "log_end", end)
		return nil, refuse(ReasonOffsetOutOfRange, nil, "%s: position %d of broker %d is beyond what this leader holds or has sent it in epoch %d (log end %d)",
			p.name(), pos.LogEnd, follower, pos.LeaderEpoch, end)
	}
	return change, nil
}

// ledForReplication returns the partition a follower's position names if
// this broker leads it in the epoch the follower follows, else why not.
func (b *Broker) ledForReplication(pos ReplicaPosition) (*partition, *Error) {
	m := b.meta.Metadata()
	t, ok := m.Topic(pos.Topic)
	if !ok || t.ID != pos.TopicID {
		return nil, refuse(ReasonTopicNotFound, nil, "topic %q with id %s not found", pos.Topic, pos.TopicID)
	}
	info, ok := t.Partition(pos.Partition)
	if !ok {
		return nil, refuse(ReasonPartitionNotFound, nil, "%s/%d not found", pos.Topic, pos.Partition)
	}
	if info.Leader != b.id {
		return nil, b.notLeading(m, pos.Topic, pos.Partition, info.Leader)
	}
	if pos.LeaderEpoch != info.LeaderEpoch {
		return nil, refuse(ReasonFencedEpoch, nil, "%s/%d is in leader epoch %d, the follower follows %d", pos.Topic, pos.Partition, info.LeaderEpoch, pos.LeaderEpoch)
	}
	b.mu.RLock()
	p, ok := b.mu.partitions[cluster.TopicPartition{Topic: pos.Topic, Partition: pos.Partition}]
	b.mu.RUnlock()
	if !ok || p.topicID != t.ID || p.view.Load().LeaderEpoch != info.LeaderEpoch {
		return nil, refuse(ReasonLeaderNotAvailable, nil, "%s/%d: this broker leads it but has not taken the lead yet", pos.Topic, pos.Partition)
	}
	return p, nil
}

// pushChunk builds the chunk of a push step from next, in epoch, of at
// most maxBytes of batches (but always one whole batch), when the leader's
// log ends at leo with high watermark hw and local start start,
// and records what it sends the follower (before it can acknowledge it). It
// returns where what it sends ends (for pushState.sent), or false for
// nothing to send: a wait, or a read that found nothing (a truncation or
// retention raced with the step: look again).
func (p *partition) pushChunk(follower, epoch int32, step pushKind, next, leo, hw, start int64, maxBytes int) (ReplicaChunk, int64, bool) {
	return p.pushChunkWith(nil, follower, epoch, step, next, leo, hw, start, maxBytes)
}

// pushChunkWith is pushChunk reading batches into buffers from alloc (nil:
// fresh ones), as hotlog's ReadWith does.
func (p *partition) pushChunkWith(alloc func(int) []byte, follower, epoch int32, step pushKind, next, leo, hw, start int64, maxBytes int) (ReplicaChunk, int64, bool) {
	c := ReplicaChunk{Topic: p.topic, TopicID: p.topicID, Partition: p.id, LeaderEpoch: epoch, HighWatermark: hw, LogStart: start}
	if p.cfg.Load().Compacted() {
		c.TombstoneFloor = p.tombstoneFloor()
	}
	switch step {
	case pushFenced:
		return ReplicaChunk{Topic: p.topic, TopicID: p.topicID, Partition: p.id, LeaderEpoch: epoch,
			ErrReason: ReasonFencedEpoch, ErrMessage: fmt.Sprintf("%s: leader epoch %d is over", p.name(), epoch)}, next, true
	case pushOutOfRange:
		p.sentTo(follower, start, false)
		c.ErrReason, c.ErrMessage = ReasonOffsetOutOfRange, fmt.Sprintf("offset %d is below the leader's local log start %d", next, start)
		return c, start, true
	case pushBatches:
		res, err := p.log.ReadWith(alloc, next, maxBytes, leo)
		if err != nil || len(res.Data) == 0 {
			return ReplicaChunk{}, next, false
		}
		p.sentTo(follower, res.NextOffset, res.NextOffset >= leo)
		c.Batches, c.ReadFrom = res.Data, next
		return c, res.NextOffset, true
	case pushHighWatermark:
		return c, next, true
	}
	return ReplicaChunk{}, next, false
}

// EndOffsetForEpoch answers a follower about to follow this broker in its
// current epoch: the largest epoch at or below the one given that this
// broker's log knows, and where it ended.
func (b *Broker) EndOffsetForEpoch(q EpochQuery) (EpochEnd, error) {
	return b.role.endOffsetForEpoch(q)
}

func (b clusterMember) endOffsetForEpoch(q EpochQuery) (EpochEnd, error) {
	info, err := partitionInfo(b.meta.Metadata(), q.Topic, q.Partition)
	if err != nil {
		return EpochEnd{}, err
	}
	p, refusal := b.ledForReplication(ReplicaPosition{Topic: q.Topic, TopicID: q.TopicID, Partition: q.Partition, LeaderEpoch: info.LeaderEpoch})
	if refusal != nil {
		return EpochEnd{}, refusal
	}
	return p.leaderEndOffsetForEpoch(q.Epoch)
}
