package gossip

import (
	"log/slog"
	"sync"
)

// EventKind says what happened to a member.
type EventKind int

// The kinds of membership change. A member that failed and comes back (a
// restart, or a partition that healed) joins again with EventJoin.
const (
	// EventJoin: a member became alive, including this one at Start.
	EventJoin EventKind = iota + 1
	// EventUpdate: an alive member changed its Meta.
	EventUpdate
	// EventLeave: a member left gracefully (Leave or Close).
	EventLeave
	// EventFail: failure detection declared a member dead.
	EventFail
)

// String returns "join", "update", "leave" or "fail".
func (k EventKind) String() string {
	switch k {
	case EventJoin:
		return "join"
	case EventUpdate:
		return "update"
	case EventLeave:
		return "leave"
	case EventFail:
		return "fail"
	default:
		return "unknown"
	}
}

// Member states, as in Member.State.
const (
	// StateAlive: a member that is, as far as gossip knows, running.
	StateAlive = "alive"
	// StateDead: a member failure detection declared dead.
	StateDead = "dead"
	// StateLeft: a member that left gracefully.
	StateLeft = "left"
)

// Member is one broker as gossip sees it.
type Member struct {
	// Name is the member's node name.
	Name string
	// Addr is the member's gossip host:port; a seed address for others.
	Addr string
	// Meta is what the member advertises.
	Meta Meta
	// State is StateAlive in Members() and in join and update events,
	// StateLeft in leave events and StateDead in fail events. memberlist does
	// not report suspicion, so a suspect member stays StateAlive until it is
	// declared dead, as in memberlist's own member list.
	State string
}

// Event is one membership change. Events are hints that Members() changed:
// they arrive in the order memberlist saw the changes, none is dropped while
// the Gossip runs, but a reader that needs the current state should read
// Members(), which already reflects every event queued so far.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// Member is the member it happened to, with its Meta as last known.
	Member Member
}

// eventQueue is an unbounded FIFO between memberlist's event delegate and the
// Events channel.
//
// Why unbounded: memberlist calls the delegate with its node lock held, so the
// delegate must never block, and a dropped fail or leave would leave a reader
// that only follows events wrong forever. The queue grows only while the
// reader falls behind the cluster's churn, which is a handful of events per
// broker start or stop; a warning is logged each time the backlog doubles past
// backlogWarn so a reader that stopped reading shows up in the logs.
type eventQueue struct {
	log *slog.Logger
	// kick wakes the pump after a push; size one, sent without blocking, so
	// pushes never pile up wake-ups.
	kick chan struct{}

	mu struct {
		sync.Mutex
		items  []Event
		closed bool
		warnAt int
	}
}

// backlogWarn is the first backlog length that logs a warning.
const backlogWarn = 1024

func newEventQueue(log *slog.Logger) *eventQueue {
	q := &eventQueue{log: log, kick: make(chan struct{}, 1)}
	q.mu.warnAt = backlogWarn
	return q
}

// push appends ev without blocking. After close it drops ev and returns false:
// memberlist may still report changes while it shuts down.
func (q *eventQueue) push(ev Event) bool {
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return false
	}
	q.mu.items = append(q.mu.items, ev)
	n := len(q.mu.items)
	warn := n >= q.mu.warnAt
	if warn {
		q.mu.warnAt *= 2
	}
	q.mu.Unlock()

	if warn {
		q.log.Warn("gossip event backlog growing; is Events() being read?", "backlog", n)
	}
	select {
	case q.kick <- struct{}{}:
	default:
	}
	return true
}

// pop removes the oldest event, if any.
func (q *eventQueue) pop() (Event, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.mu.items) == 0 {
		return Event{}, false
	}
	ev := q.mu.items[0]
	q.mu.items[0] = Event{}
	q.mu.items = q.mu.items[1:]
	if len(q.mu.items) == 0 {
		// Let the drained backing array go rather than slide along it.
		q.mu.items = nil
		q.mu.warnAt = backlogWarn
	}
	return ev, true
}

// len returns the backlog.
func (q *eventQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.mu.items)
}

// close drops the backlog and refuses further pushes.
func (q *eventQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.mu.closed = true
	q.mu.items = nil
}

// pump moves events from q to out, one at a time, until done is closed; then
// it closes out so that a reader ranging over Events() ends.
func (q *eventQueue) pump(out chan<- Event, done <-chan struct{}) {
	defer close(out)
	for {
		ev, ok := q.pop()
		if !ok {
			select {
			case <-q.kick:
				continue
			case <-done:
				return
			}
		}
		select {
		case out <- ev:
		case <-done:
			return
		}
	}
}
