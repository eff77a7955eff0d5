package kafka

import (
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/testutil"
)

func connectJoin(member, meta string, protocols ...string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.ProtocolType = "workers", member, "connect"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 6000, 10000
	if len(protocols) == 0 {
		protocols = []string{"sessioned", "default"}
	}
	for _, name := range protocols {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = name, []byte(meta+"/"+name)
		req.Protocols = append(req.Protocols, p)
	}
	return req
}

// answerLater reads c's next response on its own goroutine, decoded into
// resp at version; the channel gets nil or why it could not.
func answerLater(c *rawConn, version int16, resp kmsg.Response) <-chan error {
	out := make(chan error, 1)
	go func() {
		var size [4]byte
		if _, err := io.ReadFull(c.br, size[:]); err != nil {
			out <- err
			return
		}
		b := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c.br, b); err != nil {
			out <- err
			return
		}
		b = b[4:]
		resp.SetVersion(version)
		if resp.IsFlexible() {
			b = b[1:]
		}
		out <- resp.ReadFrom(b)
	}()
	return out
}

func wait(t *testing.T, what string, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: no answer within 15s", what)
	}
}

// TestClassicConnectGroup: a "connect"-type group runs Kafka's classic
// protocol: the first member joins alone and leads, its SyncGroup
// assignment comes back to it; a second member's join starts a
// rebalance that the first hears of on Heartbeat, and once it joins
// again both are answered in a new generation, the leader with both
// members' metadata, and the leader's assignments reach each member.
// Members of another protocol type or with no shared protocol are
// refused, and a member leaving starts a rebalance.
func TestClassicConnectGroup(t *testing.T) {
	tb := startBroker(t)
	ca, cb := dialRaw(t, tb.addr), dialRaw(t, tb.addr)

	join := kmsg.NewPtrJoinGroupResponse()
	roundTrip(t, ca, connectJoin("", "a"), 9, join)
	if join.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %v, want MEMBER_ID_REQUIRED", kerr.ErrorForCode(join.ErrorCode))
	}
	a := join.MemberID
	roundTrip(t, ca, connectJoin(a, "a"), 9, join)
	if join.ErrorCode != 0 || join.Generation != 1 || join.LeaderID != a || *join.Protocol != "sessioned" ||
		len(join.Members) != 1 || string(join.Members[0].ProtocolMetadata) != "a/sessioned" {
		t.Fatalf("a alone: %v %+v", kerr.ErrorForCode(join.ErrorCode), join)
	}
	sync := func(member string, gen int32, assignments map[string]string) *kmsg.SyncGroupRequest {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Group, req.MemberID, req.Generation = "workers", member, gen
		pt, p := "connect", "sessioned"
		req.ProtocolType, req.Protocol = &pt, &p
		for id, as := range assignments {
			ga := kmsg.NewSyncGroupRequestGroupAssignment()
			ga.MemberID, ga.MemberAssignment = id, []byte(as)
			req.GroupAssignment = append(req.GroupAssignment, ga)
		}
		return req
	}
	sresp := kmsg.NewPtrSyncGroupResponse()
	roundTrip(t, ca, sync(a, 1, map[string]string{a: "a@1"}), 5, sresp)
	if sresp.ErrorCode != 0 || string(sresp.MemberAssignment) != "a@1" {
		t.Fatalf("a's sync: %v %q", kerr.ErrorForCode(sresp.ErrorCode), sresp.MemberAssignment)
	}
	heartbeat := func(c *rawConn, member string, gen int32) *kerr.Error {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.MemberID, req.Generation = "workers", member, gen
		resp := kmsg.NewPtrHeartbeatResponse()
		roundTrip(t, c, req, 4, resp)
		return kerr.TypedErrorForCode(resp.ErrorCode)
	}
	if err := heartbeat(ca, a, 1); err != nil {
		t.Fatalf("a's heartbeat: %v", err)
	}

	// b joins (v3: an id at once) and waits for a to join again.
	cb.send(frameOf(connectJoin("", "b", "compat", "sessioned"), 3, 9))
	bjoin := kmsg.NewPtrJoinGroupResponse()
	bAnswered := answerLater(cb, 3, bjoin)
	// b's join is on its way.
	testutil.Eventually(t, 10*time.Second, "a to hear of the rebalance", func() error {
		if code := heartbeat(ca, a, 1); code != kerr.RebalanceInProgress {
			return fmt.Errorf("a never heard of the rebalance: heartbeat answered %v", code)
		}
		return nil
	})
	roundTrip(t, ca, connectJoin(a, "a"), 9, join)
	wait(t, "b's join", bAnswered)
	b := bjoin.MemberID
	if join.ErrorCode != 0 || bjoin.ErrorCode != 0 || join.Generation != 2 || bjoin.Generation != 2 ||
		join.LeaderID != a || bjoin.LeaderID != a || len(bjoin.Members) != 0 {
		t.Fatalf("rejoin: a %v %+v; b %v %+v", kerr.ErrorForCode(join.ErrorCode), join, kerr.ErrorForCode(bjoin.ErrorCode), bjoin)
	}
	var metas []string
	for _, m := range join.Members {
		metas = append(metas, m.MemberID+"="+string(m.ProtocolMetadata))
	}
	slices.Sort(metas)
	want := []string{a + "=a/sessioned", b + "=b/sessioned"}
	slices.Sort(want)
	if !slices.Equal(metas, want) || *join.Protocol != "sessioned" {
		t.Fatalf("leader's members %v protocol %q, want %v of sessioned (the only one both offer)", metas, *join.Protocol, want)
	}

	// b's sync waits for the leader's.
	cb.send(frameOf(sync(b, 2, nil), 3, 10))
	bsync := kmsg.NewPtrSyncGroupResponse()
	bSynced := answerLater(cb, 3, bsync)
	roundTrip(t, ca, sync(a, 2, map[string]string{a: "a@2", b: "b@2"}), 5, sresp)
	wait(t, "b's sync", bSynced)
	if sresp.ErrorCode != 0 || string(sresp.MemberAssignment) != "a@2" || bsync.ErrorCode != 0 || string(bsync.MemberAssignment) != "b@2" {
		t.Fatalf("syncs: a %v %q, b %v %q", kerr.ErrorForCode(sresp.ErrorCode), sresp.MemberAssignment,
			kerr.ErrorForCode(bsync.ErrorCode), bsync.MemberAssignment)
	}
	if err := heartbeat(ca, a, 2); err != nil {
		t.Fatalf("a at generation 2: %v", err)
	}
	if err := heartbeat(ca, a, 1); err != kerr.IllegalGeneration {
		t.Fatalf("a at generation 1: %v, want ILLEGAL_GENERATION", err)
	}

	// A consumer, and a worker with no protocol in common, are refused.
	roundTrip(t, cb, joinRequest("workers", "", consumerMeta(1, []string{"t"}, nil), "range"), 9, join)
	if join.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("consumer joining a connect group: %v", kerr.ErrorForCode(join.ErrorCode))
	}
	roundTrip(t, cb, connectJoin("", "c", "other"), 3, join)
	if join.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("a worker with no shared protocol: %v", kerr.ErrorForCode(join.ErrorCode))
	}

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = "workers"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: b}}
	lresp := kmsg.NewPtrLeaveGroupResponse()
	roundTrip(t, cb, leave, 5, lresp)
	if lresp.ErrorCode != 0 || len(lresp.Members) != 1 || lresp.Members[0].ErrorCode != 0 {
		t.Fatalf("b leaves: %+v", lresp)
	}
	if err := heartbeat(ca, a, 2); err != kerr.RebalanceInProgress {
		t.Fatalf("a after b left: %v, want REBALANCE_IN_PROGRESS", err)
	}
	roundTrip(t, ca, connectJoin(a, "a"), 9, join)
	if join.ErrorCode != 0 || join.Generation != 3 || len(join.Members) != 1 {
		t.Fatalf("a alone again: %v %+v", kerr.ErrorForCode(join.ErrorCode), join)
	}
}

// TestClassicConnectGroupDescribed: a classic group of another protocol
// type shows in DescribeGroup with its protocol type, protocol and
// members, and its offsets cannot be deleted while it has members.
func TestClassicConnectGroupDescribed(t *testing.T) {
	tb := startBroker(t)
	c := dialRaw(t, tb.addr)
	join := kmsg.NewPtrJoinGroupResponse()
	roundTrip(t, c, connectJoin("", "a"), 3, join)
	if join.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(join.ErrorCode))
	}
	d, err := tb.DescribeGroup(testCtx(t), "workers")
	if err != nil {
		t.Fatal(err)
	}
	if d.ProtocolType != "connect" || d.Assignor != "sessioned" || len(d.Members) != 1 || d.Members[0].ID != join.MemberID {
		t.Fatalf("described: %+v", d.Description)
	}
	groups, err := tb.ListGroups(testCtx(t))
	if err != nil || len(groups) != 1 || groups[0].ProtocolType != "connect" || groups[0].Members != 1 {
		t.Fatalf("listed: %+v, %v", groups, err)
	}
	if _, err := tb.DeleteGroup(testCtx(t), "workers", false); err == nil {
		t.Fatal("a classic group with a member was deleted")
	}
}

// TestClassicConnectGroupListed: DescribeGroups and ListGroups name a
// classic group of another protocol type as such.
func TestClassicConnectGroupListed(t *testing.T) {
	tb := startBroker(t)
	c := dialRaw(t, tb.addr)
	join := kmsg.NewPtrJoinGroupResponse()
	roundTrip(t, c, connectJoin("", "a"), 3, join)
	if join.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(join.ErrorCode))
	}
	cl := tb.client(t)
	dreq := kmsg.NewPtrDescribeGroupsRequest()
	dreq.Groups = []string{"workers"}
	dresp, err := dreq.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if g := dresp.Groups[0]; g.ErrorCode != 0 || g.ProtocolType != "connect" || g.Protocol != "sessioned" || g.State != "CompletingRebalance" ||
		len(g.Members) != 1 || g.Members[0].MemberID != join.MemberID {
		t.Fatalf("described: %+v", g)
	}
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.TypesFilter = []string{"classic"}
	lresp, err := lreq.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(lresp.Groups) != 1 || lresp.Groups[0].ProtocolType != "connect" || lresp.Groups[0].GroupType != "classic" {
		t.Fatalf("listed: %+v", lresp.Groups)
	}
}
