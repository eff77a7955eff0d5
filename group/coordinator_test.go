package group

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
)

// clock is a settable time for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestCoordinator(topics map[string]int32, clk *clock) *Coordinator {
	var mu sync.Mutex
	n := 0
	cfg := Config{
		Partitions: func(t string) int32 { return topics[t] },
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		NewMemberID: func() string {
			mu.Lock()
			defer mu.Unlock()
			n++
			return fmt.Sprintf("m%03d", n)
		},
	}
	if clk != nil {
		cfg.Now = clk.now
	}
	return NewCoordinator(cfg)
}

// testMember plays a well-behaved member: it owns exactly what the latest
// answer assigned.
type testMember struct {
	id       string
	epoch    int32
	owned    []TopicPartition
	lastSent time.Time // send time of its latest answered heartbeat
}

func (m *testMember) beat(t *testing.T, c *Coordinator, group string, topics []string, now time.Time) error {
	t.Helper()
	hb := Heartbeat{Group: group, MemberID: m.id, MemberEpoch: m.epoch, Owned: m.owned, NoWait: true,
		SessionTimeout: 3 * time.Second, RebalanceTimeout: 10 * time.Second}
	if m.epoch == 0 {
		hb.Topics = topics
	}
	ans, err := c.Heartbeat(context.Background(), hb)
	if err != nil {
		return err
	}
	m.id, m.epoch, m.owned, m.lastSent = ans.MemberID, ans.MemberEpoch, ans.Assigned, now
	return nil
}

func all(topic string, n int32) []TopicPartition {
	var out []TopicPartition
	for p := range n {
		out = append(out, TopicPartition{Topic: topic, Partition: p})
	}
	return out
}

func TestJoinTakesEveryPartition(t *testing.T) {
	c := newTestCoordinator(map[string]int32{"t": 4}, nil)
	var a testMember
	if err := a.beat(t, c, "g", []string{"t"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.owned, all("t", 4)) || a.epoch != 1 {
		t.Fatalf("owned %v epoch %d, want every partition at epoch 1", a.owned, a.epoch)
	}
}

// A second member joining gets its share only after the first has given it
// up; the first keeps the rest throughout.
func TestCooperativeHandover(t *testing.T) {
	c := newTestCoordinator(map[string]int32{"t": 4}, nil)
	var a, b testMember
	must(t, a.beat(t, c, "g", []string{"t"}, time.Now()))
	must(t, b.beat(t, c, "g", []string{"t"}, time.Now()))
	if len(b.owned) != 0 {
		t.Fatalf("b owns %v before a gave anything up", b.owned)
	}
	before := a.owned
	must(t, a.beat(t, c, "g", nil, time.Now())) // learns to give up two
	if len(a.owned) != 2 {
		t.Fatalf("a owns %v, want 2 partitions", a.owned)
	}
	for _, tp := range a.owned {
		if !slices.Contains(before, tp) {
			t.Fatalf("a was given %v, which it did not have: only revocations on a join", tp)
		}
	}
	d, _ := c.Describe("g")
	if d.State != StateReconciling {
		t.Fatalf("state %q while a still holds b's partitions", d.State)
	}
	must(t, a.beat(t, c, "g", nil, time.Now())) // reports them given up
	must(t, b.beat(t, c, "g", nil, time.Now()))
	if len(b.owned) != 2 || overlaps(a.owned, b.owned) {
		t.Fatalf("a %v b %v", a.owned, b.owned)
	}
	if d, _ := c.Describe("g"); d.State != StateStable {
		t.Fatalf("state %q after the handover", d.State)
	}
}

func overlaps(x, y []TopicPartition) bool {
	for _, tp := range x {
		if slices.Contains(y, tp) {
			return true
		}
	}
	return false
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A held heartbeat returns as soon as another member's join changes its
// assignment, not at the end of the heartbeat interval.
func TestHeldHeartbeatWakesOnRebalance(t *testing.T) {
	c := newTestCoordinator(map[string]int32{"t": 4}, nil)
	var a testMember
	must(t, a.beat(t, c, "g", []string{"t"}, time.Now()))
	got := make(chan Answer, 1)
	go func() {
		ans, err := c.Heartbeat(context.Background(), Heartbeat{Group: "g", MemberID: a.id, MemberEpoch: a.epoch, Owned: a.owned})
		if err != nil {
			t.Error(err)
		}
		got <- ans
	}()
	// Wait until the heartbeat is held.
	testutil.WaitFor(t, 10*time.Second, "the heartbeat to be held", func() bool {
		g, _ := c.lockGroup("g", false)
		defer c.unlockGroup(g)
		return g.members[a.id].held == 1
	})
	start := time.Now()
	var b testMember
	must(t, b.beat(t, c, "g", []string{"t"}, time.Now()))
	select {
	case ans := <-got:
		if len(ans.Assigned) != 2 {
			t.Fatalf("held answer %v, want 2 partitions left", ans.Assigned)
		}
		if d := time.Since(start); d >= heartbeatInterval(DefaultSessionTimeout) {
			t.Fatalf("held heartbeat returned after %v, the whole interval", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("held heartbeat did not return")
	}
}

func TestSessionTimeoutFreesPartitions(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	c := newTestCoordinator(map[string]int32{"t": 4}, clk)
	var a, b testMember
	must(t, a.beat(t, c, "g", []string{"t"}, clk.now()))
	must(t, b.beat(t, c, "g", []string{"t"}, clk.now()))
	must(t, a.beat(t, c, "g", nil, clk.now()))
	must(t, a.beat(t, c, "g", nil, clk.now()))
	must(t, b.beat(t, c, "g", nil, clk.now()))
	if len(b.owned) != 2 {
		t.Fatalf("b owns %v", b.owned)
	}
	// a dies; b keeps beating.
	for range 3 {
		clk.advance(time.Second)
		must(t, b.beat(t, c, "g", nil, clk.now()))
	}
	if len(b.owned) != 2 {
		t.Fatalf("b owns %v at exactly the session timeout", b.owned)
	}
	clk.advance(time.Second)
	must(t, b.beat(t, c, "g", nil, clk.now()))
	if !slices.Equal(b.owned, all("t", 4)) {
		t.Fatalf("b owns %v after a's session expired", b.owned)
	}
	if err := a.beat(t, c, "g", nil, clk.now()); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("expired member's heartbeat: %v, want ErrUnknownMember", err)
	}
}

func TestRebalanceTimeoutRemovesStubbornMember(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	c := newTestCoordinator(map[string]int32{"t": 2}, clk)
	var a, b testMember
	must(t, a.beat(t, c, "g", []string{"t"}, clk.now()))
	must(t, b.beat(t, c, "g", []string{"t"}, clk.now()))
	held := a.owned
	for range 13 { // a beats but never gives up its partition
		clk.advance(time.Second)
		_, err := c.Heartbeat(context.Background(), Heartbeat{Group: "g", MemberID: a.id, MemberEpoch: a.epoch, Owned: held, NoWait: true})
		if err != nil {
			if !errors.Is(err, ErrUnknownMember) {
				t.Fatal(err)
			}
			break
		}
		must(t, b.beat(t, c, "g", nil, clk.now()))
	}
	must(t, b.beat(t, c, "g", nil, clk.now()))
	if !slices.Equal(b.owned, all("t", 2)) {
		t.Fatalf("b owns %v; a should have been removed after its rebalance timeout", b.owned)
	}
}

func TestCommitFencing(t *testing.T) {
	c := newTestCoordinator(map[string]int32{"t": 2}, nil)
	var a, b testMember
	must(t, a.beat(t, c, "g", []string{"t"}, time.Now()))
	oldEpoch := a.epoch
	must(t, b.beat(t, c, "g", []string{"t"}, time.Now()))
	must(t, a.beat(t, c, "g", nil, time.Now()))
	must(t, a.beat(t, c, "g", nil, time.Now()))
	must(t, b.beat(t, c, "g", nil, time.Now()))
	lost := b.owned[0] // a owned it once, b owns it now
	wrote := 0
	write := func() error { wrote++; return nil }

	cases := []struct {
		name   string
		member string
		epoch  int32
		tps    []TopicPartition
		want   error
	}{
		{"partition it lost", a.id, a.epoch, []TopicPartition{lost}, ErrFencedMember},
		{"epoch from the future", a.id, a.epoch + 5, a.owned, ErrFencedMember},
		{"unknown member", "nobody", 1, a.owned, ErrUnknownMember},
		{"no member while the group has members", "", 0, a.owned, ErrGroupNotEmpty},
	}
	for _, tc := range cases {
		if err := c.Commit("g", tc.member, tc.epoch, tc.tps, write); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if wrote != 0 {
		t.Fatalf("%d refused commits were written", wrote)
	}
	// a kept its other partition all along: its old epoch still commits it.
	must(t, c.Commit("g", a.id, oldEpoch, a.owned, write))
	must(t, c.Commit("g", b.id, b.epoch, b.owned, write))
	if wrote != 2 {
		t.Fatalf("wrote %d, want 2", wrote)
	}

	// b gives lost back to a (a's share after b leaves): a commit of it
	// with a's epoch from before the new grant is refused.
	staleEpoch := a.epoch
	must(t, b.leave(c, "g"))
	must(t, a.beat(t, c, "g", nil, time.Now()))
	if !slices.Contains(a.owned, lost) {
		t.Fatalf("a owns %v after b left", a.owned)
	}
	if err := c.Commit("g", a.id, staleEpoch, []TopicPartition{lost}, write); !errors.Is(err, ErrFencedMember) {
		t.Fatalf("commit with the epoch before the re-grant: %v", err)
	}
	must(t, c.Commit("g", a.id, a.epoch, []TopicPartition{lost}, write))
}

func (m *testMember) leave(c *Coordinator, group string) error {
	_, err := c.Heartbeat(context.Background(), Heartbeat{Group: group, MemberID: m.id, MemberEpoch: LeaveEpoch})
	return err
}

func TestClearRefusedWithMembersUnlessForced(t *testing.T) {
	c := newTestCoordinator(map[string]int32{"t": 2}, nil)
	var a testMember
	must(t, a.beat(t, c, "g", []string{"t"}, time.Now()))
	wrote := 0
	write := func() error { wrote++; return nil }
	if _, err := c.Clear(context.Background(), "g", false, write); !errors.Is(err, ErrGroupNotEmpty) || wrote != 0 {
		t.Fatalf("clear with a member: %v, wrote %d", err, wrote)
	}
	n, err := c.Clear(context.Background(), "g", true, write)
	if err != nil || n != 1 || wrote != 1 {
		t.Fatalf("forced clear: removed %d, %v, wrote %d", n, err, wrote)
	}
	if err := a.beat(t, c, "g", nil, time.Now()); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("removed member's heartbeat: %v", err)
	}
	if _, ok := c.Describe("g"); ok {
		t.Fatal("group still described after its members were removed")
	}
}

func TestBadHeartbeats(t *testing.T) {
	c := newTestCoordinator(map[string]int32{"t": 2}, nil)
	ctx := context.Background()
	cases := []struct {
		name string
		hb   Heartbeat
		want error
	}{
		{"join without topics", Heartbeat{Group: "g"}, ErrInvalid},
		{"unknown assignor", Heartbeat{Group: "g", Topics: []string{"t"}, Assignor: "best"}, ErrInvalid},
		{"session too short", Heartbeat{Group: "g", Topics: []string{"t"}, SessionTimeout: time.Millisecond}, ErrInvalid},
		{"epoch without id", Heartbeat{Group: "g", MemberEpoch: 3}, ErrInvalid},
		{"negative epoch", Heartbeat{Group: "g", MemberID: "x", MemberEpoch: -7}, ErrInvalid},
		{"unknown member", Heartbeat{Group: "g", MemberID: "x", MemberEpoch: 1}, ErrUnknownMember},
	}
	for _, tc := range cases {
		if _, err := c.Heartbeat(ctx, tc.hb); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if l := c.List(); len(l) != 0 {
		t.Fatalf("bad heartbeats left groups behind: %v", l)
	}
	var a testMember
	must(t, a.beat(t, c, "g", []string{"t"}, time.Now()))
	if _, err := c.Heartbeat(ctx, Heartbeat{Group: "g", Topics: []string{"t"}, Assignor: "range", NoWait: true}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("join with another assignor: %v", err)
	}
	// Claiming a partition never granted fences the member.
	_, err := c.Heartbeat(ctx, Heartbeat{Group: "g", MemberID: a.id, MemberEpoch: a.epoch, Owned: []TopicPartition{{Topic: "t", Partition: 9}}, NoWait: true})
	if !errors.Is(err, ErrFencedMember) {
		t.Fatalf("claiming an ungranted partition: %v", err)
	}
}

// TestRandomSchedules runs members through seeded random joins, leaves,
// deaths, pauses, topic changes and commits against a fake clock, with
// the coordinator moving (a new one resumed from what the old one
// persisted) and its writes failing, before or after they take effect,
// and checks at every step that no two members believe they own one
// partition and that a member's commit of what it believes it owns is
// accepted, and at the end that every partition is owned by exactly one
// live member.
func TestRandomSchedules(t *testing.T) {
	for seed := int64(1); seed <= 300; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runSchedule(t, seed) })
	}
}

func runSchedule(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	clk := &clock{t: time.Unix(1000, 0)}
	var tmu sync.Mutex
	topics := map[string]int32{"a": int32(1 + rng.Intn(6)), "b": int32(rng.Intn(5))}
	// stored is what the coordinator persisted; a write fails before it
	// is stored (lost) or after (stored, but the answer never leaves).
	stored := map[string]State{}
	failWrites := true
	errWrite := errors.New("write failed")
	newCoordinator := func() *Coordinator {
		return NewCoordinator(Config{
			Partitions: func(t string) int32 { tmu.Lock(); defer tmu.Unlock(); return topics[t] },
			Now:        clk.now,
			Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
			Persist: func(_ context.Context, group string, st *State) error {
				r := 100
				if failWrites {
					r = rng.Intn(100)
				}
				if r < 4 {
					return errWrite
				}
				if st == nil {
					delete(stored, group)
				} else {
					stored[group] = *st
				}
				if r < 8 {
					return errWrite
				}
				return nil
			},
		})
	}
	c := newCoordinator()
	assignor := AssignorNames()[rng.Intn(len(AssignorNames()))]
	const session = 3 * time.Second
	type sim struct {
		testMember
		subs  []string
		alive bool // false: stopped beating (dead or paused)
	}
	var members []*sim
	beat := func(m *sim) {
		hb := Heartbeat{Group: "g", MemberID: m.id, MemberEpoch: m.epoch, Owned: m.owned, NoWait: true,
			SessionTimeout: session, RebalanceTimeout: 2 * session, Assignor: assignor}
		if m.epoch == 0 {
			hb.Topics = m.subs
		}
		ans, err := c.Heartbeat(context.Background(), hb)
		switch {
		case errors.Is(err, ErrUnknownMember) || errors.Is(err, ErrFencedMember):
			m.id, m.epoch, m.owned = "", 0, nil // lost everything; joins again
		case errors.Is(err, errWrite):
			// No answer: the member keeps what it has and beats again.
		case err != nil:
			t.Fatalf("seed %d: %v", seed, err)
		default:
			m.id, m.epoch, m.owned, m.lastSent = ans.MemberID, ans.MemberEpoch, ans.Assigned, clk.now()
		}
	}
	check := func(step int) {
		owners := map[TopicPartition]string{}
		for _, m := range members {
			// A member without an answer for its session timeout, counted
			// from when it sent the heartbeat last answered, gives up its
			// partitions (as the client does) and joins again.
			if m.epoch != 0 && !clk.now().Before(m.lastSent.Add(session)) {
				m.id, m.epoch, m.owned = "", 0, nil
			}
			if m.epoch == 0 {
				continue
			}
			for _, tp := range m.owned {
				if o, ok := owners[tp]; ok {
					t.Fatalf("seed %d step %d: %s owned by %s and %s", seed, step, tp, o, m.id)
				}
				owners[tp] = m.id
			}
		}
	}
	subsets := [][]string{{"a"}, {"b"}, {"a", "b"}}
	for step := 0; step < 200; step++ {
		switch r := rng.Intn(100); {
		case r < 10 && len(members) < 6:
			members = append(members, &sim{subs: subsets[rng.Intn(3)], alive: true})
		case r < 15 && len(members) > 0: // dies or pauses
			members[rng.Intn(len(members))].alive = false
		case r < 20 && len(members) > 0: // resumes: finds out whether it is still a member
			members[rng.Intn(len(members))].alive = true
		case r < 23 && len(members) > 0:
			m := members[rng.Intn(len(members))]
			if m.epoch != 0 {
				if err := m.leave(c, "g"); err != nil && !errors.Is(err, errWrite) {
					t.Fatal(err)
				}
			}
			m.id, m.epoch, m.owned = "", 0, nil
		case r < 25:
			tmu.Lock()
			topics["b"] = int32(rng.Intn(5))
			tmu.Unlock()
		case r < 40:
			clk.advance(time.Duration(rng.Intn(1500)) * time.Millisecond)
		case r < 44: // the controller moves: a new coordinator resumes what was persisted
			c.Close()
			c = newCoordinator()
			resumed := map[string]State{}
			for g, st := range stored {
				resumed[g] = st
			}
			must(t, c.Resume(resumed))
		case r < 52 && len(members) > 0: // a member commits what it owns
			m := members[rng.Intn(len(members))]
			if m.epoch == 0 || !m.alive || !clk.now().Before(m.lastSent.Add(session)) {
				break
			}
			if err := c.Commit("g", m.id, m.epoch, m.owned, func() error { return nil }); err != nil {
				t.Fatalf("seed %d step %d: member %s (epoch %d) committing %v, which it owns: %v", seed, step, m.id, m.epoch, m.owned, err)
			}
		default:
			if len(members) > 0 {
				if m := members[rng.Intn(len(members))]; m.alive {
					beat(m)
				}
			}
		}
		check(step)
	}
	// Settle: the live members beat until nothing changes.
	failWrites = false
	for _, m := range members {
		m.alive = true
	}
	clk.advance(3 * session) // the dead are gone; the live beat at once
	for round := 0; round < 10; round++ {
		for _, m := range members {
			beat(m)
			check(1000 + round)
		}
	}
	owned := map[TopicPartition]int{}
	for _, m := range members {
		for _, tp := range m.owned {
			owned[tp]++
		}
	}
	for topic, n := range topics {
		subscribed := false
		for _, m := range members {
			subscribed = subscribed || slices.Contains(m.subs, topic)
		}
		for p := range n {
			if want := map[bool]int{true: 1, false: 0}[subscribed]; owned[TopicPartition{Topic: topic, Partition: p}] != want {
				t.Fatalf("seed %d: %s/%d owned %d times after settling, want %d", seed, topic, p, owned[TopicPartition{Topic: topic, Partition: p}], want)
			}
		}
	}
	if d, ok := c.Describe("g"); ok && d.State != StateStable {
		t.Fatalf("seed %d: state %q after settling: %+v", seed, d.State, d)
	}
}

func TestMaxGroups(t *testing.T) {
	c := NewCoordinator(Config{Partitions: func(string) int32 { return 1 }, MaxGroups: 2,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx := context.Background()
	for _, g := range []string{"a", "b"} {
		if _, err := c.Heartbeat(ctx, Heartbeat{Group: g, Topics: []string{"t"}, NoWait: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Heartbeat(ctx, Heartbeat{Group: "c", Topics: []string{"t"}, NoWait: true}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a third group: %v", err)
	}
	// Another member of an existing group is fine.
	if _, err := c.Heartbeat(ctx, Heartbeat{Group: "a", Topics: []string{"t"}, NoWait: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(c.List()); n != 2 {
		t.Fatalf("%d groups", n)
	}
}

// A heartbeat that does not report what it owns (OwnedUnchanged, Kafka's
// null owned partitions) gives nothing up: a partition the member was
// asked to release stays its own, and is not granted elsewhere, until it
// reports it gone.
func TestOwnedUnchangedReleasesNothing(t *testing.T) {
	c := newTestCoordinator(map[string]int32{"t": 2}, nil)
	ctx := context.Background()
	a := &testMember{}
	if err := a.beat(t, c, "g", []string{"t"}, time.Now()); err != nil || len(a.owned) != 2 {
		t.Fatalf("a: %v %v", a.owned, err)
	}
	b := &testMember{}
	if err := b.beat(t, c, "g", []string{"t"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	ans, err := c.Heartbeat(ctx, Heartbeat{Group: "g", MemberID: a.id, MemberEpoch: a.epoch, Owned: a.owned, NoWait: true})
	if err != nil || len(ans.Assigned) != 1 {
		t.Fatalf("a asked to keep %v (%v), want one partition", ans.Assigned, err)
	}
	a.epoch = ans.MemberEpoch
	// a still holds both, and says nothing about it.
	if _, err := c.Heartbeat(ctx, Heartbeat{Group: "g", MemberID: a.id, MemberEpoch: a.epoch, OwnedUnchanged: true, NoWait: true}); err != nil {
		t.Fatal(err)
	}
	if err := b.beat(t, c, "g", nil, time.Now()); err != nil || len(b.owned) != 0 {
		t.Fatalf("b got %v (%v) while a still holds it", b.owned, err)
	}
	if _, err := c.Heartbeat(ctx, Heartbeat{Group: "g", MemberID: a.id, MemberEpoch: a.epoch, Owned: ans.Assigned, NoWait: true}); err != nil {
		t.Fatal(err)
	}
	if err := b.beat(t, c, "g", nil, time.Now()); err != nil || len(b.owned) != 1 || b.owned[0] == ans.Assigned[0] {
		t.Fatalf("b got %v (%v) after a gave it up", b.owned, err)
	}
}

// A join beyond MaxMembers is ErrGroupFull, which is also ErrInvalid.
func TestJoinFullGroup(t *testing.T) {
	c := newTestCoordinator(map[string]int32{"t": 1}, nil)
	c.cfg.MaxMembers = 2
	for range 2 {
		if err := (&testMember{}).beat(t, c, "g", []string{"t"}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	err := (&testMember{}).beat(t, c, "g", []string{"t"}, time.Now())
	if !errors.Is(err, ErrGroupFull) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("third member: %v, want ErrGroupFull and ErrInvalid", err)
	}
}

// KeepMemberID (KIP-1082): a join keeps the id the member chose; joining
// again under it replaces the member, whose epochs go on rising, so a
// commit made with the old incarnation's epoch is refused even once the
// new incarnation has had as many answers.
func TestKeepMemberID(t *testing.T) {
	c := newTestCoordinator(map[string]int32{"t": 2}, nil)
	ctx := context.Background()
	ok := func() error { return nil }
	join := Heartbeat{Group: "g", MemberID: "chosen", Topics: []string{"t"}, KeepMemberID: true, NoWait: true}
	// churn moves the chosen member's epoch on: another member joins and
	// takes a partition, then leaves and gives it back.
	churn := func(a Answer) Answer {
		t.Helper()
		other := &testMember{}
		if err := other.beat(t, c, "g", []string{"t"}, time.Now()); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			var err error
			if a, err = c.Heartbeat(ctx, Heartbeat{Group: "g", MemberID: a.MemberID, MemberEpoch: a.MemberEpoch, Owned: a.Assigned, NoWait: true}); err != nil {
				t.Fatal(err)
			}
			if err := other.beat(t, c, "g", nil, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Heartbeat(ctx, Heartbeat{Group: "g", MemberID: other.id, MemberEpoch: LeaveEpoch}); err != nil {
			t.Fatal(err)
		}
		a, err := c.Heartbeat(ctx, Heartbeat{Group: "g", MemberID: a.MemberID, MemberEpoch: a.MemberEpoch, Owned: a.Assigned, NoWait: true})
		if err != nil || len(a.Assigned) != 2 {
			t.Fatalf("after the churn: %+v %v", a, err)
		}
		return a
	}

	a, err := c.Heartbeat(ctx, join)
	if err != nil || a.MemberID != "chosen" || a.MemberEpoch != 1 || len(a.Assigned) != 2 {
		t.Fatalf("join: %+v %v", a, err)
	}
	a = churn(a)
	old := a.MemberEpoch
	if err := c.Commit("g", "chosen", old, a.Assigned, ok); err != nil {
		t.Fatal(err)
	}

	b, err := c.Heartbeat(ctx, join)
	if err != nil || b.MemberID != "chosen" || b.MemberEpoch <= old {
		t.Fatalf("join again: %+v %v, want the same id and an epoch above %d", b, err, old)
	}
	b = churn(b)
	if err := c.Commit("g", "chosen", old, b.Assigned, ok); !errors.Is(err, ErrFencedMember) {
		t.Fatalf("commit with the old incarnation's epoch %d (now %d): %v, want ErrFencedMember", old, b.MemberEpoch, err)
	}
	if err := c.Commit("g", "chosen", b.MemberEpoch, b.Assigned, ok); err != nil {
		t.Fatalf("commit of the new incarnation: %v", err)
	}
	// Without KeepMemberID the coordinator names the member.
	join.KeepMemberID, join.MemberID = false, "wanted"
	if n, err := c.Heartbeat(ctx, join); err != nil || n.MemberID == "wanted" {
		t.Fatalf("join without KeepMemberID: %+v %v", n, err)
	}
}
