package rpc

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// TestGroupSurvivesControllerFailover: three members own a topic's six
// partitions, two each, and commit; the controller broker stops. The new
// controller resumes the group: it knows every member, its epoch and its
// partitions; a member joining then gets nothing its owners may still be
// reading; the old members' heartbeats and commits (a retry of the last
// one, then new ones) are accepted, and the group goes on to share the
// partitions with the newcomer, each partition owned once.
func TestGroupSurvivesControllerFailover(t *testing.T) {
	bs := threeBrokers(t)
	ctx := testCtx(t)
	md, err := bs[0].meta.GetMetadata(ctx, &stratav1.GetMetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ctrl := byID(bs, md.GetControllerId())
	var via *testBroker // a broker that stays: group calls are forwarded from it
	for _, b := range bs {
		if b != ctrl {
			via = b
		}
	}
	ctrl.createTopic(t, "t", 6, nil)
	groups := stratav1.NewGroupServiceClient(via.conn)

	type member struct {
		id    string
		epoch int32
		owned []*stratav1.TopicPartition
	}
	beat := func(m *member, topics ...string) error {
		resp, err := groups.GroupHeartbeat(ctx, &stratav1.GroupHeartbeatRequest{Group: "g", MemberId: m.id, MemberEpoch: m.epoch,
			Topics: topics, Owned: m.owned, SessionTimeoutMs: 8000, NoWait: true})
		if err != nil {
			return err
		}
		m.id, m.epoch, m.owned = resp.GetMemberId(), resp.GetMemberEpoch(), resp.GetAssigned()
		return nil
	}
	commit := func(m *member, offset int64) error {
		var offs []*stratav1.CommittedOffset
		for _, tp := range m.owned {
			offs = append(offs, &stratav1.CommittedOffset{Topic: tp.GetTopic(), Partition: tp.GetPartition(), Offset: offset})
		}
		_, err := via.offsets.CommitOffsets(ctx, &stratav1.CommitOffsetsRequest{Group: "g", MemberId: m.id, MemberEpoch: m.epoch, Offsets: offs})
		return err
	}
	ms := []*member{{}, {}, {}}
	for _, m := range ms {
		if err := beat(m, "t"); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		for _, m := range ms {
			if err := beat(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	owners := map[string]string{}
	for _, m := range ms {
		if len(m.owned) != 2 {
			t.Fatalf("member %s owns %v; want two of six partitions", m.id, m.owned)
		}
		for _, tp := range m.owned {
			owners[fmt.Sprint(tp.GetPartition())] = m.id
		}
		if err := commit(m, 10); err != nil {
			t.Fatal(err)
		}
	}
	before, err := groups.DescribeGroup(ctx, &stratav1.DescribeGroupRequest{Group: "g"})
	if err != nil {
		t.Fatal(err)
	}

	ctrl.stop(t)
	stopped := time.Now()
	var after *stratav1.DescribeGroupResponse
	testutil.WaitFor(t, 20*time.Second, "a new controller describing the group", func() bool {
		after, err = groups.DescribeGroup(ctx, &stratav1.DescribeGroupRequest{Group: "g"})
		return err == nil
	})
	t.Logf("the new controller answered %v after the old one stopped", time.Since(stopped))
	if after.GetGroupEpoch() != before.GetGroupEpoch() || len(after.GetMembers()) != 3 || after.GetState() != "stable" {
		t.Fatalf("the new controller resumed %v; the old one had %v", after, before)
	}
	for i, m := range after.GetMembers() {
		b := before.GetMembers()[i]
		if m.GetMemberId() != b.GetMemberId() || m.GetMemberEpoch() != b.GetMemberEpoch() || fmt.Sprint(m.GetOwned()) != fmt.Sprint(b.GetOwned()) {
			t.Fatalf("member %d resumed as %v; it was %v", i, m, b)
		}
	}

	// A newcomer is granted nothing: every partition's owner may still be
	// reading it, and has 8s from the resume to be heard from.
	newcomer := &member{}
	if err := beat(newcomer, "t"); err != nil {
		t.Fatal(err)
	}
	if len(newcomer.owned) != 0 {
		t.Fatalf("a member joining the new controller was granted %v, owned by the resumed members", newcomer.owned)
	}
	// The old members are recognised; a retry of their last commit, and
	// new ones, are accepted.
	for _, m := range ms {
		if err := commit(m, 10); err != nil {
			t.Fatalf("member %s retrying its commit at the new controller: %v", m.id, err)
		}
		if err := commit(m, 20); err != nil {
			t.Fatal(err)
		}
		held := m.owned
		if err := beat(m); err != nil {
			t.Fatalf("member %s at the new controller: %v", m.id, err)
		}
		for _, tp := range m.owned {
			if !slices.ContainsFunc(held, func(x *stratav1.TopicPartition) bool { return x.GetPartition() == tp.GetPartition() }) {
				t.Fatalf("member %s was given %v while others own it", m.id, tp)
			}
		}
	}
	// The handover to the newcomer completes, each partition owned once.
	all := append(slices.Clone(ms), newcomer)
	for range 5 {
		for _, m := range all {
			if err := beat(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	seen := map[int32]int{}
	for _, m := range all {
		for _, tp := range m.owned {
			seen[tp.GetPartition()]++
		}
	}
	if len(seen) != 6 || len(newcomer.owned) == 0 {
		t.Fatalf("after the handover: %v, newcomer %v", seen, newcomer.owned)
	}
	for p, n := range seen {
		if n != 1 {
			t.Fatalf("partition %d owned %d times", p, n)
		}
	}
	if got := committed(t, via, "g"); len(got) != 6 || slices.ContainsFunc(slices.Collect(maps.Values(got)), func(o int64) bool { return o != 20 }) {
		t.Fatalf("committed %v; want every partition at 20", got)
	}
}
