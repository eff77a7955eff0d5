package rpc

import (
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/group"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// TestClassicMemberSurvivesControllerFailover: a classic (JoinGroup)
// member's membership, generation, protocol and assignment are in the Raft
// state, so the new controller, after the old one stops, recognises its
// heartbeat and hands its SyncGroup the same assignment; a newcomer gets
// nothing the member may still own. The Kafka front end calls these broker
// methods; the cluster harness lives here.
func TestClassicMemberSurvivesControllerFailover(t *testing.T) {
	bs := threeBrokers(t)
	ctx := testCtx(t)
	md, err := bs[0].meta.GetMetadata(ctx, &stratav1.GetMetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ctrl := byID(bs, md.GetControllerId())
	ctrl.createTopic(t, "t", 4, nil)
	join := group.ClassicJoin{Group: "g", Protocols: []string{"range"}, Version: 3, Topics: []string{"t"},
		SessionTimeout: 8 * time.Second, RebalanceTimeout: 20 * time.Second}
	ans, err := ctrl.JoinClassicGroup(ctx, join)
	if err != nil {
		t.Fatal(err)
	}
	before, err := ctrl.SyncClassicGroup(ctx, group.ClassicSync{Group: "g", MemberID: ans.MemberID, Generation: ans.Generation})
	if err != nil || len(before.Consumer.Assigned) != 4 {
		t.Fatalf("sync before: %+v, %v", before, err)
	}

	ctrl.stop(t)
	var next *testBroker
	testutil.WaitFor(t, 20*time.Second, "a new controller recognising the classic member", func() bool {
		for _, b := range bs {
			if b != ctrl && b.HeartbeatClassicGroup(ctx, "g", ans.MemberID, ans.Generation) == nil {
				next = b
				return true
			}
		}
		return false
	})
	after, err := next.SyncClassicGroup(ctx, group.ClassicSync{Group: "g", MemberID: ans.MemberID, Generation: ans.Generation})
	if err != nil || !slices.Equal(after.Consumer.Assigned, before.Consumer.Assigned) || after.Protocol != "range" || after.Consumer.Version != 3 {
		t.Fatalf("sync after the failover: %+v, %v; before %+v", after, err, before)
	}
	join.Protocols = []string{"range", "roundrobin"}
	newcomer, err := next.JoinClassicGroup(ctx, join)
	if err != nil {
		t.Fatal(err)
	}
	got, err := next.SyncClassicGroup(ctx, group.ClassicSync{Group: "g", MemberID: newcomer.MemberID, Generation: newcomer.Generation})
	if err != nil || len(got.Consumer.Assigned) != 0 || got.Protocol != "range" {
		t.Fatalf("a newcomer at the new controller got %+v, %v; the resumed member still owns every partition", got, err)
	}
}
