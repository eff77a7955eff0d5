package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/security"
)

// controllerOf waits until exactly one of nodes is the controller and every
// node names it, and returns it.
func controllerOf(t *testing.T, nodes []*Node) *Node {
	t.Helper()
	var leader *Node
	testutil.WaitFor(t, 10*time.Second, "one agreed controller", func() bool {
		leader = nil
		for _, n := range nodes {
			if n.IsController() {
				if leader != nil {
					return false
				}
				leader = n
			}
		}
		if leader == nil {
			return false
		}
		for _, n := range nodes {
			if id, ok := n.ControllerID(); !ok || id != leader.cfg.NodeID {
				return false
			}
		}
		return true
	})
	return leader
}

// TestThreeNodes runs a three-voter group in one process on loopback with
// the default timing: replication of writes to followers, refusal of writes
// on followers, and failover to a new controller that keeps the state and
// takes writes.
func TestThreeNodes(t *testing.T) {
	start := time.Now()
	open := func(id int32, mut func(*Config)) *Node {
		cfg := testConfig(t, id)
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout, cfg.CommitTimeout = 0, 0, 0, 0 // defaults
		if mut != nil {
			mut(&cfg)
		}
		return openNode(t, cfg)
	}
	// Followers first (no bootstrap, no state: they wait to be contacted),
	// then the lowest id bootstraps all three, as bootstrap-expect will.
	n2 := open(2, nil)
	n3 := open(3, nil)
	n1 := open(1, func(c *Config) {
		c.Bootstrap = true
		c.BootstrapServers = []Server{
			{ID: 1, Voter: true},
			{ID: 2, RaftAddr: n2.RaftAddr(), Voter: true},
			{ID: 3, RaftAddr: n3.RaftAddr(), Voter: true},
		}
	})
	nodes := []*Node{n1, n2, n3}
	for _, n := range nodes {
		waitReady(t, n)
	}
	leader := controllerOf(t, nodes)
	ctx := testContext(t, 20*time.Second)
	servers, err := n2.Servers()
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 3 {
		t.Fatalf("servers seen by a follower: %+v", servers)
	}

	for _, n := range nodes {
		b := BrokerInfo{ID: n.cfg.NodeID, Addr: broker(n.cfg.NodeID).Addr, RaftAddr: n.RaftAddr()}
		if err := leader.RegisterBroker(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	events, err := leader.CreateTopic(ctx, "events", 6, 3, map[string]string{"min.insync.replicas": "2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.CommitOffsets(ctx, "g", []OffsetCommitRequest{{Topic: "events", Partition: 4, Offset: 77}}); err != nil {
		t.Fatal(err)
	}
	lastPID, err := leader.AllocateProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.AddACLs(ctx, []security.ACL{aclOpsAdmin, aclAliceReads}); err != nil {
		t.Fatal(err)
	}
	want := leader.Metadata()

	// Every follower reaches the same state, woken by Changed.
	var followers []*Node
	for _, n := range nodes {
		if n == leader {
			continue
		}
		followers = append(followers, n)
		got := waitMetadata(t, n, "the leader's version", func(m *Metadata) bool { return m.Version >= want.Version })
		mustEqual(t, "follower metadata", got, want)
		if oc, ok := n.CommittedOffset("g", "events", 4); !ok || oc.Offset != 77 {
			t.Fatalf("follower %d offset: %+v %v", n.cfg.NodeID, oc, ok)
		}
	}

	// A follower refuses writes and names the controller.
	_, err = followers[0].CreateTopic(ctx, "nope", 1, 1, nil)
	var nce *NotControllerError
	if !errors.As(err, &nce) || !errors.Is(err, ErrNotController) {
		t.Fatalf("write on a follower: %v", err)
	}
	if nce.ControllerID != leader.cfg.NodeID || nce.Addr != broker(leader.cfg.NodeID).Addr || nce.RaftAddr != leader.RaftAddr() {
		t.Fatalf("NotControllerError %+v, leader is %d at %s", nce, leader.cfg.NodeID, leader.RaftAddr())
	}
	_, err = followers[1].ChangeLeader(ctx, "events", 0, 1, 0)
	mustIs(t, err, ErrNotController)
	mustIs(t, followers[1].AddVoter(ctx, 9, "127.0.0.1:1"), ErrNotController)
	_, err = followers[0].AllocateProducerID(ctx)
	if !errors.As(err, &nce) || nce.ControllerID != leader.cfg.NodeID {
		t.Fatalf("producer id allocation on a follower: %v", err)
	}
	err = followers[0].AddACLs(ctx, []security.ACL{aclBobWrites})
	if !errors.As(err, &nce) || nce.ControllerID != leader.cfg.NodeID || nce.Addr != broker(leader.cfg.NodeID).Addr {
		t.Fatalf("ACL add on a follower: %v", err)
	}
	_, err = followers[1].RemoveACLs(ctx, []security.ACL{aclOpsAdmin})
	mustIs(t, err, ErrNotController)

	// Fail the controller. The other two elect one of themselves, which
	// has everything and takes writes.
	oldID := leader.cfg.NodeID
	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}
	failover := time.Now()
	next := controllerOf(t, followers)
	if next.cfg.NodeID == oldID {
		t.Fatal("closed node still controller")
	}
	waitReady(t, next)
	t.Logf("new controller %d after %v", next.cfg.NodeID, time.Since(failover))
	mustEqual(t, "new controller's metadata", next.Metadata(), want)

	// Move leadership of the partitions the old controller led, as the
	// controller will on a broker failure: fenced by the epoch.
	for _, p := range events.Partitions {
		if p.Leader != oldID {
			continue
		}
		to := next.cfg.NodeID
		moved, err := next.ChangeLeader(ctx, "events", p.Partition, to, p.LeaderEpoch)
		if err != nil {
			t.Fatal(err)
		}
		if moved.LeaderEpoch != p.LeaderEpoch+1 {
			t.Fatalf("epoch %d after move from %d", moved.LeaderEpoch, p.LeaderEpoch)
		}
		_, err = next.ChangeLeader(ctx, "events", p.Partition, to, p.LeaderEpoch)
		mustIs(t, err, ErrStaleEpoch)
	}
	// The new controller goes on from the old one's producer ids.
	if pid, err := next.AllocateProducerID(ctx); err != nil || pid <= lastPID {
		t.Fatalf("producer id %d (%v) after failover, the old controller handed out %d", pid, err, lastPID)
	}
	after, err := next.CreateTopic(ctx, "after-failover", 2, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	var other *Node
	for _, n := range followers {
		if n != next {
			other = n
		}
	}
	waitMetadata(t, other, "after-failover", func(m *Metadata) bool {
		got, ok := m.Topic("after-failover")
		return ok && got.ID == after.ID
	})
	mustEqual(t, "survivors agree", other.Metadata(), next.Metadata())
	err = other.DeleteTopic(ctx, "after-failover")
	var nce2 *NotControllerError
	if !errors.As(err, &nce2) || nce2.ControllerID != next.cfg.NodeID {
		t.Fatalf("write on the remaining follower: %v", err)
	}
	t.Logf("three-node test took %v", time.Since(start))
}

// TestGrowAndShrink starts from one bootstrapped broker and adds a second as
// a voter, the way gossip-driven membership will, then removes it.
func TestGrowAndShrink(t *testing.T) {
	c1 := testConfig(t, 1)
	c1.Bootstrap = true
	n1 := openNode(t, c1)
	waitReady(t, n1)
	ctx := testContext(t, 10*time.Second)
	if err := n1.RegisterBroker(ctx, broker(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := n1.CreateTopic(ctx, "before", 1, 1, nil); err != nil {
		t.Fatal(err)
	}

	n2 := openNode(t, testConfig(t, 2)) // no bootstrap: joins when added
	if err := n1.AddNonvoter(ctx, 2, n2.RaftAddr()); err != nil {
		t.Fatal(err)
	}
	waitMetadata(t, n2, "the log replicated to the non-voter", func(m *Metadata) bool { _, ok := m.Topic("before"); return ok })
	if err := n1.AddVoter(ctx, 2, n2.RaftAddr()); err != nil {
		t.Fatal(err)
	}
	waitReady(t, n2)
	servers, err := n1.Servers()
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "servers", servers, []Server{{1, n1.RaftAddr(), true}, {2, n2.RaftAddr(), true}})
	mustEqual(t, "joined node's metadata", n2.Metadata(), n1.Metadata())

	// A write needs both voters now, and reaches the new one.
	if err := n1.RegisterBroker(ctx, broker(2)); err != nil {
		t.Fatal(err)
	}
	waitMetadata(t, n2, "broker 2", func(m *Metadata) bool { _, ok := m.Broker(2); return ok })

	if err := n1.RemoveServer(ctx, 2); err != nil {
		t.Fatal(err)
	}
	servers, err = n1.Servers()
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "servers after removal", servers, []Server{{1, n1.RaftAddr(), true}})
	// Alone again, it still commits.
	if _, err := n1.CreateTopic(ctx, "after", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
}
