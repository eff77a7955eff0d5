package gossip

import (
	"cmp"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// delegate is what memberlist calls back: it serves this member's metadata,
// refuses members whose metadata is not a broker's, and turns membership
// changes into the member table and the event queue.
//
// memberlist calls NotifyJoin, NotifyUpdate and NotifyLeave with its node lock
// held, in the order the changes happen, so updating the table there keeps it
// in step with the events; nothing here may block or call back into
// memberlist. The table exists because memberlist.Members hands out pointers
// into state it keeps changing, which cannot be read safely after its lock
// is released.
type delegate struct {
	log    *slog.Logger
	events *eventQueue

	meta struct {
		sync.Mutex
		current nodeMeta
		encoded []byte
	}
	members struct {
		sync.Mutex
		byName map[string]Member
		// failed holds the members failure detection declared dead and
		// that have not come back, with when they failed: the reconnect
		// loop's targets. Members that left are not in it.
		failed map[string]failedMember
	}
}

// failedMember is a member that failed, as last known, and when.
type failedMember struct {
	Member
	at time.Time
}

var (
	_ memberlist.Delegate      = (*delegate)(nil)
	_ memberlist.EventDelegate = (*delegate)(nil)
	_ memberlist.AliveDelegate = (*delegate)(nil)
)

func newDelegate(log *slog.Logger, events *eventQueue) *delegate {
	d := &delegate{log: log, events: events}
	d.members.byName = make(map[string]Member)
	d.members.failed = make(map[string]failedMember)
	return d
}

// setMeta replaces the Meta served from now on, keeping the leaving mark; the
// caller then asks memberlist to re-broadcast it. Nothing changes if the new
// metadata does not encode.
func (d *delegate) setMeta(m Meta) error {
	d.meta.Lock()
	defer d.meta.Unlock()
	return d.setLocked(nodeMeta{Meta: m, Leaving: d.meta.current.Leaving})
}

// setLeaving marks this member as leaving; see nodeMeta.Leaving.
func (d *delegate) setLeaving() error {
	d.meta.Lock()
	defer d.meta.Unlock()
	return d.setLocked(nodeMeta{Meta: d.meta.current.Meta, Leaving: true})
}

func (d *delegate) setLocked(n nodeMeta) error {
	b, err := n.encode()
	if err != nil {
		return err
	}
	d.meta.current, d.meta.encoded = n, b
	return nil
}

// NodeMeta returns this member's encoded metadata. Its size was checked against
// MetaMaxSize before it was stored; memberlist panics on larger metadata.
func (d *delegate) NodeMeta(limit int) []byte {
	d.meta.Lock()
	defer d.meta.Unlock()
	if len(d.meta.encoded) > limit {
		d.log.Error("meta exceeds memberlist limit; advertising none", "size", len(d.meta.encoded), "limit", limit)
		return nil
	}
	return slices.Clone(d.meta.encoded)
}

// NotifyMsg is unused: brokers exchange nothing but membership over gossip.
func (d *delegate) NotifyMsg([]byte) {}

// GetBroadcasts is unused; see NotifyMsg.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState is unused: all state is in the node metadata.
func (d *delegate) LocalState(join bool) []byte { return nil }

// MergeRemoteState is unused; see LocalState.
func (d *delegate) MergeRemoteState(buf []byte, join bool) {}

// NotifyAlive refuses a member whose metadata does not decode, so a stray
// memberlist process (another product on the same port, a broken broker)
// never enters the member table nor reaches the controller.
func (d *delegate) NotifyAlive(n *memberlist.Node) error {
	_, err := decodeNodeMeta(n.Meta)
	return err
}

// NotifyJoin records a member that became alive.
func (d *delegate) NotifyJoin(n *memberlist.Node) { d.record(joined, n) }

// NotifyUpdate records an alive member's new metadata.
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.record(updated, n) }

// NotifyLeave records a member that is gone, by leaving or by failing.
func (d *delegate) NotifyLeave(n *memberlist.Node) { d.record(gone, n) }

// change is which memberlist callback reported a node.
type change int

const (
	joined change = iota
	updated
	gone
)

// classify turns a memberlist callback into an event kind and member state;
// ok is false for a change the reader need not hear about.
//
// memberlist reports a graceful leave and a detected death through the same
// callback, and the Node it passes does not carry its state (memberlist keeps
// that in a field the Node does not see), so the leaving mark in the member's
// last metadata tells them apart. The metadata update that sets the mark is
// not reported: the leave event follows, and the Meta is unchanged.
func classify(c change, leaving bool) (kind EventKind, state string, ok bool) {
	switch {
	case c == joined:
		return EventJoin, StateAlive, true
	case c == updated && leaving:
		return 0, "", false
	case c == updated:
		return EventUpdate, StateAlive, true
	case leaving:
		return EventLeave, StateLeft, true
	default:
		return EventFail, StateDead, true
	}
}

// record copies n (memberlist reuses it), updates the table and queues the
// event.
func (d *delegate) record(c change, n *memberlist.Node) {
	nm, err := decodeNodeMeta(n.Meta)
	if err != nil {
		// NotifyAlive keeps such members out; reaching here means memberlist
		// let one in by another path. Leave it out of the table and events.
		d.log.Warn("ignoring member with undecodable meta", "member", n.Name, "err", err)
		return
	}
	kind, state, ok := classify(c, nm.Leaving)
	if !ok {
		return
	}
	m := Member{Name: n.Name, Addr: n.Address(), Meta: nm.Meta, State: state}

	d.members.Lock()
	switch {
	case kind == EventFail:
		delete(d.members.byName, m.Name)
		d.members.failed[m.Name] = failedMember{Member: m, at: time.Now()}
	case c == gone:
		delete(d.members.byName, m.Name)
		delete(d.members.failed, m.Name)
	default:
		d.members.byName[m.Name] = m
		delete(d.members.failed, m.Name)
	}
	d.members.Unlock()

	d.log.Debug("member "+kind.String(), "member", m.Name, "addr", m.Addr, "broker", m.Meta.BrokerID)
	d.events.push(Event{Kind: kind, Member: m})
}

// snapshot returns the alive members sorted by broker id, then name.
func (d *delegate) snapshot() []Member {
	d.members.Lock()
	out := make([]Member, 0, len(d.members.byName))
	for _, m := range d.members.byName {
		out = append(out, m)
	}
	d.members.Unlock()
	slices.SortFunc(out, func(a, b Member) int {
		return cmp.Or(cmp.Compare(a.Meta.BrokerID, b.Meta.BrokerID), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// failedSince returns the members that failed at or after cutoff and have
// not come back, sorted by name, and forgets (returning them as expired) the
// ones that failed before it.
func (d *delegate) failedSince(cutoff time.Time) (failed, expired []Member) {
	d.members.Lock()
	for name, f := range d.members.failed {
		if f.at.Before(cutoff) {
			delete(d.members.failed, name)
			expired = append(expired, f.Member)
			continue
		}
		failed = append(failed, f.Member)
	}
	d.members.Unlock()
	byName := func(a, b Member) int { return cmp.Compare(a.Name, b.Name) }
	slices.SortFunc(failed, byName)
	slices.SortFunc(expired, byName)
	return failed, expired
}
