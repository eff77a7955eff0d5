package kafka

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/testutil"
)

// ownership checks that no partition is owned by two members at once, as
// each member's callbacks report what it was given and gave up.
type ownership struct {
	t     *testing.T
	mu    sync.Mutex
	owner map[int32]string
	dead  string // a member cut off: its callbacks no longer count
}

func (o *ownership) assigned(who string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if who == o.dead {
		return
	}
	for _, list := range ps {
		for _, p := range list {
			if prev, ok := o.owner[p]; ok && prev != who {
				o.t.Errorf("partition %d given to %s while %s owns it", p, who, prev)
			}
			o.owner[p] = who
		}
	}
}

func (o *ownership) released(who string, ps map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if who == o.dead {
		return
	}
	for _, list := range ps {
		for _, p := range list {
			if o.owner[p] == who {
				delete(o.owner, p)
			}
		}
	}
}

// consumed is every record the group's members read, by partition and
// offset.
type consumed struct {
	mu   sync.Mutex
	seen map[[2]int64]bool
}

func (c *consumed) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// TestKgoConsumerGroupKIP848: three kgo members on the KIP-848 protocol
// (ServerSideBalancer, so ConsumerGroupHeartbeat with the "uniform"
// assignor) share six partitions, each owned by one member at a time;
// one leaves, its partitions move to the other two, and every record is
// consumed. Autocommit commits through OffsetCommit as members, and the
// group's positions reach the end of every partition.
func TestKgoConsumerGroupKIP848(t *testing.T) {
	testKgoGroup(t, false)
}

// TestKgoConsumerGroupKIP848Crash: as above, but the third member does
// not leave: the listener it talks to goes away (its connections cut, as
// when its machine dies), so the coordinator hears nothing more from it
// and moves its partitions once its session (10 s) expires.
func TestKgoConsumerGroupKIP848Crash(t *testing.T) {
	testKgoGroup(t, true)
}

func testKgoGroup(t *testing.T, crash bool) {
	tb := startBroker(t)
	tb.createTopic(t, "events", 6)
	ctx := testCtx(t)
	prod := tb.client(t, kgo.DefaultProduceTopic("events"), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i), Partition: int32(i % 6)}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 300)

	own := &ownership{t: t, owner: map[int32]string{}}
	got := &consumed{seen: map[[2]int64]bool{}}
	members := make([]*kgo.Client, 3)
	var wg sync.WaitGroup
	// The third member talks to a listener of its own, so that it alone
	// can be cut off.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	own3, err := NewServer(tb.Broker, Config{Advertise: lis.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	go own3.Serve(lis)
	t.Cleanup(func() { own3.Close() })
	for i := range members {
		who := fmt.Sprintf("member-%d", i)
		seed := tb.addr
		if i == 2 {
			seed = lis.Addr().String()
		}
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(seed),
			kgo.ClientID(who),
			kgo.ConsumerGroup("cg"),
			kgo.ConsumeTopics("events"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.ServerSideBalancer(),
			kgo.AutoCommitInterval(100*time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.assigned(who, ps) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.released(who, ps) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { own.released(who, ps) }),
		)
		if err != nil {
			t.Fatal(err)
		}
		members[i] = cl
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				fs := cl.PollFetches(ctx)
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					got.mu.Lock()
					got.seen[[2]int64{int64(r.Partition), r.Offset}] = true
					got.mu.Unlock()
				})
			}
		}()
	}
	t.Cleanup(func() {
		for _, cl := range members {
			if cl != nil {
				cl.Close()
			}
		}
		wg.Wait()
	})

	adm := kadm.NewClient(tb.client(t))
	describe := func() kadm.DescribedConsumerGroup {
		ds, err := adm.DescribeConsumerGroups(ctx, "cg")
		if err != nil {
			t.Fatal(err)
		}
		return ds["cg"]
	}
	// spread is whether the group is stable with n members, each owning
	// its share, every partition once.
	spread := func(n int) bool {
		d := describe()
		if d.Err != nil || d.State != "Stable" || len(d.Members) != n {
			return false
		}
		seen := map[int32]int{}
		for _, m := range d.Members {
			if len(m.Assignment["events"]) < 6/n {
				return false
			}
			for p := range m.Assignment["events"] {
				seen[p]++
			}
		}
		for p := range int32(6) {
			if seen[p] != 1 {
				return false
			}
		}
		return true
	}
	testutil.WaitFor(t, 30*time.Second, "three members sharing six partitions", func() bool { return spread(3) })
	testutil.WaitFor(t, 30*time.Second, "the first 300 records consumed", func() bool { return got.count() == 300 })

	// One member leaves (Close leaves the group) or is cut off: its
	// partitions go to the other two.
	if crash {
		own3.Close()
		// It can read nothing more; what it still believes it owns does
		// not count.
		own.mu.Lock()
		for p, who := range own.owner {
			if who == "member-2" {
				delete(own.owner, p)
			}
		}
		own.dead = "member-2"
		own.mu.Unlock()
	} else {
		members[2].Close()
		members[2] = nil
	}
	testutil.WaitFor(t, 30*time.Second, "two members sharing six partitions", func() bool { return spread(2) })
	produce(300, 600)
	testutil.WaitFor(t, 30*time.Second, "all 600 records consumed", func() bool { return got.count() == 600 })

	// Autocommit brings the group's positions to the end of every
	// partition (100 records each).
	testutil.WaitFor(t, 30*time.Second, "commits at the end of every partition", func() bool {
		os, err := adm.FetchOffsets(ctx, "cg")
		if err != nil {
			return false
		}
		for p := range int32(6) {
			if o, ok := os.Lookup("events", p); !ok || o.At != 100 {
				return false
			}
		}
		return true
	})

	// ListGroups and DescribeGroups see the group, its members and what
	// they own; it cannot be deleted while it has members.
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := listed["cg"]; !ok || g.ProtocolType != "consumer" || g.State != "Stable" {
		t.Fatalf("listed %+v", listed)
	}
	described, err := adm.DescribeGroups(ctx, "cg")
	if err != nil {
		t.Fatal(err)
	}
	dg := described["cg"]
	if dg.Err != nil || dg.State != "Stable" || dg.ProtocolType != "consumer" || len(dg.Members) != 2 || len(dg.AssignedPartitions()["events"]) != 6 {
		t.Fatalf("described %+v", dg)
	}
	for _, m := range dg.Members {
		if m.ClientID != "member-0" && m.ClientID != "member-1" || m.ClientHost != "127.0.0.1" {
			t.Errorf("member %+v: want client member-0 or member-1 on 127.0.0.1", m)
		}
	}
	del, err := adm.DeleteGroups(ctx, "cg")
	if err != nil {
		t.Fatal(err)
	}
	if del["cg"].Err != kerr.NonEmptyGroup {
		t.Fatalf("delete of a group with members: %v, want NON_EMPTY_GROUP", del["cg"].Err)
	}
}

// heartbeat sends one ConsumerGroupHeartbeat as a client would.
func heartbeat(t *testing.T, cl *kgo.Client, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func cgh(group, member string, epoch int32) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = group, member, epoch
	return req
}

// partitionsOf lists an answer's assigned partitions of topic id.
func partitionsOf(resp *kmsg.ConsumerGroupHeartbeatResponse, id [16]byte) []int32 {
	if resp.Assignment == nil {
		return nil
	}
	var out []int32
	for _, t := range resp.Assignment.Topics {
		if t.TopicID == id {
			out = append(out, t.Partitions...)
		}
	}
	return out
}

func owned(id [16]byte, ps []int32) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
	t.TopicID, t.Partitions = id, ps
	return []kmsg.ConsumerGroupHeartbeatRequestTopic{t}
}

// TestConsumerGroupHeartbeatRaw drives the KIP-848 protocol with kmsg
// requests as a client would: joins with the topic ids of Metadata,
// a handover that waits for the old owner to report the partition gone
// (a short heartbeat with null owned partitions gives nothing up), the
// errors Kafka's spec lists, and a member whose session expires.
func TestConsumerGroupHeartbeatRaw(t *testing.T) {
	tb := startBroker(t)
	id := topicID(tb.createTopic(t, "orders", 2).ID)
	cl := tb.client(t)

	join := cgh("g", "client-made-id", 0)
	join.SubscribedTopicNames, join.ServerAssignor, join.RebalanceTimeoutMillis = []string{"orders"}, strp("uniform"), 5000
	join.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	a := heartbeat(t, cl, join)
	if a.ErrorCode != 0 || a.MemberID == nil || *a.MemberID != "client-made-id" || a.MemberEpoch < 1 || len(partitionsOf(a, id)) != 2 {
		t.Fatalf("join: %+v, want the member id the client chose", a)
	}
	if a.HeartbeatIntervalMillis <= 0 || a.HeartbeatIntervalMillis > 5000 {
		t.Errorf("heartbeat interval %d ms", a.HeartbeatIntervalMillis)
	}
	aID, aEpoch := *a.MemberID, a.MemberEpoch

	join.MemberID = "another-client-id"
	b := heartbeat(t, cl, join)
	if b.ErrorCode != 0 || len(partitionsOf(b, id)) != 0 {
		t.Fatalf("second join: %+v, want nothing while the first owns both", b)
	}
	bID := *b.MemberID

	// a is asked to give one up.
	beat := cgh("g", aID, aEpoch)
	beat.Topics = owned(id, []int32{0, 1})
	a = heartbeat(t, cl, beat)
	keep := partitionsOf(a, id)
	if a.ErrorCode != 0 || len(keep) != 1 {
		t.Fatalf("a's answer: %+v, want one partition to keep", a)
	}
	aEpoch = a.MemberEpoch
	// A short heartbeat (owned null) gives nothing up: b still waits.
	if r := heartbeat(t, cl, cgh("g", aID, aEpoch)); r.ErrorCode != 0 {
		t.Fatalf("short heartbeat: %+v", r)
	}
	if r := heartbeat(t, cl, cgh("g", bID, b.MemberEpoch)); r.ErrorCode != 0 || len(partitionsOf(r, id)) != 0 {
		t.Fatalf("b got %v before a reported the partition gone", partitionsOf(r, id))
	}
	beat = cgh("g", aID, aEpoch)
	beat.Topics = owned(id, keep)
	if r := heartbeat(t, cl, beat); r.ErrorCode != 0 {
		t.Fatalf("a reports giving up: %+v", r)
	}
	b = heartbeat(t, cl, cgh("g", bID, b.MemberEpoch))
	if got := partitionsOf(b, id); len(got) != 1 || got[0] == keep[0] {
		t.Fatalf("b got %v, a keeps %v", got, keep)
	}

	// ConsumerGroupDescribe agrees.
	dreq := kmsg.NewPtrConsumerGroupDescribeRequest()
	dreq.Groups = []string{"g", "nobody"}
	d, err := dreq.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if g := d.Groups[0]; g.ErrorCode != 0 || g.State != "Stable" || g.AssignorName != "sticky" || len(g.Members) != 2 {
		t.Fatalf("describe: %+v", g)
	}
	for _, m := range d.Groups[0].Members {
		if len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].TopicID != id || m.MemberType != 1 {
			t.Errorf("member %s: %+v", m.MemberID, m)
		}
	}
	if g := d.Groups[1]; g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("describe of a group without members or offsets: code %d", g.ErrorCode)
	}

	// Errors, each changing nothing.
	for _, c := range []struct {
		name string
		req  *kmsg.ConsumerGroupHeartbeatRequest
		code int16
	}{
		{"unknown member", cgh("g", "nobody", 3), kerr.UnknownMemberID.Code},
		{"member of a group that does not exist", cgh("other", "x", 5), kerr.UnknownMemberID.Code},
		{"unknown assignor", func() *kmsg.ConsumerGroupHeartbeatRequest {
			r := cgh("g2", "", 0)
			r.SubscribedTopicNames, r.ServerAssignor = []string{"orders"}, strp("fancy")
			return r
		}(), kerr.UnsupportedAssignor.Code},
		{"regex", func() *kmsg.ConsumerGroupHeartbeatRequest {
			r := cgh("g2", "", 0)
			r.SubscribedTopicRegex = strp("ord.*")
			return r
		}(), kerr.InvalidRequest.Code},
		{"static leave", cgh("g", bID, -2), kerr.InvalidRequest.Code},
		{"join without topics", cgh("g2", "", 0), kerr.InvalidRequest.Code},
		{"member id too long", func() *kmsg.ConsumerGroupHeartbeatRequest {
			r := cgh("g2", strings.Repeat("x", 256), 0)
			r.SubscribedTopicNames = []string{"orders"}
			return r
		}(), kerr.InvalidRequest.Code},
	} {
		if r := heartbeat(t, cl, c.req); r.ErrorCode != c.code || r.ErrorMessage == nil {
			t.Errorf("%s: code %d (%v), want %d with a message", c.name, r.ErrorCode, r.ErrorMessage, c.code)
		}
	}
	if gs, err := tb.ListGroups(testCtx(t)); err != nil || len(gs) != 1 || gs[0].Group != "g" {
		t.Fatalf("groups after refused heartbeats: %+v %v, want only g", gs, err)
	}
	if d, err := tb.DescribeGroup(testCtx(t), "g"); err != nil || len(d.Members) != 2 {
		t.Fatalf("g after refused heartbeats: %+v %v, want its two members", d, err)
	}
	// An epoch from the future fences the member: it must join again.
	if r := heartbeat(t, cl, cgh("g", aID, aEpoch+10)); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("future epoch: code %d, want FENCED_MEMBER_EPOCH", r.ErrorCode)
	}
	if r := heartbeat(t, cl, cgh("g", aID, aEpoch)); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("fenced member beats again: code %d, want UNKNOWN_MEMBER_ID", r.ErrorCode)
	}

	// b stops heartbeating: after its session (10 s, the coordinator's
	// default) it is removed, and a new member gets both partitions.
	join.MemberID = "" // as v0 clients join: the coordinator names it
	c := heartbeat(t, cl, join)
	if c.ErrorCode != 0 || c.MemberID == nil || *c.MemberID == "" {
		t.Fatalf("join without an id: %+v", c)
	}
	cID, cEpoch := *c.MemberID, c.MemberEpoch
	testutil.WaitFor(t, 30*time.Second, "the silent member's partitions moving", func() bool {
		beat := cgh("g", cID, cEpoch)
		beat.Topics = owned(id, partitionsOf(c, id))
		c = heartbeat(t, cl, beat)
		if c.ErrorCode != 0 {
			t.Fatalf("live member: %+v", c)
		}
		cEpoch = c.MemberEpoch
		time.Sleep(time.Duration(c.HeartbeatIntervalMillis) * time.Millisecond / 4)
		return len(partitionsOf(c, id)) == 2
	})
	if r := heartbeat(t, cl, cgh("g", bID, b.MemberEpoch)); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member: code %d, want UNKNOWN_MEMBER_ID", r.ErrorCode)
	}

	// Leave: epoch -1 answers -1; the group is then empty.
	if r := heartbeat(t, cl, cgh("g", cID, -1)); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
}
