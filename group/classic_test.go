package group

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
)

// classicTestMember plays a cooperative classic member: it joins reporting
// what it owns, syncs, and owns exactly what the sync handed it.
type classicTestMember struct {
	id         string
	generation int32
	owned      []TopicPartition
}

func (m *classicTestMember) join(t *testing.T, c *Coordinator, owned []TopicPartition, protocols ...string) error {
	t.Helper()
	if len(protocols) == 0 {
		protocols = []string{"cooperative-sticky"}
	}
	ans, err := c.JoinClassic(context.Background(), ClassicJoin{Group: "g", MemberID: m.id, Protocols: protocols, Version: 3,
		Topics: []string{"t"}, Owned: owned, SessionTimeout: 3 * time.Second, RebalanceTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	m.id, m.generation = ans.MemberID, ans.Generation
	return nil
}

func (m *classicTestMember) sync(t *testing.T, c *Coordinator) []TopicPartition {
	t.Helper()
	a, err := c.SyncClassic(context.Background(), ClassicSync{Group: "g", MemberID: m.id, Generation: m.generation})
	if err != nil {
		t.Fatalf("sync %s: %v", m.id, err)
	}
	return a.Consumer.Assigned
}

// TestClassicHandover: a classic member that must give partitions up hears
// it as REBALANCE_IN_PROGRESS, and the partitions are granted to the new
// member only once the old one joins again without them, never while it
// still reports them.
func TestClassicHandover(t *testing.T) {
	c := newTestCoordinator(map[string]int32{"t": 4}, nil)
	a := &classicTestMember{}
	if err := a.join(t, c, nil); err != nil {
		t.Fatal(err)
	}
	a.owned = a.sync(t, c)
	if len(a.owned) != 4 || a.generation != 1 {
		t.Fatalf("a alone: owns %v at generation %d", a.owned, a.generation)
	}
	if err := c.HeartbeatClassic(context.Background(), "g", a.id, a.generation); err != nil {
		t.Fatalf("a stable: %v", err)
	}

	b := &classicTestMember{}
	if err := b.join(t, c, nil); err != nil {
		t.Fatal(err)
	}
	if got := b.sync(t, c); len(got) != 0 || b.generation < 1 {
		t.Fatalf("b got %v at generation %d while a still owns everything; want nothing at generation 1 or later", got, b.generation)
	}
	if err := c.HeartbeatClassic(context.Background(), "g", a.id, a.generation); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("a must give partitions up: heartbeat %v", err)
	}
	// a joins again still owning everything (cooperative): it is told to
	// keep two, and b still gets nothing.
	if err := a.join(t, c, a.owned); err != nil {
		t.Fatal(err)
	}
	keep := a.sync(t, c)
	if len(keep) != 2 {
		t.Fatalf("a keeps %v, want two", keep)
	}
	if err := c.HeartbeatClassic(context.Background(), "g", b.id, b.generation); err != nil {
		t.Fatalf("b heartbeat while a still holds its partitions: %v, want nothing to do", err)
	}
	if err := b.join(t, c, nil); err != nil {
		t.Fatal(err)
	}
	if got := b.sync(t, c); len(got) != 0 {
		t.Fatalf("b got %v while a still reports owning them", got)
	}
	// a gives them up and joins again; now b hears to join, and gets them.
	a.owned = keep
	if err := a.join(t, c, a.owned); err != nil {
		t.Fatal(err)
	}
	if got := a.sync(t, c); !slices.Equal(got, keep) {
		t.Fatalf("a after giving up: %v, want %v", got, keep)
	}
	if err := c.HeartbeatClassic(context.Background(), "g", b.id, b.generation); !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("b may take more: heartbeat %v", err)
	}
	if err := b.join(t, c, nil); err != nil {
		t.Fatal(err)
	}
	b.owned = b.sync(t, c)
	if len(b.owned) != 2 || slices.ContainsFunc(b.owned, func(tp TopicPartition) bool { return slices.Contains(a.owned, tp) }) {
		t.Fatalf("a owns %v, b owns %v", a.owned, b.owned)
	}
	for _, m := range []*classicTestMember{a, b} {
		if err := c.HeartbeatClassic(context.Background(), "g", m.id, m.generation); err != nil {
			t.Errorf("%s stable: %v", m.id, err)
		}
	}
}

// TestClassicErrors: the classic protocol's refusals, each changing
// nothing.
func TestClassicErrors(t *testing.T) {
	ctx := context.Background()
	c := newTestCoordinator(map[string]int32{"t": 2}, nil)
	ans, err := c.JoinClassic(ctx, ClassicJoin{Group: "g", RequireKnownID: true, Protocols: []string{"range"}, Topics: []string{"t"}})
	if err != nil || !ans.MemberIDRequired || ans.MemberID == "" {
		t.Fatalf("v4 join without an id: %+v, %v", ans, err)
	}
	if n := c.Members("g"); n != 0 {
		t.Fatalf("MEMBER_ID_REQUIRED added a member: %d", n)
	}
	a := &classicTestMember{id: ans.MemberID}
	if err := a.join(t, c, nil, "range", "roundrobin"); err != nil || a.id != ans.MemberID {
		t.Fatalf("join with the given id: %v, id %q want %q", err, a.id, ans.MemberID)
	}
	b := &classicTestMember{}
	if err := b.join(t, c, nil, "cooperative-sticky"); !errors.Is(err, ErrInconsistentProtocol) {
		t.Fatalf("a protocol the group does not share: %v", err)
	}
	if err := b.join(t, c, nil, "roundrobin"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SyncClassic(ctx, ClassicSync{Group: "g", MemberID: a.id, Generation: a.generation + 5}); !errors.Is(err, ErrIllegalGeneration) {
		t.Fatalf("sync at a wrong generation: %v", err)
	}
	other := "roundrobin"
	if _, err := c.SyncClassic(ctx, ClassicSync{Group: "g", MemberID: a.id, Generation: a.generation, Protocol: &other}); !errors.Is(err, ErrInconsistentProtocol) {
		t.Fatalf("sync naming another protocol: %v", err)
	}
	if err := c.HeartbeatClassic(ctx, "g", "nobody", 1); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("heartbeat of an unknown member: %v", err)
	}
	// A heartbeat member's id is not a classic member's, nor the reverse.
	hb, err := c.Heartbeat(ctx, Heartbeat{Group: "g", Topics: []string{"t"}, NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.HeartbeatClassic(ctx, "g", hb.MemberID, hb.MemberEpoch); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("classic heartbeat of a heartbeat member: %v", err)
	}
	if _, err := c.Heartbeat(ctx, Heartbeat{Group: "g", MemberID: a.id, MemberEpoch: a.generation, NoWait: true}); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("consumer heartbeat of a classic member: %v", err)
	}
	if err := c.LeaveClassic(ctx, "g", a.id); err != nil {
		t.Fatal(err)
	}
	if err := c.HeartbeatClassic(ctx, "g", a.id, a.generation); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("heartbeat after leaving: %v", err)
	}
}

// TestClassicMemberSurvivesResume: a classic member's protocol is in the
// persisted state, so a new coordinator still recognises it, its
// generation and its assignment.
func TestClassicMemberSurvivesResume(t *testing.T) {
	ctx := context.Background()
	states := map[string]State{}
	c := newTestCoordinator(map[string]int32{"t": 3}, nil)
	c.cfg.Persist = func(_ context.Context, g string, s *State) error {
		if s == nil {
			delete(states, g)
		} else {
			states[g] = *s
		}
		return nil
	}
	a := &classicTestMember{}
	if err := a.join(t, c, nil, "range"); err != nil {
		t.Fatal(err)
	}
	want := a.sync(t, c)
	c.Close()

	c2 := newTestCoordinator(map[string]int32{"t": 3}, nil)
	if err := c2.Resume(states); err != nil {
		t.Fatal(err)
	}
	ans, err := c2.SyncClassic(ctx, ClassicSync{Group: "g", MemberID: a.id, Generation: a.generation})
	if err != nil {
		t.Fatal(err)
	}
	if got := ans.Consumer; !slices.Equal(got.Assigned, want) || got.Protocol != "range" || got.Version != 3 {
		t.Fatalf("after resume: %+v, %v; want %v of range v3", got, err, want)
	}
	if err := c2.HeartbeatClassic(ctx, "g", a.id, a.generation); err != nil {
		t.Fatalf("heartbeat after resume: %v", err)
	}
}

// TestClassicGroupRemovesMembersThatDoNotRejoin: in a classic group of
// another protocol type, a join phase ends at the rebalance timeout
// without the members that did not join again; they are removed, and the
// new member leads the next generation.
func TestClassicGroupRemovesMembersThatDoNotRejoin(t *testing.T) {
	ctx := context.Background()
	c := newTestCoordinator(nil, nil)
	join := func(id string) (ClassicGroupJoinAnswer, error) {
		return c.JoinClassicGroup(ctx, ClassicGroupJoin{Group: "w", MemberID: id, ProtocolType: "connect",
			Protocols:      []ClassicProtocol{{Name: "default", Metadata: []byte(id)}},
			SessionTimeout: 30 * time.Second, RebalanceTimeout: time.Second})
	}
	a, err := join("")
	if err != nil || a.Generation != 1 || a.Leader != a.MemberID {
		t.Fatalf("a alone: %+v, %v", a, err)
	}
	if _, err := c.SyncClassic(ctx, ClassicSync{Group: "w", MemberID: a.MemberID, Generation: 1,
		Assignments: map[string][]byte{a.MemberID: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b, err := join("")
	if err != nil || b.Generation != 2 || b.Leader != b.MemberID || len(b.Members) != 1 {
		t.Fatalf("b after a did not join again: %+v, %v", b, err)
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Fatalf("the join phase ended after %v, before the rebalance timeout", waited)
	}
	if err := c.HeartbeatClassic(ctx, "w", a.MemberID, 1); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("a after being removed: %v", err)
	}
	if n := c.Members("w"); n != 1 {
		t.Fatalf("%d members, want 1", n)
	}
}

// TestClassicGroupsCountTowardsMaxGroups: classic groups of other
// protocol types count towards MaxGroups with consumer groups.
func TestClassicGroupsCountTowardsMaxGroups(t *testing.T) {
	ctx := context.Background()
	c := newTestCoordinator(map[string]int32{"t": 1}, nil)
	c.cfg.MaxGroups = 1
	if _, err := c.JoinClassicGroup(ctx, ClassicGroupJoin{Group: "w", ProtocolType: "connect",
		Protocols: []ClassicProtocol{{Name: "default"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(ctx, Heartbeat{Group: "g", Topics: []string{"t"}, NoWait: true}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a consumer group beyond MaxGroups: %v", err)
	}
	if _, err := c.JoinClassicGroup(ctx, ClassicGroupJoin{Group: "w2", ProtocolType: "connect",
		Protocols: []ClassicProtocol{{Name: "default"}}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a classic group beyond MaxGroups: %v", err)
	}
}

// TestClassicGroupLeaderDiesBeforeSync: a member's SyncGroup waits for the
// leader's; when the leader falls silent instead, its session expires, the
// group rebalances, and the waiting member is told to join again.
func TestClassicGroupLeaderDiesBeforeSync(t *testing.T) {
	ctx := context.Background()
	c := newTestCoordinator(nil, nil)
	join := func(id string, session time.Duration) (ClassicGroupJoinAnswer, error) {
		return c.JoinClassicGroup(ctx, ClassicGroupJoin{Group: "w", MemberID: id, ProtocolType: "connect",
			Protocols: []ClassicProtocol{{Name: "default"}}, SessionTimeout: session, RebalanceTimeout: 5 * time.Second})
	}
	a, err := join("", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	bDone := make(chan ClassicGroupJoinAnswer, 1)
	go func() {
		b, err := join("", 2*time.Second)
		if err != nil {
			t.Error(err)
		}
		bDone <- b
	}()
	// b's join is on its way.
	testutil.Eventually(t, 5*time.Second, "a to hear of b's join", func() error {
		if err := c.HeartbeatClassic(ctx, "w", a.MemberID, a.Generation); !errors.Is(err, ErrRebalanceInProgress) {
			return fmt.Errorf("a never heard of b's join: heartbeat answered %v", err)
		}
		return nil
	})
	if a, err = join(a.MemberID, time.Second); err != nil || a.Leader != a.MemberID {
		t.Fatalf("a joins again: %+v, %v", a, err)
	}
	b := <-bDone
	start := time.Now()
	_, err = c.SyncClassic(ctx, ClassicSync{Group: "w", MemberID: b.MemberID, Generation: b.Generation})
	if !errors.Is(err, ErrRebalanceInProgress) {
		t.Fatalf("b's sync with a silent leader: %v, want ErrRebalanceInProgress", err)
	}
	if waited := time.Since(start); waited < 900*time.Millisecond || waited > 10*time.Second {
		t.Fatalf("b waited %v; want about the leader's session", waited)
	}
	if err := c.HeartbeatClassic(ctx, "w", a.MemberID, a.Generation); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("the silent leader: %v, want ErrUnknownMember", err)
	}
}
