package rpc

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/security"
)

var (
	pbAliceReads = &stratav1.ACL{Principal: "User:alice", ResourceType: "topic", Name: "orders", Operation: "read"}
	pbBobWrites  = &stratav1.ACL{Principal: "User:bob", ResourceType: "topic", Name: "logs.", Prefix: true, Operation: "write"}
	pbAnyGroups  = &stratav1.ACL{Principal: "*", ResourceType: "group", Prefix: true, Operation: "read"}
	pbOpsAdmin   = &stratav1.ACL{Principal: "User:ops", ResourceType: "cluster", Operation: "admin"}
)

// listACLs lists tb's ACLs (of one principal, or all for "").
func (tb *testBroker) listACLs(t *testing.T, principal string) []*stratav1.ACL {
	t.Helper()
	resp, err := tb.admin.ListACLs(testCtx(t), &stratav1.ListACLsRequest{Principal: principal})
	if err != nil {
		t.Fatalf("list ACLs: %v", err)
	}
	return resp.Acls
}

func mustACLs(t *testing.T, what string, got []*stratav1.ACL, want ...*stratav1.ACL) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d ACLs %v, want %v", what, len(got), got, want)
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("%s: ACL %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestACLAdmin creates, lists and deletes ACLs through the API of a real
// broker; a request with one bad ACL is refused whole.
func TestACLAdmin(t *testing.T) {
	cfg := brokerConfig(t, 1, t.TempDir())
	tb := startBroker(t, cfg)
	ctx := testCtx(t)
	mustACLs(t, "a new cluster", tb.listACLs(t, ""))

	if _, err := tb.admin.CreateACLs(ctx, &stratav1.CreateACLsRequest{Acls: []*stratav1.ACL{pbBobWrites, pbAliceReads, pbOpsAdmin}}); err != nil {
		t.Fatal(err)
	}
	mustACLs(t, "after create", tb.listACLs(t, ""), pbBobWrites, pbAliceReads, pbOpsAdmin)
	// Creating stored ones again is harmless and stores nothing twice.
	if _, err := tb.admin.CreateACLs(ctx, &stratav1.CreateACLsRequest{Acls: []*stratav1.ACL{pbAliceReads, pbAnyGroups}}); err != nil {
		t.Fatal(err)
	}
	mustACLs(t, "after a second create", tb.listACLs(t, ""), pbBobWrites, pbAliceReads, pbOpsAdmin, pbAnyGroups)
	mustACLs(t, "User:alice's", tb.listACLs(t, "User:alice"), pbAliceReads)
	mustACLs(t, "*'s", tb.listACLs(t, "*"), pbAnyGroups)
	mustACLs(t, "an unknown principal's", tb.listACLs(t, "User:nobody"))

	// One bad ACL refuses the request whole: the good one beside it is not
	// stored either.
	fresh := &stratav1.ACL{Principal: "User:carol", ResourceType: "topic", Name: "t", Operation: "read"}
	for _, tc := range []struct {
		bad  *stratav1.ACL
		want string
	}{
		{&stratav1.ACL{Principal: "User:carol", ResourceType: "group", Name: "g", Operation: "write"}, `ACL operation "write" on a group: want one of [read admin]`},
		{&stratav1.ACL{Principal: "carol", ResourceType: "topic", Name: "t", Operation: "read"}, `ACL principal "carol": want User:<name> or *`},
		{&stratav1.ACL{Principal: "User:carol", ResourceType: "table", Name: "t", Operation: "read"}, `ACL resource "table"`},
		{&stratav1.ACL{Principal: "User:carol", ResourceType: "topic", Operation: "read"}, `needs a name`},
		{&stratav1.ACL{Principal: "User:carol", ResourceType: "cluster", Operation: "write"}, `on the cluster: want admin`},
		{&stratav1.ACL{}, `ACL principal ""`},
	} {
		_, err := tb.admin.CreateACLs(ctx, &stratav1.CreateACLsRequest{Acls: []*stratav1.ACL{fresh, tc.bad}})
		code, info, _ := errorInfo(err)
		if code != codes.InvalidArgument || info == nil || info.Reason != string(broker.ReasonInvalidRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("create with %v: %v; want InvalidArgument, INVALID_REQUEST, saying %q", tc.bad, err, tc.want)
		}
		_, err = tb.admin.DeleteACLs(ctx, &stratav1.DeleteACLsRequest{Acls: []*stratav1.ACL{pbAliceReads, tc.bad}})
		if code, _, _ := errorInfo(err); code != codes.InvalidArgument {
			t.Errorf("delete with %v: %v; want InvalidArgument", tc.bad, err)
		}
	}
	_, err := tb.admin.CreateACLs(ctx, &stratav1.CreateACLsRequest{})
	if code, _, _ := errorInfo(err); code != codes.InvalidArgument || !strings.Contains(err.Error(), "no ACLs given") {
		t.Errorf("create of nothing: %v", err)
	}
	mustACLs(t, "after the refusals", tb.listACLs(t, ""), pbBobWrites, pbAliceReads, pbOpsAdmin, pbAnyGroups)

	// Delete: what is stored goes, what is not is not counted.
	resp, err := tb.admin.DeleteACLs(ctx, &stratav1.DeleteACLsRequest{Acls: []*stratav1.ACL{pbAliceReads, fresh, pbOpsAdmin}})
	if err != nil || resp.Removed != 2 {
		t.Fatalf("delete: %v, %v; want 2 removed", resp, err)
	}
	resp, err = tb.admin.DeleteACLs(ctx, &stratav1.DeleteACLsRequest{Acls: []*stratav1.ACL{pbAliceReads}})
	if err != nil || resp.Removed != 0 {
		t.Fatalf("delete of a deleted ACL: %v, %v; want 0 removed and no error", resp, err)
	}
	// A prefix ACL is not removed by the literal one of the same name.
	literal := proto.Clone(pbBobWrites).(*stratav1.ACL)
	literal.Prefix = false
	if resp, err := tb.admin.DeleteACLs(ctx, &stratav1.DeleteACLsRequest{Acls: []*stratav1.ACL{literal}}); err != nil || resp.Removed != 0 {
		t.Fatalf("delete of the literal form of a prefix ACL: %v, %v", resp, err)
	}
	mustACLs(t, "after delete", tb.listACLs(t, ""), pbBobWrites, pbAnyGroups)

	// The ACLs outlive a restart (the metadata's Raft log and snapshots).
	tb.stop(t)
	tb = startBroker(t, cfg)
	mustACLs(t, "after a restart", tb.listACLs(t, ""), pbBobWrites, pbAnyGroups)
}

// TestACLWritesReachTheController: a broker that is not the controller
// passes ACL writes on to the controller (broker/controller.go), from its
// own methods as from its API; the answer, removal count included, comes
// back through it, and the change is in force on it when the call returns.
func TestACLWritesReachTheController(t *testing.T) {
	dir := t.TempDir()
	b1 := startBroker(t, brokerConfig(t, 1, filepath.Join(dir, "b1")))
	b2 := joinSecondBroker(t, b1, brokerConfig(t, 2, filepath.Join(dir, "b2")))
	ctx := testCtx(t)

	// The broker's own method passes the call on: any front end gets it.
	x := security.ACL{Principal: "User:x", Resource: security.ResourceCluster, Op: security.OpAdmin}
	if err := b2.AddACLs(ctx, []security.ACL{x}); err != nil {
		t.Fatalf("AddACLs on broker 2: %v", err)
	}
	if !slices.Contains(b1.ACLs(""), x) || !slices.Contains(b2.ACLs(""), x) {
		t.Fatalf("after AddACLs through broker 2: the controller has %v, broker 2 %v", b1.ACLs(""), b2.ACLs(""))
	}
	if n, err := b2.RemoveACLs(ctx, []security.ACL{x}); err != nil || n != 1 || slices.Contains(b2.ACLs(""), x) {
		t.Fatalf("RemoveACLs on broker 2: %d, %v; broker 2 has %v", n, err, b2.ACLs(""))
	}

	if _, err := b2.admin.CreateACLs(ctx, &stratav1.CreateACLsRequest{Acls: []*stratav1.ACL{pbAliceReads, pbOpsAdmin}}); err != nil {
		t.Fatalf("create through broker 2: %v", err)
	}
	// The controller has them when the call returns; broker 2 once the
	// metadata reaches it.
	mustACLs(t, "on the controller", b1.listACLs(t, ""), pbAliceReads, pbOpsAdmin)
	waitACLs(t, b2, 2)
	mustACLs(t, "on broker 2", b2.listACLs(t, ""), pbAliceReads, pbOpsAdmin)

	resp, err := b2.admin.DeleteACLs(ctx, &stratav1.DeleteACLsRequest{Acls: []*stratav1.ACL{pbOpsAdmin, pbBobWrites}})
	if err != nil || resp.Removed != 1 {
		t.Fatalf("delete through broker 2: %v, %v; want 1 removed", resp, err)
	}
	mustACLs(t, "on the controller after delete", b1.listACLs(t, ""), pbAliceReads)
	waitACLs(t, b2, 1)

	// A bad ACL is refused where it arrives, as InvalidArgument.
	_, err = b2.admin.CreateACLs(ctx, &stratav1.CreateACLsRequest{Acls: []*stratav1.ACL{{Principal: "User:x", ResourceType: "cluster", Name: "c", Operation: "admin"}}})
	if code, _, _ := errorInfo(err); code != codes.InvalidArgument {
		t.Fatalf("bad ACL through broker 2: %v", err)
	}
	mustACLs(t, "on the controller after the refusal", b1.listACLs(t, ""), pbAliceReads)
}

// waitACLs waits until tb lists n ACLs.
func waitACLs(t *testing.T, tb *testBroker, n int) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("broker %d to list %d ACLs", tb.cfg.NodeID, n), func() error {
		if got := tb.listACLs(t, ""); len(got) != n {
			return fmt.Errorf("it lists %d: %v", len(got), got)
		}
		return nil
	})
}
