package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/group"
)

// kadm's group administration: ListGroups with state and type filters,
// DescribeGroups of a group with members, one with offsets only and one
// with neither, DeleteOffsets sparing the topics a member subscribes to
// (GROUP_SUBSCRIBED_TO_TOPIC), and DeleteGroups.
func TestKadmGroupAdmin(t *testing.T) {
	tb := startBroker(t)
	ordersID := topicID(tb.createTopic(t, "orders", 2).ID)
	tb.createTopic(t, "audit", 1)
	ctx := testCtx(t)
	cl := tb.client(t)
	adm := kadm.NewClient(cl)

	// "live" has a member reading orders and offsets in orders and audit;
	// "idle" has offsets only.
	ans, err := tb.GroupHeartbeat(ctx, broker.Heartbeat{Group: "live", Topics: []string{"orders"}, ClientID: "reader", Host: "10.0.0.1", NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "audit", Partition: 0, At: 9, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "idle", os); err != nil {
		t.Fatal(err)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.MemberID, commit.Generation = "live", ans.MemberID, ans.MemberEpoch
	for _, topic := range []string{"orders"} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = topic, ordersID // kgo sends v10, by id
		for p := range int32(2) {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, 4
			rt.Partitions = append(rt.Partitions, rp)
		}
		commit.Topics = append(commit.Topics, rt)
	}
	if r, err := commit.RequestWith(ctx, cl); err != nil || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("member commit: %+v %v", r, err)
	}

	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 2 || listed["live"].State != "Stable" || listed["idle"].State != "Empty" ||
		listed["live"].GroupType != "consumer" || listed["idle"].ProtocolType != "consumer" {
		t.Fatalf("listed %+v", listed)
	}
	if only, err := adm.ListGroups(ctx, "empty"); err != nil || len(only) != 1 || only["idle"].Group != "idle" {
		t.Fatalf("listed Empty (filter in any case): %+v %v", only, err)
	}
	if none, err := adm.ListGroupsByType(ctx, []string{"classic"}); err != nil || len(none) != 0 {
		t.Fatalf("listed classic groups: %+v %v", none, err)
	}
	if all, err := adm.ListGroupsByType(ctx, []string{"Consumer"}); err != nil || len(all) != 2 {
		t.Fatalf("listed consumer groups: %+v %v", all, err)
	}

	described, err := adm.DescribeGroups(ctx, "live", "idle", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	live := described["live"]
	if live.Err != nil || live.State != "Stable" || live.Protocol != "sticky" || len(live.Members) != 1 {
		t.Fatalf("live: %+v", live)
	}
	m := live.Members[0]
	join, _ := m.Join.AsConsumer()
	asg, _ := m.Assigned.AsConsumer()
	if m.MemberID != ans.MemberID || m.ClientID != "reader" || m.ClientHost != "10.0.0.1" ||
		join == nil || len(join.Topics) != 1 || join.Topics[0] != "orders" || asg == nil || len(asg.Topics) != 1 || len(asg.Topics[0].Partitions) != 2 {
		t.Fatalf("live member: %+v (subscription %+v, assignment %+v)", m, join, asg)
	}
	if idle := described["idle"]; idle.Err != nil || idle.State != "Empty" || len(idle.Members) != 0 {
		t.Fatalf("idle: %+v", idle)
	}
	if nobody := described["nobody"]; nobody.State != "Dead" || nobody.Err != kerr.GroupIDNotFound {
		t.Fatalf("nobody: %+v", nobody)
	}

	// OffsetDelete: orders is subscribed by live's member, so its offsets
	// stay; audit's (committed before the member joined) go.
	os = nil
	os.Add(kadm.Offset{Topic: "audit", Partition: 0, At: 1, LeaderEpoch: -1})
	if _, err := tb.GroupHeartbeat(ctx, broker.Heartbeat{Group: "live", MemberID: ans.MemberID, MemberEpoch: group.LeaveEpoch}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CommitOffsets(ctx, "live", os); err != nil {
		t.Fatal(err)
	}
	ans, err = tb.GroupHeartbeat(ctx, broker.Heartbeat{Group: "live", Topics: []string{"orders"}, NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	del, err := adm.DeleteOffsets(ctx, "live", kadm.TopicsSet{"orders": {0: {}, 1: {}}, "audit": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := del.Lookup("orders", 0); e != kerr.GroupSubscribedToTopic {
		t.Errorf("delete of a subscribed topic's offset: %v, want GROUP_SUBSCRIBED_TO_TOPIC", e)
	}
	if e, ok := del.Lookup("audit", 0); !ok || e != nil {
		t.Errorf("delete of audit/0: %v (%v)", e, ok)
	}
	left, err := adm.FetchOffsets(ctx, "live")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := left.Lookup("audit", 0); ok {
		t.Error("audit/0 still committed after its delete")
	}
	if o, ok := left.Lookup("orders", 1); !ok || o.At != 4 {
		t.Errorf("orders/1 after a refused delete: %+v (%v), want 4", o, ok)
	}
	if _, err := adm.DeleteOffsets(ctx, "nobody", kadm.TopicsSet{"audit": {0: {}}}); err != kerr.GroupIDNotFound {
		t.Errorf("delete offsets of a group that does not exist: %v", err)
	}

	// DeleteGroups: a group with members is refused and keeps everything;
	// an empty one goes; one that does not exist is GROUP_ID_NOT_FOUND.
	dg, err := adm.DeleteGroups(ctx, "live", "idle", "nobody")
	if err != nil {
		t.Fatal(err)
	}
	if dg["live"].Err != kerr.NonEmptyGroup || dg["idle"].Err != nil || dg["nobody"].Err != kerr.GroupIDNotFound {
		t.Fatalf("deleted: %+v", dg)
	}
	if o, err := adm.FetchOffsets(ctx, "idle"); err != nil || len(o) != 0 {
		t.Fatalf("idle after delete: %+v %v", o, err)
	}
	if o, err := adm.FetchOffsets(ctx, "live"); err != nil || len(o) == 0 {
		t.Fatalf("live lost its offsets to a refused delete: %+v %v", o, err)
	}
}
