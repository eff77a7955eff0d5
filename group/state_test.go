package group

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"
)

// store is a Persist target: what a coordinator wrote last, per group.
type store struct {
	mu     sync.Mutex
	groups map[string]State
	writes int
	fail   error // returned, without storing, while set
}

func (s *store) persist(_ context.Context, group string, st *State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.writes++
	if s.groups == nil {
		s.groups = map[string]State{}
	}
	if st == nil {
		delete(s.groups, group)
	} else {
		s.groups[group] = *st
	}
	return nil
}

func (s *store) state() map[string]State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.groups)
}

func persistedCoordinator(topics map[string]int32, clk *clock, s *store) *Coordinator {
	return NewCoordinator(Config{
		Partitions: func(t string) int32 { return topics[t] },
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:        clk.now,
		Persist:    s.persist,
	})
}

// settle beats every member until none of their answers changes.
func settle(t *testing.T, c *Coordinator, clk *clock, ms ...*testMember) {
	t.Helper()
	for range 10 {
		for _, m := range ms {
			must(t, m.beat(t, c, "g", []string{"t"}, clk.now()))
		}
	}
}

// TestResumeKeepsMembersAndOwners: a coordinator resumed from what the
// previous one persisted knows every member, its epoch and what it owns;
// it grants nobody a partition its owner may still be reading until that
// owner's session, started afresh at the resume, expires; and it accepts
// the members' commits, including a retry of one the old coordinator
// applied.
func TestResumeKeepsMembersAndOwners(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	topics := map[string]int32{"t": 6}
	var s store
	old := persistedCoordinator(topics, clk, &s)
	var a, b, c testMember
	must(t, a.beat(t, old, "g", []string{"t"}, clk.now()))
	must(t, b.beat(t, old, "g", []string{"t"}, clk.now()))
	must(t, c.beat(t, old, "g", []string{"t"}, clk.now()))
	settle(t, old, clk, &a, &b, &c)
	if len(a.owned) != 2 || len(b.owned) != 2 || len(c.owned) != 2 {
		t.Fatalf("owned %v %v %v", a.owned, b.owned, c.owned)
	}
	commit := func(co *Coordinator, m *testMember) error {
		return co.Commit("g", m.id, m.epoch, m.owned, func() error { return nil })
	}
	must(t, commit(old, &a))
	old.Close()

	// The controller moves; the new coordinator resumes the group.
	clk.advance(2 * time.Second)
	next := persistedCoordinator(topics, clk, &s)
	must(t, next.Resume(s.state()))
	d, ok := next.Describe("g")
	if !ok || len(d.Members) != 3 || d.State != StateStable {
		t.Fatalf("resumed group: %+v %v", d, ok)
	}
	for _, md := range d.Members {
		if !md.LastHeartbeat.Equal(clk.now()) {
			t.Fatalf("member %s last heard of at %v; its session should start at the resume, %v", md.ID, md.LastHeartbeat, clk.now())
		}
	}
	// The commit the old coordinator applied, retried: accepted.
	must(t, commit(next, &a))

	// A newcomer gets nothing its owners may still be reading.
	var n testMember
	must(t, n.beat(t, next, "g", []string{"t"}, clk.now()))
	if len(n.owned) != 0 {
		t.Fatalf("newcomer was granted %v, which the resumed members own", n.owned)
	}
	clk.advance(2 * time.Second) // within the old members' fresh sessions (3s)
	must(t, n.beat(t, next, "g", nil, clk.now()))
	if len(n.owned) != 0 {
		t.Fatalf("newcomer was granted %v before the owners' sessions expired", n.owned)
	}
	// The old members beat the new coordinator with their old ids and
	// epochs: recognised; they give up what the newcomer is to get.
	for _, m := range []*testMember{&a, &b, &c} {
		before := m.owned
		must(t, m.beat(t, next, "g", nil, clk.now()))
		for _, tp := range m.owned {
			if !slices.Contains(before, tp) {
				t.Fatalf("member %s was given %s while the newcomer waits", m.id, tp)
			}
		}
		must(t, commit(next, m))
	}
	settle(t, next, clk, &a, &b, &c, &n)
	all := slices.Concat(a.owned, b.owned, c.owned, n.owned)
	SortPartitions(all)
	if !slices.Equal(all, allOf("t", 6)) || len(n.owned) == 0 {
		t.Fatalf("after the handover: a %v b %v c %v newcomer %v", a.owned, b.owned, c.owned, n.owned)
	}

	// A member that never comes back loses its partitions only when its
	// fresh session expires.
	var s2 store
	third := persistedCoordinator(topics, clk, &s2)
	must(t, third.Resume(s.state()))
	clk.advance(2 * time.Second)
	var late testMember
	must(t, late.beat(t, third, "g", []string{"t"}, clk.now()))
	if len(late.owned) != 0 {
		t.Fatalf("granted %v 2s after the resume", late.owned)
	}
	clk.advance(1100 * time.Millisecond) // every resumed session (3s) has expired
	must(t, late.beat(t, third, "g", nil, clk.now()))
	if !slices.Equal(late.owned, allOf("t", 6)) {
		t.Fatalf("after the resumed members expired, the one live member owns %v", late.owned)
	}
}

func allOf(topic string, n int32) []TopicPartition { return all(topic, n) }

// TestAnswersAreDurable: every answer's member id, epoch and grants are in
// the persisted state before the answer leaves; a failed write fails the
// heartbeat (nothing is granted), and the next heartbeat writes it. A
// heartbeat that changes nothing writes nothing.
func TestAnswersAreDurable(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	var s store
	c := persistedCoordinator(map[string]int32{"t": 4}, clk, &s)
	durable := func(m *testMember) {
		t.Helper()
		st, ok := s.state()["g"]
		if !ok {
			t.Fatal("no state persisted")
		}
		for _, ms := range st.Members {
			if ms.ID != m.id {
				continue
			}
			if ms.Epoch != m.epoch {
				t.Fatalf("member %s answered epoch %d, persisted %d", m.id, m.epoch, ms.Epoch)
			}
			for _, tp := range m.owned {
				if e, ok := ms.Granted[tp]; !ok || e > m.epoch {
					t.Fatalf("member %s was answered %s, not persisted as granted (%v)", m.id, tp, ms.Granted)
				}
			}
			return
		}
		t.Fatalf("member %s answered but not persisted", m.id)
	}
	var a, b testMember
	must(t, a.beat(t, c, "g", []string{"t"}, clk.now()))
	durable(&a)
	writes := s.writes
	must(t, a.beat(t, c, "g", nil, clk.now()))
	if s.writes != writes {
		t.Fatalf("a heartbeat that changed nothing wrote %d times", s.writes-writes)
	}

	must(t, b.beat(t, c, "g", []string{"t"}, clk.now()))
	durable(&b)
	must(t, a.beat(t, c, "g", nil, clk.now())) // asked to give two up
	durable(&a)
	must(t, a.beat(t, c, "g", nil, clk.now())) // gives them up
	durable(&a)
	// b's grant cannot be written: b gets no answer, and no partition.
	s.mu.Lock()
	s.fail = errors.New("no quorum")
	s.mu.Unlock()
	owned := b.owned
	if err := b.beat(t, c, "g", nil, clk.now()); err == nil || !slices.Equal(b.owned, owned) {
		t.Fatalf("heartbeat with a failing write: %v, owns %v", err, b.owned)
	}
	s.mu.Lock()
	s.fail = nil
	s.mu.Unlock()
	must(t, b.beat(t, c, "g", nil, clk.now()))
	durable(&b)
	if len(b.owned) != 2 {
		t.Fatalf("b owns %v", b.owned)
	}
	// Leaving is written: the group has no state once both left.
	must(t, a.leave(c, "g"))
	must(t, b.leave(c, "g"))
	if _, ok := s.state()["g"]; ok {
		t.Fatal("the group's state outlived its members")
	}
}

// TestConfirmBeforeAnswerFromMemory: a heartbeat answered from memory
// alone asks Confirm first, so a deposed controller that does not know it
// yet refuses instead of telling a member to go on; one whose answer was
// just written (a write proves the lead) does not need to.
func TestConfirmBeforeAnswerFromMemory(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	var s store
	var deposed bool
	confirms := 0
	c := NewCoordinator(Config{
		Partitions: func(string) int32 { return 2 },
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:        clk.now,
		Persist:    s.persist,
		Confirm: func(context.Context) error {
			confirms++
			if deposed {
				return errors.New("not the leader")
			}
			return nil
		},
	})
	var a testMember
	must(t, a.beat(t, c, "g", []string{"t"}, clk.now()))
	if confirms != 0 {
		t.Fatalf("a join that was written confirmed %d times", confirms)
	}
	must(t, a.beat(t, c, "g", nil, clk.now()))
	if confirms != 1 {
		t.Fatalf("an answer from memory confirmed %d times", confirms)
	}
	deposed = true
	if err := a.beat(t, c, "g", nil, clk.now()); !errors.Is(err, ErrNotCoordinator) {
		t.Fatalf("deposed coordinator answered: %v", err)
	}
}
