package kafka

import (
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every broker coordinates every group itself (passing group calls on to
// the controller), so FindCoordinator names the broker asked, for each
// key; transactional and malformed keys get their errors.
func TestFindCoordinatorNamesTheBrokerAsked(t *testing.T) {
	tb := startBroker(t)
	cl := tb.client(t)

	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = coordinatorGroup
	req.CoordinatorKeys = []string{"orders", "", "a\x00b"}
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Coordinators) != 3 {
		t.Fatalf("got %d answers for 3 keys", len(resp.Coordinators))
	}
	// kgo sends the keys deduplicated through a map, so in any order:
	// answers are matched by key.
	for _, k := range resp.Coordinators {
		if k.Key == "orders" {
			if k.ErrorCode != 0 || k.NodeID != tb.ID() {
				t.Fatalf("group orders: %+v, want node %d", k, tb.ID())
			}
			if got := net.JoinHostPort(k.Host, strconv.Itoa(int(k.Port))); got != tb.addr {
				t.Fatalf("coordinator at %s, want %s", got, tb.addr)
			}
			continue
		}
		if k.ErrorCode != kerr.InvalidGroupID.Code || k.NodeID != -1 {
			t.Errorf("group %q: code %d node %d, want INVALID_GROUP_ID and -1", k.Key, k.ErrorCode, k.NodeID)
		}
	}
	if !slices.ContainsFunc(resp.Coordinators, func(k kmsg.FindCoordinatorResponseCoordinator) bool { return k.Key == "orders" }) {
		t.Fatalf("no answer for group orders: %+v", resp.Coordinators)
	}

	old := kmsg.NewPtrFindCoordinatorRequest()
	old.Version = 3
	old.CoordinatorKey = "orders"
	oresp, err := old.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if oresp.ErrorCode != 0 || oresp.NodeID != tb.ID() {
		t.Fatalf("v3: %+v", oresp)
	}

	txn := kmsg.NewPtrFindCoordinatorRequest()
	txn.CoordinatorType = coordinatorTransaction
	txn.CoordinatorKeys = []string{"tx"}
	tresp, err := txn.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := tresp.Coordinators[0]; c.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("transaction coordinator: code %d, want COORDINATOR_NOT_AVAILABLE", c.ErrorCode)
	}
}
