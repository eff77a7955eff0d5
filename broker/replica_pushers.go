package broker

// The pushers of one follower's stream, on its leader: one per partition
// the follower reports a position in, each sending that partition's
// batches in passes that run on a goroutine only while there is something
// to send (replica_leader.go says when each starts and stops).

import (
	"context"
	"sync"

	"github.com/strata-log/strata/cluster"
)

// pushers holds the pushers of one follower's stream, at most one per
// partition, and is the one owner of their goroutines: the stream's call
// starts and stops them through it, and stopAll, when the stream ends,
// stops every one it started and waits for their passes. Every pusher
// sends on the stream through send, one chunk at a time. by is used by the
// stream's goroutine only; passes start from any goroutine (a log's
// change, an acknowledgement) through spawnPass.
type pushers struct {
	ctx    context.Context // the stream's: its end stops every pusher
	stream ReplicaStream
	// spawn runs a pass's goroutine as a task of the broker
	// (Broker.goTask), so that the broker's Close waits for it too; false
	// when the broker is closing. It must not block: a log's change
	// callback calls it.
	spawn  func(run func()) bool
	sendMu sync.Mutex // one Send at a time: the pushers and refusals share the stream
	by     map[cluster.TopicPartition]*pusher

	// passes counts the pass goroutines running; ended refuses new ones
	// once stopAll began, so that none joins passes after its Wait.
	passMu sync.Mutex
	ended  bool
	passes sync.WaitGroup
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

// spawnPass runs run (a pusher's passes) on a goroutine of its own,
// unless the stream ended or the broker is closing (false).
func (s *pushers) spawnPass(run func()) bool {
	s.passMu.Lock()
	defer s.passMu.Unlock()
	if s.ended {
		return false
	}
	s.passes.Add(1)
	if !s.spawn(func() {
		defer s.passes.Done()
		run()
	}) {
		s.passes.Done()
		return false
	}
	return true
}

// running returns the pusher of tp, or nil.
func (s *pushers) running(tp cluster.TopicPartition) *pusher { return s.by[tp] }

// start makes p's pusher for tp, serving follower in epoch from position
// from, and runs its first pass; it stops the one tp had, if any. A
// broker that is closing runs no pass: the stream ends with it.
func (s *pushers) start(tp cluster.TopicPartition, p *partition, follower, epoch int32, from int64) {
	s.stop(tp)
	ps := newPusher(s.ctx, p, follower, epoch, from, s.send, s.spawnPass)
	s.by[tp] = ps
	ps.wake()
}

// stop stops the pusher of tp, if any, without waiting for a pass under
// way (stopAll does, with the others).
func (s *pushers) stop(tp cluster.TopicPartition) {
	if ps := s.by[tp]; ps != nil {
		ps.stop()
		delete(s.by, tp)
	}
}

// stopAll stops every pusher and waits for every pass started, those of
// pushers stopped before included.
func (s *pushers) stopAll() {
	s.passMu.Lock()
	s.ended = true
	s.passMu.Unlock()
	for tp := range s.by {
		s.stop(tp)
	}
	s.passes.Wait()
}

// pusher sends one partition's new batches to one follower, in one leader
// epoch: it carries out pushState's steps (replica_steps.go) over the
// stream. It sends in passes (pass), each on a goroutine only while it
// runs: a pass sends until the follower's window is full or nothing is
// left, and returns. What runs the next pass (wake) is the log's next
// change, through a one-shot callback a pass registers before it reads
// the log (hotlog.Log.AfterChange), or the follower's next
// acknowledgement (ack). So a leader of thousands of idle partitions
// holds no goroutine for each of their followers.
type pusher struct {
	ctx      context.Context
	cancel   context.CancelFunc
	p        *partition
	follower int32
	epoch    int32
	send     func(ReplicaChunk) error
	// spawn runs the passes on a goroutine (pushers.spawnPass).
	spawn func(run func()) bool
	// done is closed once the pusher is over (stopped, fenced, or its
	// stream failed) and no pass of it runs.
	done chan struct{}
	// buf is the pooled buffer the chunk being sent was read into, if any;
	// only a pass uses it.
	buf *[]byte
	// idle, when set, is called after a pass's last look at the log
	// found nothing to send, before the pass returns: tests make a change
	// there, where a watch registered too late would miss it.
	idle func()

	run struct {
		sync.Mutex
		pending bool // a wake came since the running pass began
		running bool // a goroutine runs passes
		// unwatch drops the callback waiting for the log's next change;
		// nil when none waits.
		unwatch  func()
		doneOnce bool
	}

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

func newPusher(ctx context.Context, p *partition, follower, epoch int32, from int64, send func(ReplicaChunk) error, spawn func(run func()) bool) *pusher {
	ctx, cancel := context.WithCancel(ctx)
	return &pusher{ctx: ctx, cancel: cancel, p: p, follower: follower, epoch: epoch, send: send, spawn: spawn,
		st: newPushState(from), done: make(chan struct{})}
}

// ack records the follower's new position, and runs a pass: the window
// may have room again.
func (ps *pusher) ack(leo int64) {
	ps.mu.Lock()
	ps.st.ack(leo)
	ps.mu.Unlock()
	ps.wake()
}

// wake asks for a pass: it starts a goroutine running passes, or, if one
// runs, makes it run one more. A pusher that is over runs none. It does
// not block (the log's change callback calls it).
func (ps *pusher) wake() {
	ps.run.Lock()
	defer ps.run.Unlock()
	if ps.ctx.Err() != nil {
		return
	}
	ps.run.pending = true
	if !ps.run.running && ps.spawn(ps.passes) {
		ps.run.running = true
	}
}

// logChanged is the callback of the log's next change: the watch is
// spent, and another pass runs (and watches again).
func (ps *pusher) logChanged() {
	ps.run.Lock()
	ps.run.unwatch = nil
	ps.run.Unlock()
	ps.wake()
}

// watch registers logChanged for the log's next change, unless it waits
// already.
func (ps *pusher) watch() {
	ps.run.Lock()
	defer ps.run.Unlock()
	if ps.run.unwatch == nil && ps.ctx.Err() == nil {
		ps.run.unwatch = ps.p.log.AfterChange(ps.logChanged)
	}
}

// passes runs passes while wakes come, then ends its goroutine.
func (ps *pusher) passes() {
	for {
		ps.run.Lock()
		if !ps.run.pending || ps.ctx.Err() != nil {
			ps.run.running = false
			ps.closeDoneIfOverLocked()
			ps.run.Unlock()
			return
		}
		ps.run.pending = false
		ps.run.Unlock()
		ps.pass()
	}
}

// stop ends the pusher: no pass starts after it, its log watch is
// dropped, and done closes once a pass under way returns.
func (ps *pusher) stop() {
	ps.cancel()
	ps.run.Lock()
	defer ps.run.Unlock()
	if ps.run.unwatch != nil {
		ps.run.unwatch()
		ps.run.unwatch = nil
	}
	if !ps.run.running {
		ps.closeDoneIfOverLocked()
	}
}

// end is stop from inside a pass: the pusher's epoch is over, or its
// stream failed.
func (ps *pusher) end() {
	ps.cancel()
	ps.run.Lock()
	if ps.run.unwatch != nil {
		ps.run.unwatch()
		ps.run.unwatch = nil
	}
	ps.run.Unlock()
}

func (ps *pusher) closeDoneIfOverLocked() {
	if ps.ctx.Err() != nil && !ps.run.doneOnce {
		ps.run.doneOnce = true
		close(ps.done)
	}
}

// pass sends what the follower can be sent now, and returns when nothing
// more can be (the window is full, or nothing is left), or when the
// pusher is over (fenced, stopped, or the stream failed). It registers
// its watch of the log before it reads the log: a change after that read
// calls logChanged, which runs another pass, so no change is missed
// between a pass's last look and its return.
func (ps *pusher) pass() {
	p := ps.p
	for ps.ctx.Err() == nil {
		ps.watch()
		leo, hw, start := p.log.LogEndOffset(), p.log.HighWatermark(), p.log.LogStartOffset()
		ps.mu.Lock()
		step, next := ps.st.step(p.view.Load().LeaderEpoch == ps.epoch, leo, hw, start), ps.st.next
		ps.mu.Unlock()
		c, to, ok := p.pushChunkWith(ps.alloc, ps.follower, ps.epoch, step, next, leo, hw, start, replicaChunkBytes)
		if step == pushFenced {
			ps.send(c)
			ps.end() // its epoch is over: no more passes
			return
		}
		if ok {
			ps.lend(&c)
			if err := ps.send(c); err != nil {
				ps.end()
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
		if ps.idle != nil {
			ps.idle()
		}
		return
	}
}
