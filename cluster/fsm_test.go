package cluster

import (
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-log/strata/security"
)

// threeBrokers returns a harness with brokers 1, 2 and 3 registered.
func threeBrokers(t *testing.T) *fsmHarness {
	h := newFSMHarness(t)
	for id := int32(1); id <= 3; id++ {
		h.ok(&registerBrokerCmd{Broker: broker(id)})
	}
	return h
}

func TestFSMEmpty(t *testing.T) {
	h := newFSMHarness(t)
	m := h.f.meta.Load()
	if m.Version != 0 || len(m.Brokers) != 0 || len(m.Topics) != 0 || len(m.TopicNames()) != 0 {
		t.Fatalf("empty state: %+v", m)
	}
}

func TestFSMRegisterBroker(t *testing.T) {
	h := newFSMHarness(t)
	h.ok(&registerBrokerCmd{Broker: broker(1)})
	before := h.f.meta.Load()

	moved := broker(1)
	moved.Addr = "10.0.0.1:9000"
	h.ok(&registerBrokerCmd{Broker: moved})
	m := h.f.meta.Load()
	if got, _ := m.Broker(1); got != moved {
		t.Fatalf("re-registration: got %+v, want %+v", got, moved)
	}
	if got, _ := before.Broker(1); got != broker(1) {
		t.Fatalf("re-registration changed the earlier Metadata: %+v", got)
	}
	h.ok(&registerBrokerCmd{Broker: broker(0)})
	mustEqual(t, "broker ids", h.f.meta.Load().BrokerIDs(), []int32{0, 1})

	for _, b := range []BrokerInfo{
		{ID: -1, Addr: "h:1"},
		{ID: 2, Addr: ""},
		{ID: 2, Addr: "no-port"},
		{ID: 2, Addr: ":9000"},
		{ID: 2, Addr: "h:1", RaftAddr: "bad"},
	} {
		h.refused(&registerBrokerCmd{Broker: b}, ErrInvalidBroker)
	}
}

func TestFSMCreateTopic(t *testing.T) {
	h := threeBrokers(t)
	c := createCmd(h.f.meta.Load(), "orders", 6, 2, map[string]string{"retention.ms": "-1"})
	resp := h.ok(c)
	m := h.f.meta.Load()
	got, ok := m.Topic("orders")
	if !ok {
		t.Fatal("topic missing after create")
	}
	if resp.topic != got {
		t.Fatal("the response is not the topic in the new metadata")
	}
	if got.ID != c.Topic.ID || got.CreatedAtMs != 1700000000000 || got.Config["retention.ms"] != "-1" || len(got.Partitions) != 6 {
		t.Fatalf("topic: %+v", got)
	}
	leaders := map[int32]int{}
	for i, p := range got.Partitions {
		if p.Partition != int32(i) || len(p.Replicas) != 2 || !slices.Equal(p.ISR, p.Replicas) || p.Leader != p.Replicas[0] || p.LeaderEpoch != 0 {
			t.Fatalf("partition %d: %+v", i, p)
		}
		leaders[p.Leader]++
	}
	mustEqual(t, "leaders per broker", leaders, map[int32]int{1: 2, 2: 2, 3: 2})
	if p, ok := m.Partition("orders", 5); !ok || p.Partition != 5 {
		t.Fatalf("Partition(orders, 5) = %+v, %v", p, ok)
	}
	if _, ok := m.Partition("orders", 6); ok {
		t.Fatal("Partition(orders, 6) found")
	}
	if _, ok := m.Partition("nope", 0); ok {
		t.Fatal("Partition(nope, 0) found")
	}

	// Without config the override map is empty, not nil.
	h.ok(createCmd(h.f.meta.Load(), "plain", 1, 1, nil))
	if tp, _ := h.f.meta.Load().Topic("plain"); tp.Config == nil {
		t.Fatal("nil config map")
	}
	mustEqual(t, "names", h.f.meta.Load().TopicNames(), []string{"orders", "plain"})

	// The same name again, and the same id under another name.
	h.refused(createCmd(h.f.meta.Load(), "orders", 1, 1, nil), ErrTopicExists)
	dupID := createCmd(h.f.meta.Load(), "other", 1, 1, nil)
	dupID.Topic.ID = c.Topic.ID
	h.refused(dupID, ErrTopicExists)

	// Names differing only by '.' and '_' coexist (no Kafka collision rule).
	h.ok(createCmd(h.f.meta.Load(), "a.b", 1, 1, nil))
	h.ok(createCmd(h.f.meta.Load(), "a_b", 1, 1, nil))

	bad := func(mut func(c *createTopicCmd), want error) {
		t.Helper()
		c := createCmd(h.f.meta.Load(), "fresh", 3, 2, nil)
		mut(c)
		h.refused(c, want)
	}
	bad(func(c *createTopicCmd) { c.Topic.Name = "a b" }, ErrInvalidTopicName)
	bad(func(c *createTopicCmd) { c.Topic.Name = ".." }, ErrInvalidTopicName)
	bad(func(c *createTopicCmd) { c.Topic.ID = "xyz" }, ErrInvalidCommand)
	bad(func(c *createTopicCmd) { c.Topic.ID = strings.ToUpper(c.Topic.ID) + "0" }, ErrInvalidCommand)
	bad(func(c *createTopicCmd) { c.Topic.Partitions = nil }, ErrInvalidPartitions)
	bad(func(c *createTopicCmd) { c.Topic.Config = map[string]string{"": "x"} }, ErrInvalidConfig)
	bad(func(c *createTopicCmd) { c.Topic.Partitions[1].Partition = 7 }, ErrInvalidAssignment)
	bad(func(c *createTopicCmd) { c.Topic.Partitions[0].Replicas = nil }, ErrInvalidAssignment)
	bad(func(c *createTopicCmd) { c.Topic.Partitions[0].Replicas = []int32{1, 1} }, ErrInvalidAssignment)
	bad(func(c *createTopicCmd) { c.Topic.Partitions[0].Replicas = []int32{1, 9} }, ErrBrokerNotFound)
	bad(func(c *createTopicCmd) { c.Topic.Partitions[0].ISR = nil }, ErrInvalidISR)
	bad(func(c *createTopicCmd) { c.Topic.Partitions[0].ISR = []int32{3} }, ErrInvalidISR)
	bad(func(c *createTopicCmd) {
		p := &c.Topic.Partitions[0]
		p.ISR, p.Leader = p.Replicas[:1], p.Replicas[1]
	}, ErrInvalidAssignment)
	bad(func(c *createTopicCmd) { c.Topic.Partitions[0].LeaderEpoch = -1 }, ErrInvalidAssignment)
}

func TestFSMDeleteTopic(t *testing.T) {
	h := threeBrokers(t)
	h.ok(createCmd(h.f.meta.Load(), "orders", 2, 1, nil))
	h.ok(createCmd(h.f.meta.Load(), "keep", 1, 1, nil))
	h.ok(&commitOffsetsCmd{Group: "g1", CommittedAtMs: 5, Commits: []offsetCommitEntry{
		{Topic: "orders", Partition: 0, Offset: 10}, {Topic: "orders", Partition: 1, Offset: 11}, {Topic: "keep", Partition: 0, Offset: 12},
	}})
	h.ok(&commitOffsetsCmd{Group: "only-orders", Commits: []offsetCommitEntry{{Topic: "orders", Partition: 0, Offset: 1}}})
	h.ok(&commitOffsetsCmd{Group: "only-keep", Commits: []offsetCommitEntry{{Topic: "keep", Partition: 0, Offset: 2}}})
	onlyKeep := h.f.offsets.group("only-keep")
	orders, _ := h.f.meta.Load().Topic("orders")

	h.refused(&deleteTopicCmd{Name: "missing"}, ErrTopicNotFound)
	h.refused(&deleteTopicCmd{Name: "orders", ID: newTopicID()}, ErrTopicNotFound)
	resp := h.ok(&deleteTopicCmd{Name: "orders", ID: orders.ID})
	if resp.topic != orders {
		t.Fatal("delete should answer with the deleted topic")
	}
	m := h.f.meta.Load()
	if _, ok := m.Topic("orders"); ok {
		t.Fatal("topic still there")
	}
	mustEqual(t, "names", m.TopicNames(), []string{"keep"})
	mustEqual(t, "g1 after delete", map[TopicPartition]OffsetCommit(h.f.offsets.group("g1")),
		map[TopicPartition]OffsetCommit{{"keep", 0}: {Offset: 12, CommittedAtMs: 5}})
	if _, ok := h.f.offsets.groups["only-orders"]; ok {
		t.Fatal("a group left with no offsets should be gone")
	}
	// A group that had nothing of the topic keeps its very map.
	if g := h.f.offsets.group("only-keep"); reflect.ValueOf(g).Pointer() != reflect.ValueOf(onlyKeep).Pointer() {
		t.Fatalf("only-keep was copied: %v", g)
	}

	// Delete of what is already gone, then a recreated topic: a new id and
	// no inherited offsets.
	h.refused(&deleteTopicCmd{Name: "orders"}, ErrTopicNotFound)
	h.ok(createCmd(h.f.meta.Load(), "orders", 2, 1, nil))
	again, _ := h.f.meta.Load().Topic("orders")
	if again.ID == orders.ID {
		t.Fatal("recreated topic has the old id")
	}
	if _, ok := h.f.offsets.get("g1", TopicPartition{"orders", 0}); ok {
		t.Fatal("recreated topic inherited an offset")
	}
	// A delete aimed at the old incarnation does not remove the new one.
	h.refused(&deleteTopicCmd{Name: "orders", ID: orders.ID}, ErrTopicNotFound)
}

func TestFSMAlterTopicConfig(t *testing.T) {
	h := threeBrokers(t)
	h.ok(createCmd(h.f.meta.Load(), "orders", 1, 1, map[string]string{"retention.ms": "1000", "segment.bytes": "1024"}))
	before, _ := h.f.meta.Load().Topic("orders")

	resp := h.ok(&alterTopicConfigCmd{Name: "orders", Set: map[string]string{"retention.ms": "-1", "flush.policy": "always"}, Delete: []string{"segment.bytes", "not.there"}})
	want := map[string]string{"retention.ms": "-1", "flush.policy": "always"}
	mustEqual(t, "config", resp.topic.Config, want)
	after, _ := h.f.meta.Load().Topic("orders")
	if after != resp.topic {
		t.Fatal("response is not the stored topic")
	}
	mustEqual(t, "old config", before.Config, map[string]string{"retention.ms": "1000", "segment.bytes": "1024"})
	if &after.Partitions[0] != &before.Partitions[0] {
		t.Fatal("a config change should share the partitions")
	}

	h.refused(&alterTopicConfigCmd{Name: "missing", Set: map[string]string{"a": "b"}}, ErrTopicNotFound)
	h.refused(&alterTopicConfigCmd{Name: "orders", Set: map[string]string{"a": "b"}, Delete: []string{"a"}}, ErrInvalidConfig)
	h.refused(&alterTopicConfigCmd{Name: "orders", Set: map[string]string{"": "b"}}, ErrInvalidConfig)
	h.refused(&alterTopicConfigCmd{Name: "orders", Delete: []string{""}}, ErrInvalidConfig)

	// Deleting everything leaves an empty map.
	h.ok(&alterTopicConfigCmd{Name: "orders", Delete: []string{"retention.ms", "flush.policy"}})
	if tp, _ := h.f.meta.Load().Topic("orders"); tp.Config == nil || len(tp.Config) != 0 {
		t.Fatalf("config after deleting all: %#v", tp.Config)
	}
}

func TestFSMCommitOffsets(t *testing.T) {
	h := threeBrokers(t)
	h.ok(createCmd(h.f.meta.Load(), "orders", 2, 1, nil))
	m0 := h.f.meta.Load()

	h.ok(&commitOffsetsCmd{Group: "g", CommittedAtMs: 100, Commits: []offsetCommitEntry{
		{Topic: "orders", Partition: 0, Offset: 5, Metadata: "m"},
		{Topic: "orders", Partition: 1, Offset: 7},
		{Topic: "orders", Partition: 1, Offset: 8}, // the last entry for a partition wins
	}})
	if oc, ok := h.f.offsets.get("g", TopicPartition{"orders", 0}); !ok || oc != (OffsetCommit{Offset: 5, Metadata: "m", CommittedAtMs: 100}) {
		t.Fatalf("orders/0: %+v %v", oc, ok)
	}
	if oc, _ := h.f.offsets.get("g", TopicPartition{"orders", 1}); oc.Offset != 8 {
		t.Fatalf("orders/1: %+v", oc)
	}
	// An offset commit bumps the version but shares brokers and topics.
	m1 := h.f.meta.Load()
	if m1 == m0 || m1.Version <= m0.Version || m1.Topics["orders"] != m0.Topics["orders"] {
		t.Fatal("offset commit should make a new Metadata sharing the topics")
	}
	g := h.f.offsets.group("g")

	h.ok(&commitOffsetsCmd{Group: "g", CommittedAtMs: 200, Commits: []offsetCommitEntry{{Topic: "orders", Partition: 0, Offset: 6}}})
	if g[TopicPartition{"orders", 0}].Offset != 5 {
		t.Fatal("a commit modified a group map handed out earlier")
	}
	if oc, _ := h.f.offsets.get("g", TopicPartition{"orders", 1}); oc != (OffsetCommit{Offset: 8, CommittedAtMs: 100}) {
		t.Fatalf("untouched partition changed: %+v", oc)
	}

	// All or nothing: a valid entry beside an invalid one is not applied.
	valid := offsetCommitEntry{Topic: "orders", Partition: 0, Offset: 99}
	h.refused(&commitOffsetsCmd{Group: "g", Commits: []offsetCommitEntry{valid, {Topic: "nope", Partition: 0, Offset: 1}}}, ErrTopicNotFound)
	h.refused(&commitOffsetsCmd{Group: "g", Commits: []offsetCommitEntry{valid, {Topic: "orders", Partition: 2, Offset: 1}}}, ErrPartitionNotFound)
	h.refused(&commitOffsetsCmd{Group: "g", Commits: []offsetCommitEntry{valid, {Topic: "orders", Partition: -1, Offset: 1}}}, ErrPartitionNotFound)
	h.refused(&commitOffsetsCmd{Group: "g", Commits: []offsetCommitEntry{valid, {Topic: "orders", Partition: 1, Offset: -1}}}, ErrInvalidOffsetCommit)
	h.refused(&commitOffsetsCmd{Group: "", Commits: []offsetCommitEntry{valid}}, ErrInvalidOffsetCommit)
	h.refused(&commitOffsetsCmd{Group: "g", Commits: []offsetCommitEntry{{Topic: "orders", Offset: 1, Metadata: strings.Repeat("x", MaxOffsetMetadata+1)}}}, ErrInvalidOffsetCommit)
}

func TestFSMChangeLeader(t *testing.T) {
	h := threeBrokers(t)
	h.ok(createCmd(h.f.meta.Load(), "orders", 3, 3, nil))
	p0, _ := h.f.meta.Load().Partition("orders", 0)
	before := h.f.meta.Load()
	next := p0.ISR[1]

	resp := h.ok(&changeLeaderCmd{Topic: "orders", Partition: 0, NewLeader: next, ExpectedEpoch: 0})
	if resp.partition.Leader != next || resp.partition.LeaderEpoch != 1 || !slices.Equal(resp.partition.ISR, p0.ISR) {
		t.Fatalf("after change: %+v", resp.partition)
	}
	if got, _ := h.f.meta.Load().Partition("orders", 0); !equalPartition(got, resp.partition) {
		t.Fatalf("stored %+v, answered %+v", got, resp.partition)
	}
	if old, _ := before.Partition("orders", 0); old.Leader != p0.Leader || old.LeaderEpoch != 0 {
		t.Fatalf("earlier Metadata changed: %+v", old)
	}

	// The same decision again (a retry, or a second controller) is fenced.
	mustIs(t, h.refused(&changeLeaderCmd{Topic: "orders", Partition: 0, NewLeader: next, ExpectedEpoch: 0}, ErrStaleEpoch), ErrStaleEpoch)
	// A future epoch is no better.
	h.refused(&changeLeaderCmd{Topic: "orders", Partition: 0, NewLeader: next, ExpectedEpoch: 5}, ErrStaleEpoch)
	h.refused(&changeLeaderCmd{Topic: "orders", Partition: 0, NewLeader: 9, ExpectedEpoch: 1}, ErrNotInISR)
	h.refused(&changeLeaderCmd{Topic: "orders", Partition: 3, NewLeader: next, ExpectedEpoch: 1}, ErrPartitionNotFound)
	h.refused(&changeLeaderCmd{Topic: "nope", Partition: 0, NewLeader: next, ExpectedEpoch: 1}, ErrTopicNotFound)

	// Shrink the ISR to the leader, then a broker outside it cannot lead.
	h.ok(&changeISRCmd{Topic: "orders", Partition: 0, ISR: []int32{next}, LeaderEpoch: 1, PartitionEpoch: 1})
	outside := p0.Replicas[2]
	h.refused(&changeLeaderCmd{Topic: "orders", Partition: 0, NewLeader: outside, ExpectedEpoch: 1}, ErrNotInISR)

	// Offline: no leader, epoch still bumped.
	resp = h.ok(&changeLeaderCmd{Topic: "orders", Partition: 0, NewLeader: NoLeader, ExpectedEpoch: 1})
	if resp.partition.Leader != NoLeader || resp.partition.LeaderEpoch != 2 {
		t.Fatalf("offline: %+v", resp.partition)
	}
	// Back from offline to the last ISR member.
	resp = h.ok(&changeLeaderCmd{Topic: "orders", Partition: 0, NewLeader: next, ExpectedEpoch: 2})
	if resp.partition.Leader != next || resp.partition.LeaderEpoch != 3 {
		t.Fatalf("back online: %+v", resp.partition)
	}
	// Other partitions untouched and shared.
	if h.f.meta.Load().Topics["orders"].Partitions[1].LeaderEpoch != 0 {
		t.Fatal("another partition changed")
	}
}

func TestFSMChangeLeaderEpochExhausted(t *testing.T) {
	h := threeBrokers(t)
	c := createCmd(h.f.meta.Load(), "orders", 1, 1, nil)
	c.Topic.Partitions[0].LeaderEpoch = math.MaxInt32
	h.ok(c)
	p, _ := h.f.meta.Load().Partition("orders", 0)
	h.refused(&changeLeaderCmd{Topic: "orders", Partition: 0, NewLeader: p.Leader, ExpectedEpoch: math.MaxInt32}, ErrStaleEpoch)
}

func TestFSMChangeISR(t *testing.T) {
	h := threeBrokers(t)
	h.ok(createCmd(h.f.meta.Load(), "orders", 1, 3, nil))
	p, _ := h.f.meta.Load().Partition("orders", 0)
	leader, f1, f2 := p.Replicas[0], p.Replicas[1], p.Replicas[2]

	// Shrink, listing members out of order: stored in replica order.
	resp := h.ok(&changeISRCmd{Topic: "orders", Partition: 0, ISR: []int32{f2, leader}, LeaderEpoch: 0, PartitionEpoch: 0})
	mustEqual(t, "shrunk ISR", resp.partition.ISR, []int32{leader, f2})
	if resp.partition.LeaderEpoch != 0 || resp.partition.Leader != leader {
		t.Fatalf("ISR change touched leadership: %+v", resp.partition)
	}
	if resp.partition.PartitionEpoch != 1 {
		t.Fatalf("partition epoch %d after one ISR change", resp.partition.PartitionEpoch)
	}
	// Expand back.
	resp = h.ok(&changeISRCmd{Topic: "orders", Partition: 0, ISR: []int32{leader, f1, f2}, LeaderEpoch: 0, PartitionEpoch: 1})
	mustEqual(t, "expanded ISR", resp.partition.ISR, p.Replicas)

	h.refused(&changeISRCmd{Topic: "orders", Partition: 0, ISR: []int32{f1, f2}, LeaderEpoch: 0, PartitionEpoch: 2}, ErrNotInISR)
	h.refused(&changeISRCmd{Topic: "orders", Partition: 0, ISR: nil, LeaderEpoch: 0, PartitionEpoch: 2}, ErrInvalidISR)
	h.refused(&changeISRCmd{Topic: "orders", Partition: 0, ISR: []int32{leader, leader}, LeaderEpoch: 0, PartitionEpoch: 2}, ErrInvalidISR)
	h.refused(&changeISRCmd{Topic: "orders", Partition: 0, ISR: []int32{leader, 9}, LeaderEpoch: 0, PartitionEpoch: 2}, ErrInvalidISR)
	h.refused(&changeISRCmd{Topic: "orders", Partition: 1, ISR: []int32{leader}, LeaderEpoch: 0}, ErrPartitionNotFound)
	h.refused(&changeISRCmd{Topic: "nope", Partition: 0, ISR: []int32{leader}, LeaderEpoch: 0}, ErrTopicNotFound)

	// A new leadership fences the old leader's ISR requests.
	h.ok(&changeLeaderCmd{Topic: "orders", Partition: 0, NewLeader: f1, ExpectedEpoch: 0})
	h.refused(&changeISRCmd{Topic: "orders", Partition: 0, ISR: []int32{leader}, LeaderEpoch: 0, PartitionEpoch: 3}, ErrStaleEpoch)
	h.refused(&changeISRCmd{Topic: "orders", Partition: 0, ISR: []int32{leader, f1}, LeaderEpoch: 2, PartitionEpoch: 3}, ErrStaleEpoch)
	resp = h.ok(&changeISRCmd{Topic: "orders", Partition: 0, ISR: []int32{f1}, LeaderEpoch: 1, PartitionEpoch: 3})
	mustEqual(t, "new leader's ISR", resp.partition.ISR, []int32{f1})

	// Without a leader nobody may change the ISR.
	h.ok(&changeLeaderCmd{Topic: "orders", Partition: 0, NewLeader: NoLeader, ExpectedEpoch: 1})
	h.refused(&changeISRCmd{Topic: "orders", Partition: 0, ISR: []int32{f1}, LeaderEpoch: 2, PartitionEpoch: 5}, ErrNotInISR)
}

// TestFSMChangeISRIsCompareAndSet: of two ISR changes computed from the same
// state (a leader growing the ISR while the controller shrinks it), only the
// first applies. Without the partition epoch the second would put back a
// follower that misses records committed meanwhile, and that follower
// could then be elected.
func TestFSMChangeISRIsCompareAndSet(t *testing.T) {
	h := threeBrokers(t)
	h.ok(createCmd(h.f.meta.Load(), "orders", 1, 3, nil))
	p, _ := h.f.meta.Load().Partition("orders", 0)
	leader, f1, f2 := p.Replicas[0], p.Replicas[1], p.Replicas[2]
	h.ok(&changeISRCmd{Topic: "orders", Partition: 0, ISR: []int32{leader, f1}, LeaderEpoch: 0, PartitionEpoch: 0})
	cur, _ := h.f.meta.Load().Partition("orders", 0)
	// Both decided from partition epoch 1: the controller drops f1 (gone),
	// the leader adds f2 (caught up) keeping f1.
	h.ok(&changeISRCmd{Topic: "orders", Partition: 0, ISR: []int32{leader}, LeaderEpoch: 0, PartitionEpoch: cur.PartitionEpoch})
	h.refused(&changeISRCmd{Topic: "orders", Partition: 0, ISR: []int32{leader, f1, f2}, LeaderEpoch: 0, PartitionEpoch: cur.PartitionEpoch}, ErrStaleEpoch)
	final, _ := h.f.meta.Load().Partition("orders", 0)
	mustEqual(t, "ISR after the race", final.ISR, []int32{leader})

	// A version 1 command, from a log written before partition epochs,
	// still applies, fenced by the leader epoch alone.
	legacy := []byte(`{"type":"changeISR","v":1,"topic":"orders","partition":0,"isr":[` +
		strconv.Itoa(int(leader)) + `,` + strconv.Itoa(int(f2)) + `],"leaderEpoch":0}`)
	resp := h.applyRaw(legacy)
	if resp.err != nil {
		t.Fatal(resp.err)
	}
	mustEqual(t, "ISR after a v1 change", resp.partition.ISR, []int32{leader, f2})
}

// TestFSMCopyOnWrite keeps a Metadata from before a run of changes and
// checks, against a deep copy, that none of them touched it, and that a
// change to one topic shares every other topic.
func TestFSMCopyOnWrite(t *testing.T) {
	h := threeBrokers(t)
	h.ok(createCmd(h.f.meta.Load(), "a", 3, 3, map[string]string{"k": "v"}))
	h.ok(createCmd(h.f.meta.Load(), "b", 2, 2, nil))
	held := h.f.meta.Load()
	copyOfHeld := cloneMetadata(held)
	heldA := held.Topics["a"]

	pa, _ := held.Partition("a", 0)
	h.ok(&changeISRCmd{Topic: "a", Partition: 0, ISR: pa.Replicas[:2], LeaderEpoch: 0, PartitionEpoch: 0})
	if h.f.meta.Load().Topics["b"] != held.Topics["b"] {
		t.Fatal("a change to topic a copied topic b")
	}
	h.ok(&changeLeaderCmd{Topic: "a", Partition: 0, NewLeader: pa.Replicas[1], ExpectedEpoch: 0})
	h.ok(&alterTopicConfigCmd{Name: "a", Set: map[string]string{"k": "w", "x": "y"}})
	h.ok(&registerBrokerCmd{Broker: broker(4)})
	h.ok(&commitOffsetsCmd{Group: "g", Commits: []offsetCommitEntry{{Topic: "a", Partition: 1, Offset: 3}}})
	h.ok(&deleteTopicCmd{Name: "b"})
	h.ok(createCmd(h.f.meta.Load(), "c", 1, 1, nil))

	mustEqual(t, "held metadata", held, copyOfHeld)
	if held.Topics["a"] != heldA {
		t.Fatal("held map entry replaced")
	}
	now := h.f.meta.Load()
	if now.Topics["c"] == nil || now.Topics["b"] != nil || len(now.Brokers) != 4 {
		t.Fatalf("current state wrong: %v", now.TopicNames())
	}
	// The partitions of a that did not change are shared values.
	if !slices.Equal(now.Topics["a"].Partitions[1].Replicas, heldA.Partitions[1].Replicas) ||
		&now.Topics["a"].Partitions[1].Replicas[0] != &heldA.Partitions[1].Replicas[0] {
		t.Fatal("unchanged partition's replicas were copied")
	}
}

func TestFSMInvalidCommands(t *testing.T) {
	h := threeBrokers(t)
	h.ok(createCmd(h.f.meta.Load(), "orders", 1, 1, nil))
	for _, raw := range []string{
		``,
		`not json`,
		`[]`,
		`null`,
		`{}`,
		`{"type":"launchMissiles","v":1}`,
		`{"type":"deleteTopic","v":2,"name":"orders"}`,
		`{"type":"deleteTopic","v":0,"name":"orders"}`,
		`{"type":"deleteTopic","name":"orders"}`,
		`{"type":"deleteTopic","v":1,"name":"orders","force":true}`,
		`{"type":"deleteTopic","v":1,"name":"orders"} {"type":"deleteTopic","v":1,"name":"orders"}`,
		`{"type":"deleteTopic","v":1,"name":7}`,
		`{"type":"commitOffsets","v":1,"group":"g","commits":[{"topic":"orders","partition":0,"offset":1,"extra":1}]}`,
	} {
		h.refusedRaw([]byte(raw), ErrInvalidCommand)
	}
	// After all that, a good command still works.
	h.ok(&deleteTopicCmd{Name: "orders"})
}

func TestFSMChangedNotifies(t *testing.T) {
	h := newFSMHarness(t)
	ch := h.f.changed.wait()
	h.ok(&registerBrokerCmd{Broker: broker(1)})
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed after a change")
	}
	ch = h.f.changed.wait()
	h.refused(&registerBrokerCmd{Broker: BrokerInfo{ID: -1}}, ErrInvalidBroker) // checks ch stays open
	h.ok(&registerBrokerCmd{Broker: broker(2)})
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed after the second change")
	}
}

func TestFSMIndexTracksRefusals(t *testing.T) {
	h := newFSMHarness(t)
	h.ok(&registerBrokerCmd{Broker: broker(1)})
	h.refused(&deleteTopicCmd{Name: "x"}, ErrTopicNotFound)
	if got := h.f.index.Load(); got != 2 {
		t.Fatalf("fsm index %d, want 2: refused commands are applied entries too", got)
	}
	if v := h.f.meta.Load().Version; v != 1 {
		t.Fatalf("version %d, want 1: a refusal is not a change", v)
	}
}

func equalPartition(a, b PartitionInfo) bool {
	return a.Partition == b.Partition && a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch &&
		slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.ISR, b.ISR)
}

// TestFSMAllocateProducerID: ids come from FirstProducerID up, one per
// command, and only an accepted allocation moves the counter.
func TestFSMAllocateProducerID(t *testing.T) {
	h := threeBrokers(t)
	for i := range int64(3) {
		if id := h.ok(&allocateProducerIDCmd{}).producerID; id != FirstProducerID+i {
			t.Fatalf("allocation %d handed out %d, want %d", i, id, FirstProducerID+i)
		}
		// Other commands in between neither hand out nor use up an id.
		if id := h.ok(&registerBrokerCmd{Broker: broker(4)}).producerID; id != 0 {
			t.Fatalf("registerBroker answered producer id %d", id)
		}
	}
	h.refusedRaw([]byte(`{"type":"allocateProducerId","v":1,"count":2}`), ErrInvalidCommand)
	if id := h.ok(&allocateProducerIDCmd{}).producerID; id != FirstProducerID+3 {
		t.Fatalf("after a refused command: %d, want %d", id, FirstProducerID+3)
	}
}

// TestFSMReserveProducerIDs: a reservation moves the counter past the ids
// a restored topic remembers, and never back.
func TestFSMReserveProducerIDs(t *testing.T) {
	h := threeBrokers(t)
	h.ok(&allocateProducerIDCmd{})
	h.ok(&reserveProducerIDsCmd{Above: 5000})
	if id := h.ok(&allocateProducerIDCmd{}).producerID; id != 5001 {
		t.Fatalf("after reserving up to 5000 the next id is %d, want 5001", id)
	}
	h.ok(&reserveProducerIDsCmd{Above: 10}) // below the counter: nothing moves
	if id := h.ok(&allocateProducerIDCmd{}).producerID; id != 5002 {
		t.Fatalf("a reservation below the counter moved it: next id %d, want 5002", id)
	}
}

// Sample ACLs for the ACL tests.
var (
	aclAliceReads = security.ACL{Principal: "User:alice", Resource: security.ResourceTopic, Name: "orders", Op: security.OpRead}
	aclBobWrites  = security.ACL{Principal: "User:bob", Resource: security.ResourceTopic, Name: "logs.", Prefix: true, Op: security.OpWrite}
	aclAnyGroups  = security.ACL{Principal: security.AnyPrincipal, Resource: security.ResourceGroup, Name: "", Prefix: true, Op: security.OpRead}
	aclOpsAdmin   = security.ACL{Principal: "User:ops", Resource: security.ResourceCluster, Op: security.OpAdmin}
)

func addACLs(acls ...security.ACL) *addACLsCmd { return &addACLsCmd{ACLs: aclEntries(acls)} }

func removeACLs(acls ...security.ACL) *removeACLsCmd { return &removeACLsCmd{ACLs: aclEntries(acls)} }

// TestFSMAddAndRemoveACLs: adding keeps the order of first addition and
// stores each ACL once; removing takes out what is stored and counts it;
// neither disturbs a Metadata handed out before.
func TestFSMAddAndRemoveACLs(t *testing.T) {
	h := threeBrokers(t)
	if acls := h.f.meta.Load().ACLs(); len(acls) != 0 {
		t.Fatalf("ACLs of a new cluster: %v", acls)
	}
	h.ok(addACLs(aclBobWrites, aclAliceReads))
	held := h.f.meta.Load()
	mustEqual(t, "after the first add", held.ACLs(), []security.ACL{aclBobWrites, aclAliceReads})

	// Stored ones and one listed twice are stored once; the new ones go
	// after the old, in the order given.
	h.ok(addACLs(aclAliceReads, aclOpsAdmin, aclAnyGroups, aclOpsAdmin))
	want := []security.ACL{aclBobWrites, aclAliceReads, aclOpsAdmin, aclAnyGroups}
	mustEqual(t, "after the second add", h.f.meta.Load().ACLs(), want)
	mustEqual(t, "Metadata held from before", held.ACLs(), []security.ACL{aclBobWrites, aclAliceReads})

	// Adding only stored ones changes nothing but the version (h.ok checks
	// that the version still moves, as for every accepted command).
	h.ok(addACLs(aclAnyGroups, aclBobWrites))
	mustEqual(t, "after adding stored ones", h.f.meta.Load().ACLs(), want)

	// The slice handed out is read-only and shared, but an append to it
	// cannot write into the stored array.
	got := h.f.meta.Load().ACLs()
	_ = append(got, aclAliceReads)
	mustEqual(t, "after a caller appended", h.f.meta.Load().ACLs(), want)

	// The other commands carry the ACLs over.
	h.ok(&registerBrokerCmd{Broker: broker(4)})
	h.ok(createCmd(h.f.meta.Load(), "orders", 1, 1, nil))
	h.ok(&commitOffsetsCmd{Group: "g", Commits: []offsetCommitEntry{{Topic: "orders", Partition: 0, Offset: 1}}})
	h.ok(&alterTopicConfigCmd{Name: "orders", Set: map[string]string{"k": "v"}})
	p, _ := h.f.meta.Load().Partition("orders", 0)
	h.ok(&changeLeaderCmd{Topic: "orders", Partition: 0, NewLeader: p.Leader, ExpectedEpoch: 0})
	h.ok(&allocateProducerIDCmd{})
	h.ok(&deleteTopicCmd{Name: "orders"})
	mustEqual(t, "after other commands", h.f.meta.Load().ACLs(), want)

	// Removing: what is stored goes, what is not is counted out.
	missing := aclAliceReads
	missing.Name = "invoices"
	if n := h.ok(removeACLs(aclOpsAdmin, missing, aclOpsAdmin)).removed; n != 1 {
		t.Fatalf("removed %d, want 1", n)
	}
	mustEqual(t, "after the remove", h.f.meta.Load().ACLs(), []security.ACL{aclBobWrites, aclAliceReads, aclAnyGroups})
	if n := h.ok(removeACLs(missing)).removed; n != 0 {
		t.Fatalf("removing a missing ACL removed %d", n)
	}
	// A literal ACL and a prefix one of the same name are different ACLs.
	literal := aclBobWrites
	literal.Prefix = false
	if n := h.ok(removeACLs(literal)).removed; n != 0 {
		t.Fatalf("removing a literal ACL removed the prefix one: %d", n)
	}
	if n := h.ok(removeACLs(aclAnyGroups, aclBobWrites, aclAliceReads)).removed; n != 3 {
		t.Fatalf("removed %d, want 3", n)
	}
	if acls := h.f.meta.Load().ACLs(); acls != nil {
		t.Fatalf("ACLs after removing them all: %v, want nil (as in a new cluster)", acls)
	}
}

// TestFSMInvalidACLs: one bad ACL refuses the whole command, naming the
// ACL and the rule, and changes nothing.
func TestFSMInvalidACLs(t *testing.T) {
	h := threeBrokers(t)
	h.ok(addACLs(aclAliceReads))
	for _, tc := range []struct {
		acl  security.ACL
		want string
	}{
		{security.ACL{Principal: "alice", Resource: security.ResourceTopic, Name: "t", Op: security.OpRead}, `ACL principal "alice": want User:<name> or *`},
		{security.ACL{Principal: "User:", Resource: security.ResourceTopic, Name: "t", Op: security.OpRead}, `ACL principal "User:"`},
		{security.ACL{Principal: "User:a", Resource: "queue", Name: "t", Op: security.OpRead}, `ACL resource "queue": want topic, group or cluster`},
		{security.ACL{Principal: "User:a", Resource: security.ResourceTopic, Op: security.OpRead}, `needs a name`},
		{security.ACL{Principal: "User:a", Resource: security.ResourceTopic, Name: "t", Op: "delete"}, `ACL operation "delete" on a topic`},
		{security.ACL{Principal: "User:a", Resource: security.ResourceGroup, Name: "g", Op: security.OpWrite}, `ACL operation "write" on a group: want one of [read admin]`},
		{security.ACL{Principal: "User:a", Resource: security.ResourceCluster, Name: "x", Op: security.OpAdmin}, `takes no name`},
		{security.ACL{Principal: "User:a", Resource: security.ResourceCluster, Op: security.OpRead}, `ACL operation "read" on the cluster: want admin`},
		{security.ACL{Principal: "User:a", Resource: security.ResourceTopic, Name: strings.Repeat("n", 250), Op: security.OpRead}, `250 bytes; at most 249`},
	} {
		err := h.refused(addACLs(aclOpsAdmin, tc.acl), ErrInvalidACL)
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.acl.String()) {
			t.Errorf("error %q: want it to name %q and say %q", err, tc.acl.String(), tc.want)
		}
		h.refused(removeACLs(aclAliceReads, tc.acl), ErrInvalidACL)
	}
	// An entry with a field this build does not know is refused whole too.
	h.refusedRaw([]byte(`{"type":"addACLs","v":1,"acls":[{"principal":"*","resource":"cluster","op":"admin","host":"*"}]}`), ErrInvalidCommand)
	mustEqual(t, "ACLs after the refusals", h.f.meta.Load().ACLs(), []security.ACL{aclAliceReads})
}

// TestFSMACLLimit: at most MaxACLs are stored; the refusal says so and
// changes nothing, and adding stored ones or replacing one still works at
// the limit.
func TestFSMACLLimit(t *testing.T) {
	h := newFSMHarness(t)
	many := make([]security.ACL, MaxACLs)
	for i := range many {
		many[i] = security.ACL{Principal: "User:u" + strconv.Itoa(i), Resource: security.ResourceTopic, Name: "t", Op: security.OpRead}
	}
	h.ok(addACLs(many[:MaxACLs-1]...))
	// One over: the last one fits, the one after does not.
	err := h.refused(addACLs(many[MaxACLs-1], aclAliceReads), ErrTooManyACLs)
	for _, want := range []string{"9999 ACLs are stored", "would make 10001", "at most 10000"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	h.ok(addACLs(many[MaxACLs-1]))
	if n := len(h.f.meta.Load().ACLs()); n != MaxACLs {
		t.Fatalf("%d ACLs stored, want %d", n, MaxACLs)
	}
	h.refused(addACLs(aclAliceReads), ErrTooManyACLs)
	h.ok(addACLs(many[0], many[MaxACLs-1])) // stored already: no growth
	if n := h.ok(removeACLs(many[5])).removed; n != 1 {
		t.Fatalf("removed %d", n)
	}
	h.ok(addACLs(aclAliceReads))
	if got := h.f.meta.Load().ACLs(); len(got) != MaxACLs || got[len(got)-1] != aclAliceReads {
		t.Fatalf("%d ACLs, last %v", len(got), got[len(got)-1])
	}
	// One command may not name more than the limit, even to remove.
	tooMany := append(slices.Clone(many), aclOpsAdmin)
	err = h.refused(removeACLs(tooMany...), ErrTooManyACLs)
	if !strings.Contains(err.Error(), "names 10001 ACLs; at most 10000") {
		t.Errorf("error %q", err)
	}
}

func TestFSMDeleteGroup(t *testing.T) {
	h := threeBrokers(t)
	h.ok(createCmd(h.f.meta.Load(), "orders", 1, 1, nil))
	h.ok(&commitOffsetsCmd{Group: "g", Commits: []offsetCommitEntry{{Topic: "orders", Partition: 0, Offset: 3}}})
	h.ok(&commitOffsetsCmd{Group: "other", Commits: []offsetCommitEntry{{Topic: "orders", Partition: 0, Offset: 4}}})
	h.refused(&deleteGroupCmd{Group: "missing"}, ErrGroupNotFound)
	h.ok(&deleteGroupCmd{Group: "g"})
	if h.f.offsets.has("g") {
		t.Fatal("deleted group still has offsets")
	}
	if oc, ok := h.f.offsets.get("other", TopicPartition{"orders", 0}); !ok || oc.Offset != 4 {
		t.Fatalf("another group's offset changed: %v %v", oc, ok)
	}
	h.refused(&deleteGroupCmd{Group: "g"}, ErrGroupNotFound)
}

func TestFSMDeleteOffsets(t *testing.T) {
	h := threeBrokers(t)
	h.ok(createCmd(h.f.meta.Load(), "orders", 2, 1, nil))
	h.ok(&commitOffsetsCmd{Group: "g", Commits: []offsetCommitEntry{{Topic: "orders", Partition: 0, Offset: 3}, {Topic: "orders", Partition: 1, Offset: 5}}})
	h.ok(&commitOffsetsCmd{Group: "other", Commits: []offsetCommitEntry{{Topic: "orders", Partition: 0, Offset: 4}}})
	h.refused(&deleteOffsetsCmd{Group: "missing", Partitions: []offsetPartitionRef{{"orders", 0}}}, ErrGroupNotFound)
	// A partition never committed is no error.
	h.ok(&deleteOffsetsCmd{Group: "g", Partitions: []offsetPartitionRef{{"orders", 0}, {"gone", 7}}})
	if _, ok := h.f.offsets.get("g", TopicPartition{"orders", 0}); ok {
		t.Fatal("deleted offset still there")
	}
	if oc, ok := h.f.offsets.get("g", TopicPartition{"orders", 1}); !ok || oc.Offset != 5 {
		t.Fatalf("an offset not named changed: %v %v", oc, ok)
	}
	if oc, ok := h.f.offsets.get("other", TopicPartition{"orders", 0}); !ok || oc.Offset != 4 {
		t.Fatalf("another group's offset changed: %v %v", oc, ok)
	}
	h.ok(&deleteOffsetsCmd{Group: "g", Partitions: []offsetPartitionRef{{"orders", 1}}})
	if h.f.offsets.has("g") {
		t.Fatal("a group with no offsets left is still there")
	}
}
