package broker

import (
	"container/heap"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// housekeeper tells the housekeeping loop which replicas have work, so that
// a broker of thousands of idle replicas visits none of them. It knows two
// things: replicas marked dirty since their last visit (an append, a move
// of the high watermark or durable end, a follower's report that may let
// it join the ISR, an applied metadata change), and for every other replica
// the earliest time its visit computed it has work to do without any of
// those events (a roll by segment.ms, an ISR lag check, a retry). A visit
// recomputes the replica's deadline from scratch; a deadline may come early
// (the visit finds nothing and sets the next), never late, so nothing is
// missed as long as every event that can bring work sooner marks the
// replica (docs/DESIGN.md, "The housekeeper: visit only replicas with work", lists them).
//
// It has no clock of its own: the broker's loop takes what is due at
// time.Now, the simulation at its virtual time.
type housekeeper struct {
	mu struct {
		sync.Mutex
		dirty []*partition
		due   dueQueue
	}
	// kick wakes the loop when a replica is marked dirty or given an
	// earlier deadline than the one the loop sleeps for.
	kick chan struct{}
}

// houseState is a replica's place in its housekeeper. dirty is set by any
// goroutine (markDirty); the rest is guarded by the housekeeper's lock.
type houseState struct {
	h       *housekeeper
	dirty   atomic.Bool
	at      time.Time // the deadline while in the queue
	index   int       // in the queue, -1 when not
	member  bool      // added, and not removed since
	inDirty bool      // in the dirty list
	// checkpointAt is when the loop checkpoints a log whose state moved;
	// zero when none is due. Only the housekeeping visit uses it.
	checkpointAt time.Time
}

func newHousekeeper() *housekeeper {
	return &housekeeper{kick: make(chan struct{}, 1)}
}

// add makes p one of the replicas the housekeeper tracks, dirty: its first
// visit finds what it has to do.
func (h *housekeeper) add(p *partition) {
	h.mu.Lock()
	s := &p.house
	s.h, s.member = h, true
	s.dirty.Store(true)
	if !s.inDirty {
		s.inDirty = true
		h.mu.dirty = append(h.mu.dirty, p)
	}
	h.mu.Unlock()
	h.wake()
}

// remove forgets p (closed, or no longer held): marks are ignored from now
// on and a deadline it had is dropped.
func (h *housekeeper) remove(p *partition) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &p.house
	s.member = false
	if s.index >= 0 {
		heap.Remove(&h.mu.due, s.index)
	}
	if s.inDirty {
		h.mu.dirty = slices.DeleteFunc(h.mu.dirty, func(q *partition) bool { return q == p })
		s.inDirty = false
	}
}

// markDirty asks for a visit of p at the housekeeping loop's next round.
// It is cheap when p is marked already (a busy replica's appends).
func (p *partition) markDirty() {
	s := &p.house
	// A load before the swap: a busy replica's appends, marked already,
	// only read the flag.
	if s.h == nil || s.dirty.Load() || !s.dirty.CompareAndSwap(false, true) {
		return
	}
	h := s.h
	h.mu.Lock()
	if s.member && !s.inDirty {
		s.inDirty = true
		h.mu.dirty = append(h.mu.dirty, p)
	}
	h.mu.Unlock()
	h.wake()
}

func (h *housekeeper) wake() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// take returns the replicas to visit at now: every dirty one and every one
// whose deadline has come, each once, removed from the queue. Their visit
// sets the next deadline (schedule).
func (h *housekeeper) take(now time.Time) []*partition {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.mu.dirty
	h.mu.dirty = nil
	for _, p := range out {
		p.house.inDirty = false
		p.house.dirty.Store(false)
		if p.house.index >= 0 {
			heap.Remove(&h.mu.due, p.house.index)
		}
	}
	for len(h.mu.due) > 0 && !h.mu.due[0].house.at.After(now) {
		out = append(out, heap.Pop(&h.mu.due).(*partition))
	}
	return out
}

// schedule sets p's next deadline after a visit; a zero at means none
// (until p is marked dirty).
func (h *housekeeper) schedule(p *partition, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &p.house
	if !s.member {
		return
	}
	if s.index >= 0 {
		heap.Remove(&h.mu.due, s.index)
	}
	if at.IsZero() {
		return
	}
	s.at = at
	heap.Push(&h.mu.due, p)
}

// next is the earliest deadline, if any replica has one, and whether a
// replica is dirty.
func (h *housekeeper) next() (at time.Time, ok, dirty bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.mu.due) > 0 {
		at, ok = h.mu.due[0].house.at, true
	}
	return at, ok, len(h.mu.dirty) > 0
}

// tracked is how many replicas have a deadline and how many are dirty.
func (h *housekeeper) tracked() (deadlines, dirty int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.mu.due), len(h.mu.dirty)
}

// earliest is the earlier of two deadlines, zero meaning none.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// dueQueue is a min-heap of replicas by deadline (container/heap).
type dueQueue []*partition

func (q dueQueue) Len() int           { return len(q) }
func (q dueQueue) Less(i, j int) bool { return q[i].house.at.Before(q[j].house.at) }
func (q dueQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].house.index = i
	q[j].house.index = j
}
func (q *dueQueue) Push(x any) {
	p := x.(*partition)
	p.house.index = len(*q)
	*q = append(*q, p)
}
func (q *dueQueue) Pop() any {
	old := *q
	p := old[len(old)-1]
	old[len(old)-1] = nil
	p.house.index = -1
	*q = old[:len(old)-1]
	return p
}
