package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCommitOffsetsGroupLimits: a real controller refuses group names that
// break the naming rules and, with WithMaxGroups, a commit that would create
// a group beyond the bound, storing nothing; groups that exist keep
// committing, and without the option there is no bound.
func TestCommitOffsetsGroupLimits(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Bootstrap = true
	n := openNode(t, cfg)
	waitReady(t, n)
	ctx := testContext(t, 10*time.Second)
	if err := n.RegisterBroker(ctx, BrokerInfo{ID: 1, Addr: "127.0.0.1:9092", RaftAddr: n.RaftAddr()}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.CreateTopic(ctx, "orders", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	at := func(off int64) []OffsetCommitRequest {
		return []OffsetCommitRequest{{Topic: "orders", Partition: 0, Offset: off}}
	}

	for _, name := range []string{strings.Repeat("g", 10<<10), "tab\there", "nul\x00"} {
		mustIs(t, n.CommitOffsets(ctx, name, at(1)), ErrInvalidOffsetCommit)
		if _, ok := n.CommittedOffset(name, "orders", 0); ok {
			t.Fatalf("an offset was stored for the refused group %.20q", name)
		}
	}

	limit := WithMaxGroups(2)
	for _, g := range []string{"g1", "g2"} {
		if err := n.CommitOffsets(ctx, g, at(1), limit); err != nil {
			t.Fatalf("commit of group %s within the bound: %v", g, err)
		}
	}
	err := n.CommitOffsets(ctx, "g3", at(1), limit)
	var tm *TooManyGroupsError
	if !errors.As(err, &tm) || !errors.Is(err, ErrInvalidOffsetCommit) {
		t.Fatalf("commit of a third group with a bound of 2: %v; want a *TooManyGroupsError", err)
	}
	if tm.Group != "g3" || tm.Groups != 2 || tm.Max != 2 {
		t.Fatalf("error %+v", tm)
	}
	for _, want := range []string{`"g3"`, "2 exist", "at most 2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
	if _, ok := n.CommittedOffset("g3", "orders", 0); ok {
		t.Fatal("the refused group's offset was stored")
	}
	// An existing group is not a new one.
	if err := n.CommitOffsets(ctx, "g1", at(5), limit); err != nil {
		t.Fatalf("commit of an existing group at the bound: %v", err)
	}
	if oc, _ := n.CommittedOffset("g1", "orders", 0); oc.Offset != 5 {
		t.Fatalf("g1 at %d, want 5", oc.Offset)
	}
	// No option, no bound.
	if err := n.CommitOffsets(ctx, "g3", at(1)); err != nil {
		t.Fatalf("commit without a bound: %v", err)
	}
}
