package gossip

import (
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
)

// deadTime is the GossipToTheDeadTime of the partition tests: short, so
// that outlasting it is quick, but long enough that the cut members have
// declared each other dead and then stopped gossiping to each other.
const deadTime = 500 * time.Millisecond

// outlastDeadTime holds a cut until every member has reported each member
// across it failed and memberlist has stopped gossiping to the dead: the
// state in which memberlist on its own never contacts them again.
func outlastDeadTime(t *testing.T, sides ...[]*node) {
	t.Helper()
	for i, side := range sides {
		for j, other := range sides {
			if i == j {
				continue
			}
			for _, n := range side {
				for _, o := range other {
					n.rec.wait(t, 15*time.Second, EventFail, o.cfg.NodeName)
				}
			}
		}
	}
	// The cut is the scenario, and its length is the point of the test:
	// memberlist forgets a dead member GossipToTheDeadTime after declaring
	// it, which the test cannot observe, so the cut lasts several times that.
	<-time.After(4 * deadTime)
}

func netCluster(t *testing.T, tn *testNet, n int) []*node {
	t.Helper()
	cfg := tn.config(t, 1)
	cfg.Timing.GossipToTheDeadTime = deadTime
	first := startNode(t, cfg)
	nodes := []*node{first}
	for id := 2; id <= n; id++ {
		cfg := tn.config(t, int32(id), first.LocalAddr())
		cfg.Timing.GossipToTheDeadTime = deadTime
		nodes = append(nodes, startNode(t, cfg))
	}
	for _, nd := range nodes {
		waitMembers(t, nd, 10*time.Second, ids(1, n)...)
	}
	return nodes
}

// A member cut off from the others for longer than GossipToTheDeadTime
// is alive again on both sides once the network heals, and every member
// reports its return as a join, which is what the controller acts on.
func TestPartitionLongerThanDeadTimeHeals(t *testing.T) {
	t.Parallel()
	tn := newTestNet()
	nodes := netCluster(t, tn, 3)
	majority, alone := nodes[:2], nodes[2:]
	tn.partition(majority, alone)
	waitMembers(t, nodes[0], 15*time.Second, 1, 2)
	waitMembers(t, nodes[1], 15*time.Second, 1, 2)
	waitMembers(t, nodes[2], 15*time.Second, 3)
	outlastDeadTime(t, majority, alone)

	tn.heal()
	for _, n := range nodes {
		waitMembers(t, n, 15*time.Second, 1, 2, 3)
	}
	// The first join is from before the cut; the second is the return.
	for _, n := range majority {
		n.rec.waitCount(t, 5*time.Second, 2, EventJoin, "broker-3")
	}
	for _, o := range majority {
		alone[0].rec.waitCount(t, 5*time.Second, 2, EventJoin, o.cfg.NodeName)
	}
}

// Two members whose only seed is gone for good find each other again after
// a partition through what they remember of each other: the member that
// failed is retried, not only the seeds.
func TestPartitionHealsWithoutSeeds(t *testing.T) {
	t.Parallel()
	tn := newTestNet()
	nodes := netCluster(t, tn, 3)
	crash(t, nodes[0]) // the seed both others joined through
	a, b := nodes[1], nodes[2]
	waitMembers(t, a, 15*time.Second, 2, 3)
	waitMembers(t, b, 15*time.Second, 2, 3)

	tn.partition([]*node{a}, []*node{b})
	waitMembers(t, a, 15*time.Second, 2)
	waitMembers(t, b, 15*time.Second, 3)
	outlastDeadTime(t, []*node{a}, []*node{b})

	tn.heal()
	waitMembers(t, a, 15*time.Second, 2, 3)
	waitMembers(t, b, 15*time.Second, 2, 3)
	a.rec.waitCount(t, 5*time.Second, 2, EventJoin, "broker-3")
	b.rec.waitCount(t, 5*time.Second, 2, EventJoin, "broker-2")
}

// When every failed member has been forgotten (ReconnectTimeout passed), a
// member cut off alone still finds the others again through its seeds.
func TestPartitionHealsThroughSeedsAfterReconnectTimeout(t *testing.T) {
	t.Parallel()
	tn := newTestNet()
	short := func(cfg Config) Config {
		cfg.Timing.GossipToTheDeadTime = deadTime
		cfg.ReconnectTimeout = cfg.Timing.ReconnectInterval
		return cfg
	}
	first := startNode(t, short(tn.config(t, 1)))
	nodes := []*node{first}
	for id := int32(2); id <= 3; id++ {
		nodes = append(nodes, startNode(t, short(tn.config(t, id, first.LocalAddr()))))
	}
	for _, n := range nodes {
		waitMembers(t, n, 10*time.Second, 1, 2, 3)
	}
	majority, alone := nodes[:2], nodes[2:]
	tn.partition(majority, alone)
	outlastDeadTime(t, majority, alone)
	for _, n := range nodes {
		testutil.WaitFor(t, 15*time.Second, n.cfg.NodeName+" to forget the members it saw fail", func() bool {
			failed, _ := n.delegate.failedSince(time.Now().Add(-n.cfg.ReconnectTimeout))
			return len(failed) == 0
		})
	}

	tn.heal()
	for _, n := range nodes {
		waitMembers(t, n, 15*time.Second, 1, 2, 3)
	}
}

func TestReconnectTargets(t *testing.T) {
	m := func(name, addr string) Member { return Member{Name: name, Addr: addr} }
	self := m("broker-1", "10.0.0.1:7402")
	cases := []struct {
		name   string
		failed []Member
		seeds  []string
		alive  []Member
		want   []string
	}{
		{"nothing failed, not alone", nil, []string{"10.0.0.9:7402"}, []Member{self, m("broker-2", "10.0.0.2:7402")}, nil},
		{"alone without seeds", nil, nil, []Member{self}, nil},
		{"alone: the seeds", nil, []string{"10.0.0.2:7402", "seed.example:7402"}, []Member{self}, []string{"10.0.0.2:7402", "seed.example:7402"}},
		{
			"failed members, then seeds, once each, none alive",
			[]Member{m("broker-3", "10.0.0.3:7402"), m("broker-4", "10.0.0.4:7402")},
			[]string{"10.0.0.2:7402", "10.0.0.3:7402", "10.0.0.5:7402"},
			[]Member{self, m("broker-2", "10.0.0.2:7402")},
			[]string{"10.0.0.3:7402", "10.0.0.4:7402", "10.0.0.5:7402"},
		},
		{
			// A broker that came back under another name on the failed one's
			// address is alive; that address is not retried.
			"failed address now alive",
			[]Member{m("broker-3", "10.0.0.3:7402")},
			nil,
			[]Member{self, m("broker-7", "10.0.0.3:7402")},
			nil,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := reconnectTargets(tc.failed, tc.seeds, tc.alive)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
