package rpc

import (
	"context"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

func tps(topic string, parts ...int32) []*stratav1.TopicPartition {
	out := make([]*stratav1.TopicPartition, len(parts))
	for i, p := range parts {
		out[i] = &stratav1.TopicPartition{Topic: topic, Partition: p}
	}
	return out
}

// committed returns a group's committed offsets by partition.
func committed(t *testing.T, tb *testBroker, group string) map[int32]int64 {
	t.Helper()
	resp, err := tb.offsets.FetchOffsets(testCtx(t), &stratav1.FetchOffsetsRequest{Group: group})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, o := range resp.GetOffsets() {
		out[o.GetPartition()] = o.GetOffset()
	}
	return out
}

// TestGroupBadInput: unknown groups and members, commits for partitions a
// member does not own or with a stale epoch, commits and resets from
// outside a group that has members, and malformed heartbeats are refused
// with their reasons, and nothing is committed.
func TestGroupBadInput(t *testing.T) {
	dir := t.TempDir()
	b1 := startBroker(t, brokerConfig(t, 1, filepath.Join(dir, "b1")))
	// Broker 2 is not the controller: every group call goes through it and
	// is forwarded.
	b2 := joinSecondBroker(t, b1, brokerConfig(t, 2, filepath.Join(dir, "b2")))
	ctx := testCtx(t)
	b1.createTopic(t, "t", 2, nil)
	groups := stratav1.NewGroupServiceClient(b2.conn)

	want := func(what string, err error, code codes.Code, reason string) {
		t.Helper()
		if c, info, _ := errorInfo(err); c != code || info == nil || info.Reason != reason {
			t.Errorf("%s: %v; want %v %s", what, err, code, reason)
		}
	}
	_, err := groups.DescribeGroup(ctx, &stratav1.DescribeGroupRequest{Group: "nobody"})
	want("describe an unknown group", err, codes.NotFound, "GROUP_NOT_FOUND")
	_, err = groups.DeleteGroup(ctx, &stratav1.DeleteGroupRequest{Group: "nobody"})
	want("delete an unknown group", err, codes.NotFound, "GROUP_NOT_FOUND")
	_, err = groups.GroupHeartbeat(ctx, &stratav1.GroupHeartbeatRequest{Group: "g", MemberId: "ghost", MemberEpoch: 3})
	want("heartbeat of an unknown member", err, codes.FailedPrecondition, "UNKNOWN_MEMBER")
	_, err = groups.GroupHeartbeat(ctx, &stratav1.GroupHeartbeatRequest{Group: "g"})
	want("join without topics", err, codes.InvalidArgument, "INVALID_REQUEST")
	_, err = groups.GroupHeartbeat(ctx, &stratav1.GroupHeartbeatRequest{Group: "g", Topics: []string{"t"}, SessionTimeoutMs: 5})
	want("join with a 5 ms session", err, codes.InvalidArgument, "INVALID_REQUEST")
	_, err = groups.GroupHeartbeat(ctx, &stratav1.GroupHeartbeatRequest{Group: "", Topics: []string{"t"}})
	want("join without a group", err, codes.InvalidArgument, "INVALID_REQUEST")
	_, err = groups.GroupHeartbeat(ctx, &stratav1.GroupHeartbeatRequest{Group: "g", Topics: []string{"bad/name"}})
	want("join with a bad topic name", err, codes.InvalidArgument, "INVALID_TOPIC_NAME")

	// Two members split the topic.
	join := func() *stratav1.GroupHeartbeatResponse {
		t.Helper()
		resp, err := groups.GroupHeartbeat(ctx, &stratav1.GroupHeartbeatRequest{Group: "g", Topics: []string{"t"}, NoWait: true})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	a := join()
	if len(a.GetAssigned()) != 2 {
		t.Fatalf("first member got %v", a.GetAssigned())
	}
	b := join()
	// a learns to give partition 1 up, and reports it gone.
	beat := func(m *stratav1.GroupHeartbeatResponse, owned []*stratav1.TopicPartition) *stratav1.GroupHeartbeatResponse {
		t.Helper()
		resp, err := groups.GroupHeartbeat(ctx, &stratav1.GroupHeartbeatRequest{Group: "g", MemberId: m.GetMemberId(), MemberEpoch: m.GetMemberEpoch(), Owned: owned, NoWait: true})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	a = beat(a, tps("t", 0, 1))
	kept := a.GetAssigned()
	if len(kept) != 1 {
		t.Fatalf("a keeps %v", kept)
	}
	a = beat(a, kept)
	b = beat(b, nil)
	if len(b.GetAssigned()) != 1 || b.GetAssigned()[0].GetPartition() == kept[0].GetPartition() {
		t.Fatalf("b got %v, a kept %v", b.GetAssigned(), kept)
	}
	lost := b.GetAssigned()[0].GetPartition()

	commit := func(member string, epoch int32, partition int32, offset int64) error {
		_, err := b2.offsets.CommitOffsets(ctx, &stratav1.CommitOffsetsRequest{Group: "g", MemberId: member, MemberEpoch: epoch,
			Offsets: []*stratav1.CommittedOffset{{Topic: "t", Partition: partition, Offset: offset}}})
		return err
	}
	// The owners commit.
	if err := commit(a.GetMemberId(), a.GetMemberEpoch(), kept[0].GetPartition(), 5); err != nil {
		t.Fatal(err)
	}
	if err := commit(b.GetMemberId(), b.GetMemberEpoch(), lost, 7); err != nil {
		t.Fatal(err)
	}
	before := committed(t, b1, "g")

	want("commit of a partition the member lost", commit(a.GetMemberId(), a.GetMemberEpoch(), lost, 99), codes.FailedPrecondition, "FENCED_MEMBER")
	want("commit with an epoch the member was never given", commit(a.GetMemberId(), a.GetMemberEpoch()+10, kept[0].GetPartition(), 99), codes.FailedPrecondition, "FENCED_MEMBER")
	want("commit by an unknown member", commit("ghost", 1, 0, 99), codes.FailedPrecondition, "UNKNOWN_MEMBER")
	want("commit from outside the group", commit("", 0, 0, 99), codes.FailedPrecondition, "GROUP_NOT_EMPTY")
	_, err = groups.ResetGroupOffsets(ctx, &stratav1.ResetGroupOffsetsRequest{Group: "g", Offsets: []*stratav1.CommittedOffset{{Topic: "t", Partition: 0, Offset: 0}}})
	want("reset while the group has members", err, codes.FailedPrecondition, "GROUP_NOT_EMPTY")
	_, err = groups.DeleteGroup(ctx, &stratav1.DeleteGroupRequest{Group: "g"})
	want("delete while the group has members", err, codes.FailedPrecondition, "GROUP_NOT_EMPTY")
	_, err = groups.ResetGroupOffsets(ctx, &stratav1.ResetGroupOffsetsRequest{Group: "g", Force: true, Offsets: []*stratav1.CommittedOffset{{Topic: "t", Partition: 9, Offset: 0}}})
	want("reset of a partition that does not exist", err, codes.NotFound, "PARTITION_NOT_FOUND")
	if after := committed(t, b1, "g"); len(after) != len(before) || after[0] != before[0] || after[1] != before[1] {
		t.Fatalf("refused calls changed the commits: %v, before %v", after, before)
	}

	d, err := groups.DescribeGroup(ctx, &stratav1.DescribeGroupRequest{Group: "g"})
	if err != nil || len(d.GetMembers()) != 2 || d.GetState() != "stable" || len(d.GetOffsets()) != 2 {
		t.Fatalf("describe: %v %v", d, err)
	}
	if h := d.GetMembers()[0].GetHost(); h != "127.0.0.1" {
		t.Errorf("member host %q; want the caller's address, through the forwarding broker", h)
	}

	// A forced reset removes the members: they are unknown from then on.
	r, err := groups.ResetGroupOffsets(ctx, &stratav1.ResetGroupOffsetsRequest{Group: "g", Force: true,
		Offsets: []*stratav1.CommittedOffset{{Topic: "t", Partition: 0, Offset: 1}, {Topic: "t", Partition: 1, Offset: 2}}})
	if err != nil || r.GetRemovedMembers() != 2 {
		t.Fatalf("forced reset: %v %v", r, err)
	}
	if got := committed(t, b1, "g"); got[0] != 1 || got[1] != 2 {
		t.Fatalf("after the reset: %v", got)
	}
	_, err = groups.GroupHeartbeat(ctx, &stratav1.GroupHeartbeatRequest{Group: "g", MemberId: a.GetMemberId(), MemberEpoch: a.GetMemberEpoch(), Owned: kept, NoWait: true})
	want("heartbeat of a member removed by force", err, codes.FailedPrecondition, "UNKNOWN_MEMBER")
	want("commit of a member removed by force", commit(a.GetMemberId(), a.GetMemberEpoch(), kept[0].GetPartition(), 50), codes.FailedPrecondition, "UNKNOWN_MEMBER")

	// A joining member's answer carries the committed positions of what it
	// is given, read at the coordinator.
	fresh := join()
	got := map[int32]int64{}
	for _, o := range fresh.GetCommitted() {
		got[o.GetPartition()] = o.GetOffset()
	}
	if len(fresh.GetAssigned()) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("a new member got %v with committed %v; want both partitions at 1 and 2", fresh.GetAssigned(), got)
	}
	if _, err := groups.GroupHeartbeat(ctx, &stratav1.GroupHeartbeatRequest{Group: "g", MemberId: fresh.GetMemberId(), MemberEpoch: -1}); err != nil {
		t.Fatal(err)
	}

	list, err := groups.ListGroups(ctx, &stratav1.ListGroupsRequest{})
	if err != nil || len(list.GetGroups()) != 1 || list.GetGroups()[0].GetState() != "empty" {
		t.Fatalf("list: %v %v", list, err)
	}
	if _, err := groups.DeleteGroup(ctx, &stratav1.DeleteGroupRequest{Group: "g"}); err != nil {
		t.Fatal(err)
	}
	_, err = groups.DescribeGroup(context.Background(), &stratav1.DescribeGroupRequest{Group: "g"})
	want("describe a deleted group", err, codes.NotFound, "GROUP_NOT_FOUND")
}
