package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// membership is a valid two-member group state: m1 owns t/0 and t/1, m2
// owns t/2 and is to get t/1, which m1 is asked to give up.
func membership() *GroupMembership {
	return &GroupMembership{Assignor: "sticky", Epoch: 4, Counts: map[string]int32{"t": 3}, Members: []GroupMember{
		{ID: "m1", ClientID: "c1", Host: "10.0.0.1", Topics: []string{"t"}, SessionTimeoutMs: 10000, RebalanceTimeoutMs: 60000,
			Epoch: 3, Target: PartitionSet{"t": {0}}, Granted: map[string][][2]int32{"t": {{0, 1}, {1, 2}}}, Sent: PartitionSet{"t": {0}}},
		{ID: "m2", Topics: []string{"t"}, SessionTimeoutMs: 10000, RebalanceTimeoutMs: 60000,
			Epoch: 1, Target: PartitionSet{"t": {1, 2}}, Granted: map[string][][2]int32{"t": {{2, 1}}}, Sent: PartitionSet{"t": {2}}},
	}}
}

func TestFSMSaveGroup(t *testing.T) {
	h := threeBrokers(t)
	h.ok(&saveGroupCmd{Term: 1, Group: "g", Membership: membership()})
	got := h.f.memberships.all()
	mustEqual(t, "membership", got["g"], membership())
	held := got["g"]

	// A later write replaces it whole; the value handed out is unchanged.
	next := membership()
	next.Members = next.Members[:1]
	h.ok(&saveGroupCmd{Term: 1, Group: "g", Membership: next})
	mustEqual(t, "replaced", h.f.memberships.all()["g"], next)
	mustEqual(t, "held", held, membership())

	// A write of another term (a coordinator that outlived its term) is
	// refused.
	h.refused(&saveGroupCmd{Term: 2, Group: "g"}, ErrNotController)
	mustEqual(t, "after a write of another term", h.f.memberships.all()["g"], next)

	// Nil removes it.
	h.ok(&saveGroupCmd{Term: 1, Group: "g"})
	if _, ok := h.f.memberships.all()["g"]; ok {
		t.Fatal("membership still there after removal")
	}
}

// TestFSMRefusesBadGroupStates: a membership that breaks a rule (above
// all, one partition granted to two members) is refused and changes
// nothing.
func TestFSMRefusesBadGroupStates(t *testing.T) {
	h := threeBrokers(t)
	h.ok(&saveGroupCmd{Term: 1, Group: "g", Membership: membership()})
	before := h.stateJSON()
	for what, mut := range map[string]func(m *GroupMembership){
		"two owners":             func(m *GroupMembership) { m.Members[1].Granted["t"] = [][2]int32{{1, 1}, {2, 1}} },
		"two targets":            func(m *GroupMembership) { m.Members[1].Target["t"] = []int32{0, 1, 2} },
		"grant after the epoch":  func(m *GroupMembership) { m.Members[1].Granted["t"] = [][2]int32{{2, 2}} },
		"sent, not granted":      func(m *GroupMembership) { m.Members[1].Sent["t"] = []int32{1, 2} },
		"members unsorted":       func(m *GroupMembership) { m.Members[0], m.Members[1] = m.Members[1], m.Members[0] },
		"member twice":           func(m *GroupMembership) { m.Members[1].ID = "m1" },
		"no members":             func(m *GroupMembership) { m.Members = nil },
		"no assignor":            func(m *GroupMembership) { m.Assignor = "" },
		"bad topic":              func(m *GroupMembership) { m.Members[0].Topics = []string{"a/b"} },
		"partitions unsorted":    func(m *GroupMembership) { m.Members[1].Target["t"] = []int32{2, 1} },
		"negative partition":     func(m *GroupMembership) { m.Members[1].Target["t"] = []int32{-1} },
		"long client id":         func(m *GroupMembership) { m.Members[0].ClientID = strings.Repeat("x", MaxGroupStringLen+1) },
		"no session timeout":     func(m *GroupMembership) { m.Members[0].SessionTimeoutMs = 0 },
		"too many partitions":    func(m *GroupMembership) { m.Counts["u"] = MaxPartitions; m.Counts["v"] = MaxPartitions * 10 },
		"grant of epoch 0":       func(m *GroupMembership) { m.Members[0].Granted["t"] = [][2]int32{{0, 0}} },
		"granted twice to one":   func(m *GroupMembership) { m.Members[0].Granted["t"] = [][2]int32{{0, 1}, {0, 1}} },
		"unsorted member topics": func(m *GroupMembership) { m.Members[0].Topics = []string{"u", "t"} },
	} {
		m := membership()
		mut(m)
		if err := h.refused(&saveGroupCmd{Term: 1, Group: "g", Membership: m}, ErrInvalidGroupState); err == nil {
			t.Fatalf("%s: accepted", what)
		}
		if !bytes.Equal(h.stateJSON(), before) {
			t.Fatalf("%s: the refused command changed the state", what)
		}
	}
	many := membership()
	for len(many.Members) <= MaxGroupMembers {
		many.Members = append(many.Members, GroupMember{ID: fmt.Sprintf("z%04d", len(many.Members)),
			Topics: []string{"t"}, SessionTimeoutMs: 1, RebalanceTimeoutMs: 1})
	}
	h.refused(&saveGroupCmd{Term: 1, Group: "g", Membership: many}, ErrInvalidGroupState)
	h.refused(&saveGroupCmd{Term: 1, Group: "", Membership: membership()}, ErrInvalidGroupState)
}

// TestSnapshotCarriesMemberships: a snapshot restores every group's
// membership; an older snapshot version restores none, and one that holds
// a bad membership is refused whole.
func TestSnapshotCarriesMemberships(t *testing.T) {
	src := richState(t)
	src.ok(&saveGroupCmd{Term: 1, Group: "billing", Membership: membership()})
	other := membership()
	other.Assignor = "range"
	src.ok(&saveGroupCmd{Term: 1, Group: "audit", Membership: other})
	data := snapshotBytes(t, src.f)

	dst := newFSMHarness(t)
	dst.ok(&saveGroupCmd{Term: 1, Group: "stale", Membership: membership()})
	if err := dst.f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	got := dst.f.memberships.all()
	if len(got) != 2 {
		t.Fatalf("restored memberships of %d groups, want 2 (the stale one replaced)", len(got))
	}
	mustEqual(t, "billing", got["billing"], membership())
	mustEqual(t, "audit", got["audit"], other)
	if !bytes.Equal(snapshotBytes(t, dst.f), data) {
		t.Fatal("a restored state does not snapshot to the same bytes")
	}

	// Damage: two owners of one partition.
	bad := strings.Replace(string(data), `"granted":{"t":[[2,1]]}`, `"granted":{"t":[[1,1],[2,1]]}`, 1)
	if bad == string(data) {
		t.Fatal("test did not damage the snapshot")
	}
	before := dst.stateJSON()
	if err := dst.f.Restore(io.NopCloser(strings.NewReader(bad))); err == nil || !errors.Is(err, ErrInvalidGroupState) {
		t.Fatalf("restore of a snapshot granting a partition twice: %v", err)
	}
	if !bytes.Equal(dst.stateJSON(), before) {
		t.Fatal("a refused snapshot changed the state")
	}
	// A version 3 snapshot has no memberships.
	v3 := strings.Replace(string(data), `{"v":4,`, `{"v":3,`, 1)
	if err := dst.f.Restore(io.NopCloser(strings.NewReader(v3))); err == nil {
		t.Fatal("a version 3 snapshot with memberships was restored")
	}
}

// TestVerifyControllerOnACutOffLeader: a controller cut off from the other
// voters still believes it leads (ControllerTerm answers) until its lease
// runs out; VerifyController, which reads go through, refuses at once
// rather than answer from a state others may have moved past.
func TestVerifyControllerOnACutOffLeader(t *testing.T) {
	open := func(id int32, mut func(*Config)) *Node {
		cfg := testConfig(t, id)
		// A long lease: the cut-off leader goes on believing for seconds.
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 3*time.Second, 3*time.Second, 3*time.Second
		if mut != nil {
			mut(&cfg)
		}
		return openNode(t, cfg)
	}
	n2 := open(2, nil)
	n3 := open(3, nil)
	n1 := open(1, func(c *Config) {
		c.Bootstrap = true
		c.BootstrapServers = []Server{{ID: 1, Voter: true}, {ID: 2, RaftAddr: n2.RaftAddr(), Voter: true}, {ID: 3, RaftAddr: n3.RaftAddr(), Voter: true}}
	})
	nodes := []*Node{n1, n2, n3}
	for _, n := range nodes {
		waitReady(t, n)
	}
	leader := controllerOf(t, nodes)
	ctx := testContext(t, 20*time.Second)
	if _, err := leader.VerifyController(ctx); err != nil {
		t.Fatalf("the controller with its quorum: %v", err)
	}
	for _, n := range nodes {
		if n != leader {
			n.Close()
		}
	}
	if _, err := leader.ControllerTerm(ctx); err != nil {
		// A busy machine can let the cut-off leader step down first; the
		// check below must refuse all the same, though this run then does
		// not tell the barrier from the term check.
		t.Logf("the cut-off leader stepped down before the test could ask: %v", err)
	}
	_, err := leader.VerifyController(ctx)
	if !errors.Is(err, ErrNotController) {
		t.Fatalf("VerifyController on a cut-off leader: %v, want ErrNotController", err)
	}
}
