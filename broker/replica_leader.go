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
	"sync/atomic"

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
	// Release, when set, gives back the buffer Batches lie in, once its
	// borrower is done with it. To a follower the transport lends the
	// received buffer, and the follower calls Release once it has applied
	// the chunk and keeps nothing of Batches. A leader's pusher lends its
	// read buffer to ReplicaStream.Send, which calls Release once the
	// bytes are written, possibly after it returned.
	Release func()
}

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

func (b clusterMember) serveReplication(ctx context.Context, stream ReplicaStream) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sendMu sync.Mutex
	send := func(c ReplicaChunk) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(c)
	}
	pushers := map[cluster.TopicPartition]*pusher{}
	// retired are pushers replaced or stopped while the stream went on:
	// a pass of theirs may still be under way.
	var retired []*pusher
	defer func() {
		for _, ps := range pushers {
			ps.cancel()
		}
		for _, ps := range retired {
			ps.cancel()
		}
		for _, ps := range pushers {
			ps.passes.stop()
		}
		for _, ps := range retired {
			ps.passes.stop()
		}
	}()
	retire := func(tp cluster.TopicPartition) {
		if ps := pushers[tp]; ps != nil {
			ps.cancel()
			retired = append(retired, ps)
			delete(pushers, tp)
		}
	}
	for {
		upd, err := stream.Recv()
		if err != nil {
			return err
		}
		for _, pos := range upd.Positions {
			tp := cluster.TopicPartition{Topic: pos.Topic, Partition: pos.Partition}
			if pos.Stop {
				retire(tp)
				continue
			}
			p, err := b.ledForReplication(pos)
			if err == nil {
				var change *isrChange
				if change, err = p.takeReport(upd.FollowerID, pos); change != nil {
					b.proposeISR(p, change)
				}
			}
			if err != nil {
				retire(tp)
				var be *Error
				errors.As(err, &be)
				if serr := send(ReplicaChunk{Topic: pos.Topic, TopicID: pos.TopicID, Partition: pos.Partition, ErrReason: be.Reason, ErrMessage: be.Message}); serr != nil {
					return serr
				}
				continue
			}
			ps := pushers[tp]
			step := positionStartPusher
			if ps != nil {
				step = positionStep(ps.p == p, ps.epoch, pos.LeaderEpoch)
			}
			switch step {
			case positionRestartPusher:
				retire(tp)
				fallthrough
			case positionStartPusher:
				ps = newPusher(ctx, p, upd.FollowerID, pos.LeaderEpoch, pos.LogEnd, send)
				pushers[tp] = ps
				ps.passes.kick()
			case positionAck:
				ps.ack(pos.LogEnd)
			}
		}
	}
}

// takeReport counts a follower's position, and returns the ISR change it
// brings, if any. A position beyond what this leader holds or has sent the
// follower is OFFSET_OUT_OF_RANGE, as Kafka answers a fetch past the log
// end: the follower truncates by leader epoch again before it goes on.
func (p *partition) takeReport(follower int32, pos ReplicaPosition) (*isrChange, error) {
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
// epoch: it carries out pushState's steps (replica_steps.go) over the
// stream. It runs on a goroutine of its own only while it has something
// to send (passes): an idle pusher waits for the log's next change
// through a callback (hotlog.Log.AfterChange) and for the follower's next
// acknowledgement (ack), so a leader of thousands of idle partitions
// holds no goroutine for each of their followers.
type pusher struct {
	ctx      context.Context
	cancel   context.CancelFunc
	p        *partition
	follower int32
	epoch    int32
	send     func(ReplicaChunk) error
	// passes runs pass whenever the log changed or an acknowledgement
	// came, one at a time.
	passes advancer
	// watching is set while a callback waits for the log's next change.
	watching atomic.Bool
	// buf is the pooled buffer the chunk being sent was read into, if any;
	// only a pass uses it.
	buf *[]byte

	mu sync.Mutex
	st pushState
}

// chunkBuffers are the buffers pushers read chunks into, each taken for
// one chunk and given back once it is written to the follower's stream
// (the chunk's Release): a fresh buffer for every chunk
// was most of what a leader allocated while it served followers, and a
// buffer per pusher would hold a mebibyte for each idle partition and
// follower.
var chunkBuffers = sync.Pool{New: func() any { b := make([]byte, replicaChunkBytes); return &b }}

// alloc lends a buffer for a log read of n bytes: a pooled one, unless n
// is more than a chunk (one batch larger than replicaChunkBytes).
func (ps *pusher) alloc(n int) []byte {
	if n > replicaChunkBytes {
		return make([]byte, n)
	}
	if ps.buf == nil {
		ps.buf = chunkBuffers.Get().(*[]byte)
	}
	return (*ps.buf)[:n]
}

// release gives back the buffer of a read that found nothing to send.
func (ps *pusher) release() {
	if ps.buf != nil {
		chunkBuffers.Put(ps.buf)
		ps.buf = nil
	}
}

// lend hands the chunk's buffer to the stream: Send calls c.Release once
// it has written Batches, and the pusher reads its next chunk into
// another buffer. A batch larger than a chunk was read into a buffer of
// its own, which needs no giving back.
func (ps *pusher) lend(c *ReplicaChunk) {
	if len(c.Batches) == 0 {
		return
	}
	buf := ps.buf
	ps.buf = nil
	c.Release = func() {
		if buf != nil {
			chunkBuffers.Put(buf)
		}
	}
}

func newPusher(ctx context.Context, p *partition, follower, epoch int32, from int64, send func(ReplicaChunk) error) *pusher {
	ctx, cancel := context.WithCancel(ctx)
	ps := &pusher{ctx: ctx, cancel: cancel, p: p, follower: follower, epoch: epoch, send: send, st: newPushState(from)}
	ps.passes.run = ps.pass
	return ps
}

// ack records the follower's new position.
func (ps *pusher) ack(leo int64) {
	ps.mu.Lock()
	ps.st.ack(leo)
	ps.mu.Unlock()
	ps.passes.kick()
}

// pass sends what the follower can be sent now, and returns when there is
// nothing more (or the pusher is done: fenced, cancelled, or the stream
// failed). The log's next change, or the follower's next acknowledgement,
// runs the next pass.
func (ps *pusher) pass() {
	p := ps.p
	for ps.ctx.Err() == nil {
		// Watch before reading the log, so that a change after the
		// read runs another pass.
		if ps.watching.CompareAndSwap(false, true) {
			p.log.AfterChange(ps.logChanged)
		}
		leo, hw, start := p.log.LogEndOffset(), p.log.HighWatermark(), p.log.LogStartOffset()
		ps.mu.Lock()
		step, next := ps.st.step(p.view.Load().LeaderEpoch == ps.epoch, leo, hw, start), ps.st.next
		ps.mu.Unlock()
		c, to, ok := p.pushChunkWith(ps.alloc, ps.follower, ps.epoch, step, next, leo, hw, start, replicaChunkBytes)
		if step == pushFenced {
			ps.send(c)
			ps.cancel() // its epoch is over: no more passes
			return
		}
		if ok {
			ps.lend(&c)
			if err := ps.send(c); err != nil {
				ps.cancel()
				return
			}
			ps.mu.Lock()
			ps.st.sent(step, next, to, hw)
			ps.mu.Unlock()
			if step != pushOutOfRange {
				continue
			}
		}
		ps.release() // a read that found nothing to send
		return
	}
}

// logChanged is the callback of the log's next change: another pass.
func (ps *pusher) logChanged() {
	ps.watching.Store(false)
	ps.passes.kick()
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
		c.Batches = res.Data
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
	p, err := b.ledForReplication(ReplicaPosition{Topic: q.Topic, TopicID: q.TopicID, Partition: q.Partition, LeaderEpoch: info.LeaderEpoch})
	if err != nil {
		return EpochEnd{}, err
	}
	return p.leaderEndOffsetForEpoch(q.Epoch)
}
