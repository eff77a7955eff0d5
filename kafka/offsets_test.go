package kafka

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/cluster"
)

// rawRequest sends req at version over a connection of its own and returns
// the decoded answer, for the versions a client library would not choose.
func rawRequest[R kmsg.Response](t *testing.T, addr string, req kmsg.Request, version int16) R {
	t.Helper()
	c := dialRaw(t, addr)
	c.send(frameOf(req, version, 7))
	corr, body := c.recv()
	if corr != 7 {
		t.Fatalf("correlation %d, want 7", corr)
	}
	resp := req.ResponseKind()
	resp.SetVersion(version)
	if resp.IsFlexible() {
		body = body[1:] // the response header's empty tagged fields
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("%s v%d answer does not decode: %v", kmsg.NameForKey(req.Key()), version, err)
	}
	return resp.(R)
}

func strp(s string) *string { return &s }

// kadm commits and fetches a simple group's positions with their metadata;
// a partition never committed is -1, an unknown partition is refused while
// the rest of the request commits.
func TestOffsetCommitFetchKadm(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic(t, "orders", 3)
	ctx := testCtx(t)
	adm := kadm.NewClient(tb.client(t))

	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 42, Metadata: "m0", LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "orders", Partition: 2, At: 7, LeaderEpoch: -1})
	os.Add(kadm.Offset{Topic: "orders", Partition: 9, At: 1, LeaderEpoch: -1}) // no such partition
	os.Add(kadm.Offset{Topic: "orders", Partition: 1, At: 5, LeaderEpoch: -1, Metadata: strings.Repeat("m", cluster.MaxOffsetMetadata+1)})
	res, err := adm.CommitOffsets(ctx, "billing", os)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		p    int32
		code error
	}{{0, nil}, {2, nil}, {9, kerr.UnknownTopicOrPartition}, {1, kerr.OffsetMetadataTooLarge}} {
		r, ok := res.Lookup("orders", want.p)
		if !ok || r.Err != want.code {
			t.Errorf("commit orders/%d: %+v, want %v", want.p, r, want.code)
		}
	}

	got, err := adm.FetchOffsets(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := got.Lookup("orders", 0); o.At != 42 || o.Metadata != "m0" || o.LeaderEpoch != -1 {
		t.Errorf("orders/0 fetched %+v, want 42 m0 epoch -1", o)
	}
	if o, _ := got.Lookup("orders", 2); o.At != 7 {
		t.Errorf("orders/2 fetched %+v, want 7", o)
	}
	if _, ok := got.Lookup("orders", 1); ok {
		t.Errorf("orders/1 was never committed but is listed")
	}
	// Named partitions: the one never committed answers -1.
	some, err := adm.FetchOffsetsForTopics(ctx, "billing", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := some.Lookup("orders", 1); !ok || o.At != -1 || o.Err != nil {
		t.Errorf("orders/1 fetched %+v (listed %v), want -1", o, ok)
	}
	if b, err := tb.FetchOffsets(ctx, "billing", nil); err != nil || len(b) != 2 {
		t.Fatalf("broker holds %v (%v), want 2 committed partitions", b, err)
	}
}

// The oldest versions clients still send (segmentio/kafka-go: OffsetCommit
// v2, OffsetFetch v1), the newest (v10, topics by id), and OffsetFetch v8's
// several groups in one request.
func TestOffsetCommitFetchVersions(t *testing.T) {
	tb := startBroker(t)
	d := tb.createTopic(t, "orders", 2)
	id := topicID(d.ID)

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation, commit.RetentionTimeMillis = "old", -1, -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "orders"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.Metadata = 1, 100, strp("kafka-go")
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cr := rawRequest[*kmsg.OffsetCommitResponse](t, tb.addr, commit, 2)
	if code := cr.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("commit v2: code %d", code)
	}

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = "old"
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = "orders", []int32{0, 1}
	fetch.Topics = append(fetch.Topics, ft)
	fr := rawRequest[*kmsg.OffsetFetchResponse](t, tb.addr, fetch, 1)
	ps := fr.Topics[0].Partitions
	if len(ps) != 2 || ps[0].Offset != -1 || ps[1].Offset != 100 || ps[1].Metadata == nil || *ps[1].Metadata != "kafka-go" {
		t.Fatalf("fetch v1: %+v", ps)
	}

	// v10: by topic id; an unknown id is refused and commits nothing.
	commit.Group = "new"
	commit.Topics[0].Topic, commit.Topics[0].TopicID = "", id
	bogus := kmsg.NewOffsetCommitRequestTopic()
	bogus.TopicID = [16]byte{1, 2, 3}
	bogus.Partitions = []kmsg.OffsetCommitRequestTopicPartition{cp}
	commit.Topics = append(commit.Topics, bogus)
	cr = rawRequest[*kmsg.OffsetCommitResponse](t, tb.addr, commit, 10)
	if a, b := cr.Topics[0].Partitions[0].ErrorCode, cr.Topics[1].Partitions[0].ErrorCode; a != 0 || b != kerr.UnknownTopicID.Code {
		t.Fatalf("commit v10: codes %d %d, want 0 and UNKNOWN_TOPIC_ID", a, b)
	}

	multi := kmsg.NewPtrOffsetFetchRequest()
	for _, g := range []string{"old", "new", "nobody"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.TopicID, gt.Partitions = id, []int32{1}
		rg.Topics = append(rg.Topics, gt)
		multi.Groups = append(multi.Groups, rg)
	}
	all := kmsg.NewOffsetFetchRequestGroup()
	all.Group = "new" // topics null: everything it committed
	multi.Groups = append(multi.Groups, all)
	mr := rawRequest[*kmsg.OffsetFetchResponse](t, tb.addr, multi, 10)
	if len(mr.Groups) != 4 {
		t.Fatalf("%d groups answered, want 4", len(mr.Groups))
	}
	for i, want := range []int64{100, 100, -1} {
		g := mr.Groups[i]
		if g.ErrorCode != 0 || g.Topics[0].TopicID != id || g.Topics[0].Partitions[0].Offset != want {
			t.Errorf("group %s: %+v, want offset %d", g.Group, g, want)
		}
	}
	if g := mr.Groups[3]; len(g.Topics) != 1 || g.Topics[0].TopicID != id || len(g.Topics[0].Partitions) != 1 {
		t.Errorf("group new, all topics: %+v", g)
	}

	// A group name Strata refuses is INVALID_GROUP_ID, and stores nothing.
	commit.Group = string(make([]byte, 300))
	cr = rawRequest[*kmsg.OffsetCommitResponse](t, tb.addr, commit, 10)
	if code := cr.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidGroupID.Code {
		t.Fatalf("commit with a bad group name: code %d", code)
	}
}

// A member's commits are fenced: it commits what it owns; once a partition
// has moved to another member, its commit of it is refused
// (STALE_MEMBER_EPOCH from v9, ILLEGAL_GENERATION before) and the new
// owner's position stands. Commits from outside the group, and from
// members it does not have, are UNKNOWN_MEMBER_ID.
func TestOffsetCommitFenced(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic(t, "orders", 2)
	ctx := testCtx(t)

	beat := func(hb broker.Heartbeat) broker.GroupAnswer {
		t.Helper()
		hb.Group, hb.NoWait = "g", true
		ans, err := tb.GroupHeartbeat(ctx, hb)
		if err != nil {
			t.Fatalf("heartbeat %+v: %v", hb, err)
		}
		return ans
	}
	commitAs := func(member string, epoch int32, partition int32, offset int64, version int16) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.MemberID, req.Generation = "g", member, epoch
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "orders"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = partition, offset
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return rawRequest[*kmsg.OffsetCommitResponse](t, tb.addr, req, version).Topics[0].Partitions[0].ErrorCode
	}

	a := beat(broker.Heartbeat{Topics: []string{"orders"}})
	if len(a.Assigned) != 2 {
		t.Fatalf("first member got %v, want both partitions", a.Assigned)
	}
	for p := range int32(2) {
		if code := commitAs(a.MemberID, a.MemberEpoch, p, 10, 9); code != 0 {
			t.Fatalf("owner's commit of %d: code %d", p, code)
		}
	}
	// A second member joins: one partition moves to it once the first
	// gives it up.
	b := beat(broker.Heartbeat{Topics: []string{"orders"}})
	a = beat(broker.Heartbeat{MemberID: a.MemberID, MemberEpoch: a.MemberEpoch, Owned: a.Assigned})
	if len(a.Assigned) != 1 {
		t.Fatalf("first member asked to keep %v, want one partition", a.Assigned)
	}
	a = beat(broker.Heartbeat{MemberID: a.MemberID, MemberEpoch: a.MemberEpoch, Owned: a.Assigned})
	b = beat(broker.Heartbeat{MemberID: b.MemberID, MemberEpoch: b.MemberEpoch})
	if len(b.Assigned) != 1 || b.Assigned[0] == a.Assigned[0] {
		t.Fatalf("second member got %v, first keeps %v", b.Assigned, a.Assigned)
	}
	moved := b.Assigned[0].Partition
	if code := commitAs(b.MemberID, b.MemberEpoch, moved, 20, 9); code != 0 {
		t.Fatalf("new owner's commit: code %d", code)
	}
	if code := commitAs(a.MemberID, a.MemberEpoch, moved, 11, 9); code != kerr.StaleMemberEpoch.Code {
		t.Errorf("commit of a partition lost, v9: code %d, want STALE_MEMBER_EPOCH", code)
	}
	if code := commitAs(a.MemberID, a.MemberEpoch, moved, 12, 8); code != kerr.IllegalGeneration.Code {
		t.Errorf("commit of a partition lost, v8: code %d, want ILLEGAL_GENERATION", code)
	}
	if code := commitAs("", -1, moved, 99, 9); code != kerr.UnknownMemberID.Code {
		t.Errorf("a commit from outside a group with members: code %d, want UNKNOWN_MEMBER_ID", code)
	}
	if code := commitAs("nobody", 1, moved, 99, 9); code != kerr.UnknownMemberID.Code {
		t.Errorf("a commit from an unknown member: code %d, want UNKNOWN_MEMBER_ID", code)
	}
	got, err := tb.FetchOffsets(ctx, "g", []broker.TopicPartition{{Topic: "orders", Partition: moved}})
	if err != nil || len(got) != 1 || got[0].Offset != 20 {
		t.Fatalf("committed %+v (%v), want the new owner's 20", got, err)
	}
}
