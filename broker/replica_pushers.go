package broker

// The pushers of one follower's stream, on its leader: one per partition
// the follower reports a position in, each a goroutine that sends that
// partition's batches (replica_leader.go says when each starts and stops).

import (
	"context"
	"sync"

	"github.com/strata-log/strata/cluster"
)

// pushers runs the pushers of one follower's stream, at most one per
// partition, and is the one owner of their goroutines: the stream's call
// starts and stops them through it, and stopAll, when the stream ends,
// stops every one it started and waits for them. Every pusher sends on
// the stream through send, one chunk at a time. It is used by the
// stream's goroutine only (the pushers themselves call send alone).
type pushers struct {
	ctx    context.Context // the stream's: its end stops every pusher
	stream ReplicaStream
	// spawn runs a pusher's goroutine as a task of the broker
	// (Broker.goTask), so that the broker's Close waits for it too; false
	// when the broker is closing.
	spawn  func(run func()) bool
	sendMu sync.Mutex // one Send at a time: the pushers and refusals share the stream
	by     map[cluster.TopicPartition]*pusher
	wg     sync.WaitGroup
}

func newPushers(ctx context.Context, stream ReplicaStream, spawn func(run func()) bool) *pushers {
	return &pushers{ctx: ctx, stream: stream, spawn: spawn, by: map[cluster.TopicPartition]*pusher{}}
}

// send writes one chunk to the follower.
func (s *pushers) send(c ReplicaChunk) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.stream.Send(c)
}

// running returns the pusher of tp, or nil.
func (s *pushers) running(tp cluster.TopicPartition) *pusher { return s.by[tp] }

// start runs a pusher of p for tp, serving follower in epoch from
// position from; it stops the one tp had, if any. A broker that is
// closing starts none: the stream ends with it.
func (s *pushers) start(tp cluster.TopicPartition, p *partition, follower, epoch int32, from int64) {
	s.stop(tp)
	ps := newPusher(s.ctx, p, follower, epoch, from, s.send)
	s.wg.Add(1)
	if !s.spawn(func() {
		defer s.wg.Done()
		ps.run()
	}) {
		s.wg.Done()
		ps.cancel()
		return
	}
	s.by[tp] = ps
}

// stop stops the pusher of tp, if any, without waiting for it (stopAll
// does, with the others).
func (s *pushers) stop(tp cluster.TopicPartition) {
	if ps := s.by[tp]; ps != nil {
		ps.cancel()
		delete(s.by, tp)
	}
}

// stopAll stops every pusher and waits for all those started, the ones
// stopped before included.
func (s *pushers) stopAll() {
	for tp := range s.by {
		s.stop(tp)
	}
	s.wg.Wait()
}

// pusher sends one partition's new batches to one follower, in one leader
// epoch: it carries out pushState's steps (replica_steps.go) over the
// stream.
type pusher struct {
	ctx      context.Context
	cancel   context.CancelFunc
	p        *partition
	follower int32
	epoch    int32
	send     func(ReplicaChunk) error
	kick     chan struct{} // an acknowledgement arrived
	done     chan struct{} // closed when run returns
	// buf is the pooled buffer the chunk being sent was read into, if any.
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
	return &pusher{ctx: ctx, cancel: cancel, p: p, follower: follower, epoch: epoch, send: send, st: newPushState(from),
		kick: make(chan struct{}, 1), done: make(chan struct{})}
}

// ack records the follower's new position.
func (ps *pusher) ack(leo int64) {
	ps.mu.Lock()
	ps.st.ack(leo)
	ps.mu.Unlock()
	select {
	case ps.kick <- struct{}{}:
	default:
	}
}

// run pushes until the pusher's epoch is over, its stream fails or it is
// cancelled.
func (ps *pusher) run() {
	defer close(ps.done)
	p := ps.p
	for {
		changed := p.log.Changed()
		leo, hw, start := p.log.LogEndOffset(), p.log.HighWatermark(), p.log.LogStartOffset()
		ps.mu.Lock()
		step, next := ps.st.step(p.view.Load().LeaderEpoch == ps.epoch, leo, hw, start), ps.st.next
		ps.mu.Unlock()
		c, to, ok := p.pushChunkWith(ps.alloc, ps.follower, ps.epoch, step, next, leo, hw, start, replicaChunkBytes)
		if step == pushFenced {
			ps.send(c)
			return
		}
		if ok {
			ps.lend(&c)
			err := ps.send(c)
			if err != nil {
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
		select {
		case <-ps.ctx.Done():
			return
		case <-changed:
		case <-ps.kick:
		}
	}
}
