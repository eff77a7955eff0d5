package kafka

import (
	"cmp"
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
	// kgo may send the keys in separate requests and merge the answers
	// in any order.
	slices.SortFunc(resp.Coordinators, func(a, b kmsg.FindCoordinatorResponseCoordinator) int {
		return cmp.Compare(b.Key, a.Key) // "orders", "a\x00b", ""
	})
	ok := resp.Coordinators[0]
	if ok.ErrorCode != 0 || ok.NodeID != tb.ID() || ok.Key != "orders" {
		t.Fatalf("group orders: %+v, want node %d", ok, tb.ID())
	}
	if got := net.JoinHostPort(ok.Host, strconv.Itoa(int(ok.Port))); got != tb.addr {
		t.Fatalf("coordinator at %s, want %s", got, tb.addr)
	}
	for _, bad := range resp.Coordinators[1:] {
		if bad.ErrorCode != kerr.InvalidGroupID.Code || bad.NodeID != -1 {
			t.Errorf("group %q: code %d node %d, want INVALID_GROUP_ID and -1", bad.Key, bad.ErrorCode, bad.NodeID)
		}
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
