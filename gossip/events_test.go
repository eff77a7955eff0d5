package gossip

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func TestEventKindString(t *testing.T) {
	for k, want := range map[EventKind]string{EventJoin: "join", EventUpdate: "update", EventLeave: "leave", EventFail: "fail", 0: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(k), got, want)
		}
	}
}

// A reader that does not read at all must not block memberlist's delegate,
// and once it reads it gets every event, in order.
func TestSlowReaderLosesNoEvents(t *testing.T) {
	const n = 10_000
	q := newEventQueue(slog.New(slog.DiscardHandler))
	d := newDelegate(slog.New(slog.DiscardHandler), q)
	meta, err := nodeMeta{Meta: sampleMeta()}.encode()
	if err != nil {
		t.Fatal(err)
	}

	// Nobody reads while memberlist reports n changes. Each call must return
	// at once: memberlist holds its node lock while calling.
	start := time.Now()
	for i := range n {
		node := &memberlist.Node{Name: fmt.Sprintf("n%d", i), Addr: []byte{127, 0, 0, 1}, Port: 1, Meta: meta}
		if i%2 == 0 {
			d.NotifyJoin(node)
		} else {
			node.State = memberlist.StateDead
			d.NotifyLeave(node)
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("%d delegate calls with no reader took %v", n, took)
	}
	if got := q.len(); got != n {
		t.Fatalf("backlog %d, want %d", got, n)
	}

	out := make(chan Event, eventChanSize)
	done := make(chan struct{})
	pumped := make(chan struct{})
	go func() { q.pump(out, done); close(pumped) }()
	for i := range n {
		select {
		case ev := <-out:
			wantKind := EventJoin
			if i%2 == 1 {
				wantKind = EventFail
			}
			if want := fmt.Sprintf("n%d", i); ev.Member.Name != want || ev.Kind != wantKind {
				t.Fatalf("event %d = %v %s, want %v %s", i, ev.Kind, ev.Member.Name, wantKind, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d never arrived", i)
		}
	}
	close(done)
	<-pumped
	if _, ok := <-out; ok {
		t.Fatal("out not closed after the pump ended")
	}
	if q.close(); q.push(Event{}) {
		t.Fatal("push after close accepted")
	}
}

// The member table follows the events and hides members that left or failed.
func TestDelegateTable(t *testing.T) {
	q := newEventQueue(slog.New(slog.DiscardHandler))
	d := newDelegate(slog.New(slog.DiscardHandler), q)
	node := func(name string, id int32, leaving bool) *memberlist.Node {
		meta, err := nodeMeta{Meta: Meta{BrokerID: id}, Leaving: leaving}.encode()
		if err != nil {
			t.Fatal(err)
		}
		return &memberlist.Node{Name: name, Addr: []byte{127, 0, 0, 1}, Port: uint16(id), Meta: meta}
	}
	d.NotifyJoin(node("c", 3, false))
	d.NotifyJoin(node("a", 1, false))
	d.NotifyJoin(node("b", 2, false))
	d.NotifyJoin(node("d", 4, false))
	d.NotifyUpdate(node("b", 2, true)) // the leaving mark: no event
	d.NotifyLeave(node("b", 2, true))  // gone with the mark: a leave
	d.NotifyLeave(node("d", 4, false)) // gone without: a failure
	if err := d.NotifyAlive(&memberlist.Node{Name: "x", Meta: []byte("not a broker")}); err == nil {
		t.Fatal("NotifyAlive accepted undecodable meta")
	}
	members := d.snapshot()
	if len(members) != 2 || members[0].Name != "a" || members[1].Name != "c" || members[0].Addr != "127.0.0.1:1" || members[0].State != StateAlive {
		t.Fatalf("snapshot = %+v", members)
	}
	var got []string
	for {
		ev, ok := q.pop()
		if !ok {
			break
		}
		got = append(got, fmt.Sprintf("%s:%s:%s", ev.Kind, ev.Member.Name, ev.Member.State))
	}
	want := []string{"join:c:alive", "join:a:alive", "join:b:alive", "join:d:alive", "leave:b:left", "fail:d:dead"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}
