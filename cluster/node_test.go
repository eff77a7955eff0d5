package cluster

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/security"
)

// TestNodeSingle runs the whole write path on a real single-voter Raft
// group, closes it, and reopens the same directory with Bootstrap still set:
// the state comes back from the log, not from a fresh bootstrap.
func TestNodeSingle(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Bootstrap = true
	n := openNode(t, cfg)
	waitReady(t, n)
	ctx := testContext(t, 10*time.Second)

	if !n.IsController() {
		t.Fatal("a single bootstrapped voter should be the controller")
	}
	if id, ok := n.ControllerID(); !ok || id != 1 {
		t.Fatalf("ControllerID = %d, %v", id, ok)
	}
	if !strings.HasPrefix(n.RaftAddr(), "127.0.0.1:") || strings.HasSuffix(n.RaftAddr(), ":0") {
		t.Fatalf("RaftAddr %q", n.RaftAddr())
	}
	servers, err := n.Servers()
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "servers", servers, []Server{{ID: 1, RaftAddr: n.RaftAddr(), Voter: true}})

	// Creating a topic needs registered brokers.
	_, err = n.CreateTopic(ctx, "orders", 3, 1, nil)
	mustIs(t, err, ErrNotEnoughBrokers)
	if !strings.Contains(err.Error(), "0 registered") {
		t.Fatalf("error does not say how many brokers are registered: %v", err)
	}
	b1 := BrokerInfo{ID: 1, Addr: "127.0.0.1:9092", RaftAddr: n.RaftAddr(), Rack: "a"}
	if err := n.RegisterBroker(ctx, b1); err != nil {
		t.Fatal(err)
	}
	mustIs(t, n.RegisterBroker(ctx, BrokerInfo{ID: 2, Addr: "nope"}), ErrInvalidBroker)

	orders, err := n.CreateTopic(ctx, "orders", 3, 1, map[string]string{"retention.ms": "-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(orders.ID) != 32 || orders.CreatedAtMs == 0 || orders.Config["retention.ms"] != "-1" {
		t.Fatalf("created %+v", orders)
	}
	for _, p := range orders.Partitions {
		if len(p.Replicas) != 1 || p.Replicas[0] != 1 || p.Leader != 1 || p.LeaderEpoch != 0 || len(p.ISR) != 1 {
			t.Fatalf("partition %+v", p)
		}
	}
	if got, _ := n.Metadata().Topic("orders"); got != orders {
		t.Fatal("CreateTopic's answer is not the topic in Metadata")
	}

	// The refusals, with distinct errors for duplicate create and missing
	// delete.
	_, err = n.CreateTopic(ctx, "orders", 3, 1, nil)
	mustIs(t, err, ErrTopicExists)
	mustIs(t, n.DeleteTopic(ctx, "missing"), ErrTopicNotFound)
	if errors.Is(err, ErrTopicNotFound) {
		t.Fatal("ErrTopicExists matches ErrTopicNotFound")
	}
	_, err = n.CreateTopic(ctx, "other", 3, 2, nil)
	mustIs(t, err, ErrNotEnoughBrokers)
	if want := "cluster: not enough brokers: replication factor 2 needs 2 brokers, 1 registered"; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	_, err = n.CreateTopic(ctx, "a b", 1, 1, nil)
	mustIs(t, err, ErrInvalidTopicName)
	if want := `cluster: invalid topic name "a b": only letters, digits, '.', '_' and '-' are allowed`; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	for _, parts := range []int32{0, -1, 10001} {
		_, err = n.CreateTopic(ctx, "x", parts, 1, nil)
		mustIs(t, err, ErrInvalidPartitions)
	}
	_, err = n.CreateTopic(ctx, "x", 1, 0, nil)
	mustIs(t, err, ErrInvalidReplicationFactor)

	// Alter, commit, delete.
	altered, err := n.AlterTopicConfig(ctx, "orders", map[string]string{"segment.bytes": "1024"}, []string{"retention.ms"})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "config", altered.Config, map[string]string{"segment.bytes": "1024"})
	_, err = n.AlterTopicConfig(ctx, "missing", map[string]string{"a": "b"}, nil)
	mustIs(t, err, ErrTopicNotFound)

	if _, err := n.CreateTopic(ctx, "scratch", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	err = n.CommitOffsets(ctx, "g1", []OffsetCommitRequest{
		{Topic: "orders", Partition: 0, Offset: 42, Metadata: "m"},
		{Topic: "orders", Partition: 2, Offset: 7},
		{Topic: "scratch", Partition: 0, Offset: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	mustIs(t, n.CommitOffsets(ctx, "g1", []OffsetCommitRequest{{Topic: "orders", Partition: 3, Offset: 1}}), ErrPartitionNotFound)
	mustIs(t, n.CommitOffsets(ctx, "g1", []OffsetCommitRequest{{Topic: "nope", Partition: 0, Offset: 1}}), ErrTopicNotFound)
	mustIs(t, n.CommitOffsets(ctx, "", []OffsetCommitRequest{{Topic: "orders", Partition: 0, Offset: 1}}), ErrInvalidOffsetCommit)
	oc, ok := n.CommittedOffset("g1", "orders", 0)
	if !ok || oc.Offset != 42 || oc.Metadata != "m" || oc.CommittedAtMs == 0 {
		t.Fatalf("committed offset %+v %v", oc, ok)
	}
	if err := n.DeleteTopic(ctx, "scratch"); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.CommittedOffset("g1", "scratch", 0); ok {
		t.Fatal("offset of a deleted topic survived")
	}
	offsets := n.CommittedOffsets("g1")
	if len(offsets) != 2 {
		t.Fatalf("offsets %v", offsets)
	}
	delete(offsets, TopicPartition{"orders", 0}) // the returned map is the caller's
	if _, ok := n.CommittedOffset("g1", "orders", 0); !ok {
		t.Fatal("changing the returned map changed the node")
	}
	if len(n.CommittedOffsets("nobody")) != 0 {
		t.Fatal("offsets for an unknown group")
	}

	want := n.Metadata()
	wantOffsets := n.CommittedOffsets("g1")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	mustIs(t, n.RegisterBroker(ctx, b1), ErrClosed)
	_, err = n.CreateTopic(ctx, "late", 1, 1, nil)
	mustIs(t, err, ErrClosed)
	mustIs(t, n.WaitReady(ctx), ErrClosed)
	if n.IsController() {
		t.Fatal("a closed node is not the controller")
	}
	if n.Metadata() != want {
		t.Fatal("Metadata changed on Close")
	}

	// Reopen on the same address, Bootstrap still set.
	cfg.Bind = n.RaftAddr()
	n2 := openNode(t, cfg)
	waitReady(t, n2)
	got := n2.Metadata()
	mustEqual(t, "metadata after reopen", got, want)
	mustEqual(t, "offsets after reopen", n2.CommittedOffsets("g1"), wantOffsets)
	servers, err = n2.Servers()
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 1 {
		t.Fatalf("servers after reopen: %+v", servers)
	}
	// And it still takes writes.
	if _, err := n2.CreateTopic(ctx, "after-restart", 2, 1, nil); err != nil {
		t.Fatal(err)
	}
}

// TestNodeSnapshotRestore forces a snapshot, with the log compacted behind
// it, writes more, and reopens: the state before the snapshot can only come
// from it, the rest from the log after it.
func TestNodeSnapshotRestore(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Bootstrap = true
	cfg.TrailingLogs = 1
	n := openNode(t, cfg)
	waitReady(t, n)
	ctx := testContext(t, 10*time.Second)

	if err := n.RegisterBroker(ctx, BrokerInfo{ID: 1, Addr: "127.0.0.1:9092"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"t1", "t2", "t3"} {
		if _, err := n.CreateTopic(ctx, name, 2, 1, map[string]string{"k": name}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.CommitOffsets(ctx, "g", []OffsetCommitRequest{{Topic: "t1", Partition: 1, Offset: 5}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.ChangeLeader(ctx, "t2", 0, 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := n.AddACLs(ctx, []security.ACL{aclBobWrites, aclAliceReads, aclOpsAdmin}); err != nil {
		t.Fatal(err)
	}
	if err := n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	first, err := n.store.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first <= 2 {
		t.Fatalf("log not compacted after the snapshot: first index %d", first)
	}
	atSnapshot := n.Metadata()

	// After the snapshot: more commands, only in the log.
	if _, err := n.CreateTopic(ctx, "t4", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := n.CommitOffsets(ctx, "g", []OffsetCommitRequest{{Topic: "t4", Partition: 0, Offset: 9}}); err != nil {
		t.Fatal(err)
	}
	if removed, err := n.RemoveACLs(ctx, []security.ACL{aclAliceReads}); err != nil || removed != 1 {
		t.Fatalf("RemoveACLs: %d, %v", removed, err)
	}
	if err := n.AddACLs(ctx, []security.ACL{aclAnyGroups}); err != nil {
		t.Fatal(err)
	}
	want := n.Metadata()
	wantOffsets := n.CommittedOffsets("g")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	cfg.Bind = n.RaftAddr()
	n2 := openNode(t, cfg)
	// Open restores the snapshot before it returns, before any election.
	if _, ok := n2.Metadata().Topic("t3"); !ok {
		t.Fatal("snapshot not restored on open")
	}
	if n2.Metadata().Version < atSnapshot.Version {
		t.Fatalf("restored version %d, snapshot had %d", n2.Metadata().Version, atSnapshot.Version)
	}
	waitReady(t, n2)
	mustEqual(t, "metadata after restore and replay", n2.Metadata(), want)
	mustEqual(t, "ACLs after restore and replay", n2.Metadata().ACLs(), []security.ACL{aclBobWrites, aclOpsAdmin, aclAnyGroups})
	mustEqual(t, "offsets after restore and replay", n2.CommittedOffsets("g"), wantOffsets)
}

// TestNodeAllocateProducerID: producer ids only grow, across a snapshot
// that compacts the log behind it, commands after the snapshot, and a
// restart that restores the one and replays the others.
func TestNodeAllocateProducerID(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Bootstrap = true
	cfg.TrailingLogs = 1
	n := openNode(t, cfg)
	waitReady(t, n)
	ctx := testContext(t, 10*time.Second)

	last := FirstProducerID - 1
	allocate := func(n *Node, what string) {
		t.Helper()
		id, err := n.AllocateProducerID(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if id <= last || (last < FirstProducerID && id != FirstProducerID) {
			t.Fatalf("%s: producer id %d after %d", what, id, last)
		}
		last = id
	}
	for range 3 {
		allocate(n, "before the snapshot")
	}
	if err := n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if first, err := n.store.FirstIndex(); err != nil || first <= 3 {
		t.Fatalf("log not compacted after the snapshot: first index %d (%v)", first, err)
	}
	allocate(n, "after the snapshot")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	cfg.Bind = n.RaftAddr()
	n2 := openNode(t, cfg)
	waitReady(t, n2)
	allocate(n2, "after a restart")
	allocate(n2, "after a restart")
}

// TestNodeFencing drives leader and ISR changes through Raft, with stale
// epochs refused. Brokers 2 and 3 are registered without running: the
// metadata does not care who is alive (that is gossip's business).
func TestNodeFencing(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Bootstrap = true
	n := openNode(t, cfg)
	waitReady(t, n)
	ctx := testContext(t, 10*time.Second)
	for id := int32(1); id <= 3; id++ {
		if err := n.RegisterBroker(ctx, broker(id)); err != nil {
			t.Fatal(err)
		}
	}
	topic, err := n.CreateTopic(ctx, "orders", 3, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]bool{}
	for _, p := range topic.Partitions {
		leaders[p.Leader] = true
	}
	if len(leaders) != 3 {
		t.Fatalf("leaders not spread: %+v", topic.Partitions)
	}
	p := topic.Partitions[0]
	old, next, third := p.Replicas[0], p.Replicas[1], p.Replicas[2]

	// Leader change, then the same request again: fenced.
	got, err := n.ChangeLeader(ctx, "orders", 0, next, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Leader != next || got.LeaderEpoch != 1 {
		t.Fatalf("after ChangeLeader: %+v", got)
	}
	_, err = n.ChangeLeader(ctx, "orders", 0, old, 0)
	mustIs(t, err, ErrStaleEpoch)
	_, err = n.ChangeLeader(ctx, "orders", 0, 99, 1)
	mustIs(t, err, ErrNotInISR)
	_, err = n.ChangeLeader(ctx, "orders", 7, next, 1)
	mustIs(t, err, ErrPartitionNotFound)
	_, err = n.ChangeLeader(ctx, "nope", 0, next, 1)
	mustIs(t, err, ErrTopicNotFound)

	// The deposed leader tries to shrink the ISR with its old epoch.
	_, err = n.ChangeISR(ctx, "orders", 0, []int32{old}, 0, 1)
	mustIs(t, err, ErrStaleEpoch)
	// The new leader shrinks it; dropping itself is refused.
	_, err = n.ChangeISR(ctx, "orders", 0, []int32{old, third}, 1, 1)
	mustIs(t, err, ErrNotInISR)
	got, err = n.ChangeISR(ctx, "orders", 0, []int32{third, next}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.LeaderEpoch != 1 || got.Leader != next {
		t.Fatalf("ISR change moved leadership: %+v", got)
	}
	// Only an ISR member can become leader now.
	_, err = n.ChangeLeader(ctx, "orders", 0, old, 1)
	mustIs(t, err, ErrNotInISR)
	_, err = n.ChangeISR(ctx, "orders", 0, []int32{next, 42}, 1, 2)
	mustIs(t, err, ErrInvalidISR)

	final, _ := n.Metadata().Partition("orders", 0)
	if !equalPartition(final, got) {
		t.Fatalf("stored %+v, last answer %+v", final, got)
	}
}

// TestNodeChanged waits for a change through Changed and checks that a
// context bounds a write.
func TestNodeChanged(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Bootstrap = true
	n := openNode(t, cfg)
	waitReady(t, n)
	ctx := testContext(t, 10*time.Second)

	ch := n.Changed()
	v := n.Metadata().Version
	if err := n.RegisterBroker(ctx, broker(1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed by a write that returned")
	}
	if n.Metadata().Version <= v {
		t.Fatal("version did not move")
	}

	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	mustIs(t, n.RegisterBroker(cancelled, broker(2)), context.Canceled)
	if _, ok := n.Metadata().Broker(2); ok {
		t.Fatal("a write with a cancelled context was applied")
	}
}

func TestOpenValidates(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"no dir":        func(c *Config) { c.Dir = "" },
		"negative id":   func(c *Config) { c.NodeID = -1 },
		"bad bind":      func(c *Config) { c.Bind = "nope" },
		"bad advertise": func(c *Config) { c.Advertise = "x" },
		"self missing":  func(c *Config) { c.BootstrapServers = []Server{{ID: 2, RaftAddr: "127.0.0.1:1", Voter: true}} },
		"self nonvoter": func(c *Config) { c.BootstrapServers = []Server{{ID: 1, Voter: false}} },
		"dup server": func(c *Config) {
			c.BootstrapServers = []Server{{ID: 1, Voter: true}, {ID: 2, RaftAddr: "127.0.0.1:1"}, {ID: 2, RaftAddr: "127.0.0.1:2"}}
		},
		"lease > heartbeat": func(c *Config) { c.LeaderLeaseTimeout = time.Second },
	} {
		cfg := testConfig(t, 1)
		mut(&cfg)
		if n, err := Open(cfg); err == nil {
			n.Close()
			t.Errorf("%s: Open succeeded", name)
		}
	}
}

// TestOpenLockedDir: a second node on the same directory fails instead of
// hanging on the database lock.
func TestOpenLockedDir(t *testing.T) {
	cfg := testConfig(t, 1)
	openNode(t, cfg)
	if n, err := Open(cfg); err == nil {
		n.Close()
		t.Fatal("second Open of the same directory succeeded")
	}
}

// TestCloseStopsGoroutines: after Close, nothing the node started is left
// running (Raft's loops, the transport, the waiters).
func TestCloseStopsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	cfg := testConfig(t, 1)
	cfg.Bootstrap = true
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, n)
	if err := n.RegisterBroker(testContext(t, 10*time.Second), broker(1)); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "goroutines to stop", func() bool { return runtime.NumGoroutine() <= before })
}

func TestRestoreTopicKeepsItsID(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Bootstrap = true
	n := openNode(t, cfg)
	waitReady(t, n)
	ctx := testContext(t, 10*time.Second)
	if err := n.RegisterBroker(ctx, broker(1)); err != nil {
		t.Fatal(err)
	}
	first, err := n.CreateTopic(ctx, "history", 3, 1, map[string]string{"retention.ms": "-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.DeleteTopic(ctx, "history"); err != nil {
		t.Fatal(err)
	}
	back, err := n.RestoreTopic(ctx, "history", first.ID, 3, 1, first.Config, 4)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != first.ID || len(back.Partitions) != 3 || back.Config["retention.ms"] != "-1" {
		t.Fatalf("restored %+v, want id %s", back, first.ID)
	}
	for _, p := range back.Partitions {
		if p.LeaderEpoch != 4 {
			t.Fatalf("restored partition %d starts in leader epoch %d, want 4", p.Partition, p.LeaderEpoch)
		}
	}
	if _, err := n.RestoreTopic(ctx, "other", first.ID, 1, 1, nil, 0); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("restore under a taken id: %v", err)
	}
	if _, err := n.RestoreTopic(ctx, "bad", "not-hex", 1, 1, nil, 0); err == nil {
		t.Fatal("restore under a malformed id succeeded")
	}
}

// TestNodeACLs runs the ACL writes through a real single-voter group: what
// the proposer refuses never reaches the log, and what it accepts is in
// Metadata when the call returns.
func TestNodeACLs(t *testing.T) {
	cfg := testConfig(t, 1)
	cfg.Bootstrap = true
	n := openNode(t, cfg)
	waitReady(t, n)
	ctx := testContext(t, 10*time.Second)

	if err := n.AddACLs(ctx, []security.ACL{aclAliceReads, aclOpsAdmin}); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "ACLs", n.Metadata().ACLs(), []security.ACL{aclAliceReads, aclOpsAdmin})
	if err := n.AddACLs(ctx, []security.ACL{aclOpsAdmin, aclBobWrites}); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "ACLs after a duplicate add", n.Metadata().ACLs(), []security.ACL{aclAliceReads, aclOpsAdmin, aclBobWrites})

	// Refusals are answered before Raft: the version does not move.
	version := n.Metadata().Version
	bad := security.ACL{Principal: "User:eve", Resource: security.ResourceGroup, Name: "g", Op: security.OpWrite}
	err := n.AddACLs(ctx, []security.ACL{aclAnyGroups, bad})
	mustIs(t, err, ErrInvalidACL)
	if !strings.Contains(err.Error(), `"User:eve write group:g"`) {
		t.Fatalf("error does not name the bad ACL: %v", err)
	}
	_, err = n.RemoveACLs(ctx, []security.ACL{bad})
	mustIs(t, err, ErrInvalidACL)
	if err := n.AddACLs(ctx, nil); err != nil {
		t.Fatalf("adding no ACLs: %v", err)
	}
	if v := n.Metadata().Version; v != version {
		t.Fatalf("refused and empty calls moved the version from %d to %d", version, v)
	}

	removed, err := n.RemoveACLs(ctx, []security.ACL{aclOpsAdmin, aclAnyGroups})
	if err != nil || removed != 1 {
		t.Fatalf("RemoveACLs: %d, %v; want 1 removed", removed, err)
	}
	removed, err = n.RemoveACLs(ctx, []security.ACL{aclOpsAdmin})
	if err != nil || removed != 0 {
		t.Fatalf("RemoveACLs of a removed ACL: %d, %v; want 0 and no error", removed, err)
	}
	mustEqual(t, "ACLs after the removals", n.Metadata().ACLs(), []security.ACL{aclAliceReads, aclBobWrites})
}
