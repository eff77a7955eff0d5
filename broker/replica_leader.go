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
	"errors"
	"fmt"
	"sync"

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
}

// ReplicaStream is the transport of one follower's stream, the leader's
// end (FollowerStream is the follower's).
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
	if b.replica != nil {
		return errReadReplica("serve replication")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sendMu sync.Mutex
	send := func(c ReplicaChunk) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(c)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	pushers := map[cluster.TopicPartition]*pusher{}
	defer func() {
		for _, ps := range pushers {
			ps.cancel()
		}
	}()
	for {
		upd, err := stream.Recv()
		if err != nil {
			return err
		}
		for _, pos := range upd.Positions {
			tp := cluster.TopicPartition{Topic: pos.Topic, Partition: pos.Partition}
			if pos.Stop {
				if ps := pushers[tp]; ps != nil {
					ps.cancel()
					delete(pushers, tp)
				}
				continue
			}
			p, err := b.ledForReplication(pos)
			if err == nil {
				err = b.takeReport(p, upd.FollowerID, pos)
			}
			if err != nil {
				if ps := pushers[tp]; ps != nil {
					ps.cancel()
					delete(pushers, tp)
				}
				var be *Error
				errors.As(err, &be)
				if serr := send(ReplicaChunk{Topic: pos.Topic, TopicID: pos.TopicID, Partition: pos.Partition, ErrReason: be.Reason, ErrMessage: be.Message}); serr != nil {
					return serr
				}
				continue
			}
			ps := pushers[tp]
			if ps != nil && (ps.p != p || ps.epoch != pos.LeaderEpoch) {
				ps.cancel() // the partition was reopened, or the follower follows a new epoch
				ps = nil
			}
			if ps == nil {
				ps = newPusher(ctx, p, upd.FollowerID, pos.LeaderEpoch, pos.LogEnd, send)
				pushers[tp] = ps
				wg.Add(1)
				go func() {
					defer wg.Done()
					ps.run()
				}()
				continue
			}
			ps.ack(pos.LogEnd)
		}
	}
}

// takeReport counts a follower's position, and asks for the ISR change
// it brings. A position beyond what this leader holds or has sent the
// follower is OFFSET_OUT_OF_RANGE, as Kafka answers a fetch past the log
// end: the follower truncates by leader epoch again before it goes on.
func (b *Broker) takeReport(p *partition, follower int32, pos ReplicaPosition) error {
	verdict, change := p.followerReport(follower, pos.LeaderEpoch, pos.LogEnd)
	switch verdict {
	case reportStale:
		return refuse(ReasonFencedEpoch, nil, "%s: leader epoch %d is not the current one", p.name(), pos.LeaderEpoch)
	case reportBeyond:
		b.log.Warn("refused a follower position beyond what this leader sent it", "partition", p.name(),
			"follower", follower, "position", pos.LogEnd, "log_end", p.log.LogEndOffset())
		return refuse(ReasonOffsetOutOfRange, nil, "%s: position %d of broker %d is beyond what this leader holds or has sent it in epoch %d (log end %d)",
			p.name(), pos.LogEnd, follower, pos.LeaderEpoch, p.log.LogEndOffset())
	}
	if change != nil {
		b.proposeISR(p, change)
	}
	return nil
}

// ledForReplication returns the partition a follower's position names if
// this broker leads it in the epoch the follower follows.
func (b *Broker) ledForReplication(pos ReplicaPosition) (*partition, error) {
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
		return nil, b.notLeader(m, pos.Topic, pos.Partition, info.Leader)
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

// pusher sends one partition's new batches to one follower, in one leader
// epoch.
type pusher struct {
	ctx      context.Context
	cancel   context.CancelFunc
	p        *partition
	follower int32
	epoch    int32
	send     func(ReplicaChunk) error

	mu    sync.Mutex
	acked int64         // the follower's position
	next  int64         // where the next chunk starts
	ends  []int64       // ends of chunks sent and not yet acknowledged
	kick  chan struct{} // an acknowledgement arrived
}

func newPusher(ctx context.Context, p *partition, follower, epoch int32, from int64, send func(ReplicaChunk) error) *pusher {
	ctx, cancel := context.WithCancel(ctx)
	return &pusher{ctx: ctx, cancel: cancel, p: p, follower: follower, epoch: epoch, send: send, acked: from, next: from, kick: make(chan struct{}, 1)}
}

// ack records the follower's new position. A position behind what was
// acknowledged (it truncated) or past what was sent (it reset) restarts the
// pusher from there.
func (ps *pusher) ack(leo int64) {
	ps.mu.Lock()
	if leo < ps.acked || leo > ps.next {
		ps.next, ps.ends = leo, nil
	}
	ps.acked = leo
	for len(ps.ends) > 0 && ps.ends[0] <= leo {
		ps.ends = ps.ends[1:]
	}
	ps.mu.Unlock()
	select {
	case ps.kick <- struct{}{}:
	default:
	}
}

func (ps *pusher) chunk(c ReplicaChunk) ReplicaChunk {
	c.Topic, c.TopicID, c.Partition, c.LeaderEpoch = ps.p.topic, ps.p.topicID, ps.p.id, ps.epoch
	return c
}

func (ps *pusher) run() {
	p := ps.p
	lastHW := int64(-1)
	for {
		changed := p.log.Changed()
		if p.view.Load().LeaderEpoch != ps.epoch {
			// Deposed, or the follower will follow a newer epoch: this
			// stream's epoch is over.
			ps.send(ps.chunk(ReplicaChunk{ErrReason: ReasonFencedEpoch, ErrMessage: fmt.Sprintf("%s: leader epoch %d is over", p.name(), ps.epoch)}))
			return
		}
		ps.mu.Lock()
		next, inFlight := ps.next, len(ps.ends)
		ps.mu.Unlock()
		leo, hw, start := p.log.LogEndOffset(), p.log.HighWatermark(), p.log.LogStartOffset()
		switch {
		case next < start:
			// The follower is behind the leader's local log: what it lacks is
			// in the cold tier (or gone). It starts again at the local start.
			p.sentTo(ps.follower, start, false)
			if err := ps.send(ps.chunk(ReplicaChunk{HighWatermark: hw, LogStart: start, ErrReason: ReasonOffsetOutOfRange,
				ErrMessage: fmt.Sprintf("offset %d is below the leader's local log start %d", next, start)})); err != nil {
				return
			}
			ps.mu.Lock()
			ps.next, ps.ends = start, nil // nothing more until the follower reports
			ps.mu.Unlock()
		case next < leo && inFlight < replicaWindow:
			res, err := p.log.Read(next, replicaChunkBytes, leo)
			if err != nil || len(res.Data) == 0 {
				break // a truncation or retention raced with us: look again
			}
			p.sentTo(ps.follower, res.NextOffset, res.NextOffset >= leo)
			if err := ps.send(ps.chunk(ReplicaChunk{Batches: res.Data, HighWatermark: hw, LogStart: start})); err != nil {
				return
			}
			lastHW = hw
			ps.mu.Lock()
			if ps.next == next {
				ps.next = res.NextOffset
				ps.ends = append(ps.ends, res.NextOffset)
			}
			ps.mu.Unlock()
			continue
		case hw != lastHW:
			if err := ps.send(ps.chunk(ReplicaChunk{HighWatermark: hw, LogStart: start})); err != nil {
				return
			}
			lastHW = hw
			continue
		}
		select {
		case <-ps.ctx.Done():
			return
		case <-changed:
		case <-ps.kick:
		}
	}
}

// EndOffsetForEpoch answers a follower about to follow this broker in its
// current epoch: the largest epoch at or below the one given that this
// broker's log knows, and where it ended.
func (b *Broker) EndOffsetForEpoch(q EpochQuery) (EpochEnd, error) {
	if b.replica != nil {
		return EpochEnd{}, errReadReplica("serve replication")
	}
	info, err := partitionInfo(b.meta.Metadata(), q.Topic, q.Partition)
	if err != nil {
		return EpochEnd{}, err
	}
	p, err := b.ledForReplication(ReplicaPosition{Topic: q.Topic, TopicID: q.TopicID, Partition: q.Partition, LeaderEpoch: info.LeaderEpoch})
	if err != nil {
		return EpochEnd{}, err
	}
	return p.endOffsetForEpoch(q.Epoch), nil
}
