package gossip

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
)

func TestThreeMembersJoin(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	for _, n := range nodes {
		// Every member sees every broker with the Meta it advertised and the
		// gossip address it bound.
		for _, m := range n.Members() {
			if m.Meta != testMeta(m.Meta.BrokerID) {
				t.Errorf("%s sees broker %d with meta %+v, want %+v", n.cfg.NodeName, m.Meta.BrokerID, m.Meta, testMeta(m.Meta.BrokerID))
			}
			if want := nodes[m.Meta.BrokerID-1].LocalAddr(); m.Addr != want {
				t.Errorf("%s sees broker %d at %s, want %s", n.cfg.NodeName, m.Meta.BrokerID, m.Addr, want)
			}
		}
		// A join event for every member, this one included.
		for _, other := range nodes {
			ev := n.rec.wait(t, 5*time.Second, EventJoin, other.cfg.NodeName)
			if ev.Member.Meta != other.cfg.Meta || ev.Member.State != StateAlive {
				t.Errorf("%s: join event %+v", n.cfg.NodeName, ev)
			}
		}
	}
	// The first event a member reports is its own join.
	for _, n := range nodes {
		n.rec.mu.Lock()
		first := n.rec.events[0]
		n.rec.mu.Unlock()
		if first.Kind != EventJoin || first.Member.Name != n.cfg.NodeName {
			t.Errorf("%s: first event %v %s, want its own join", n.cfg.NodeName, first.Kind, first.Member.Name)
		}
	}
}

func TestJoinThroughNonFirstSeed(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	fourth := startNode(t, testConfig(t, 4, nodes[2].LocalAddr()))
	for _, n := range append(nodes, fourth) {
		waitMembers(t, n, 10*time.Second, 1, 2, 3, 4)
	}
	nodes[0].rec.wait(t, 5*time.Second, EventJoin, "broker-4")
}

func TestGracefulLeave(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	leaver := nodes[2]
	if err := leaver.Leave(2 * time.Second); err != nil {
		t.Fatalf("leave: %v", err)
	}
	for _, n := range nodes[:2] {
		ev := n.rec.wait(t, 5*time.Second, EventLeave, "broker-3")
		if ev.Member.State != StateLeft || ev.Member.Meta.BrokerID != 3 {
			t.Errorf("%s: leave event %+v", n.cfg.NodeName, ev)
		}
		waitMembers(t, n, 5*time.Second, 1, 2)
		if _, failed := n.rec.find(EventFail, "broker-3"); failed {
			t.Errorf("%s: saw a fail event for a graceful leave", n.cfg.NodeName)
		}
		// A member that left is not one to reconnect to.
		if failed, _ := n.delegate.failedSince(time.Time{}); len(failed) != 0 {
			t.Errorf("%s: remembers %v as failed after a graceful leave", n.cfg.NodeName, failed)
		}
	}
	// A member that left may not re-announce itself, and Leave is idempotent.
	if err := leaver.UpdateMeta(testMeta(3)); !errors.Is(err, ErrLeft) {
		t.Errorf("UpdateMeta after Leave: %v, want ErrLeft", err)
	}
	if err := leaver.Leave(time.Second); err != nil {
		t.Errorf("second Leave: %v", err)
	}
	if err := leaver.Close(); err != nil {
		t.Fatalf("close after leave: %v", err)
	}
	if err := leaver.Leave(time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("Leave after Close: %v, want ErrClosed", err)
	}
}

func TestFailureDetection(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	start := time.Now()
	crash(t, nodes[2])
	for _, n := range nodes[:2] {
		ev := n.rec.wait(t, 15*time.Second, EventFail, "broker-3")
		if ev.Member.State != StateDead {
			t.Errorf("%s: fail event %+v", n.cfg.NodeName, ev)
		}
		t.Logf("%s declared broker-3 dead %v after the crash (fast profile)", n.cfg.NodeName, time.Since(start).Round(time.Millisecond))
		waitMembers(t, n, time.Second, 1, 2)
		if _, left := n.rec.find(EventLeave, "broker-3"); left {
			t.Errorf("%s: saw a leave event for a crash", n.cfg.NodeName)
		}
		// A member that failed is one to reconnect to, at its address.
		failed, _ := n.delegate.failedSince(time.Time{})
		if len(failed) != 1 || failed[0].Name != "broker-3" || failed[0].Addr != nodes[2].LocalAddr() {
			t.Errorf("%s: remembers %+v as failed, want broker-3 at %s", n.cfg.NodeName, failed, nodes[2].LocalAddr())
		}
	}
}

func TestUpdateMeta(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	m := testMeta(2)
	m.GRPCAddr = "127.0.0.1:18002"
	m.Version = "test-2"
	if err := nodes[1].UpdateMeta(m); err != nil {
		t.Fatalf("UpdateMeta: %v", err)
	}
	for _, n := range nodes {
		ev := n.rec.wait(t, 5*time.Second, EventUpdate, "broker-2")
		if ev.Member.Meta != m {
			t.Errorf("%s: update event meta %+v, want %+v", n.cfg.NodeName, ev.Member.Meta, m)
		}
		testutil.WaitFor(t, time.Second, n.cfg.NodeName+" Members() to show the new meta", func() bool {
			return n.Members()[1].Meta == m
		})
	}
	// A Meta that does not fit changes nothing.
	big := m
	big.Rack = strings.Repeat("r", MetaMaxSize)
	if err := nodes[1].UpdateMeta(big); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("oversized UpdateMeta: %v, want ErrMetaTooLarge", err)
	}
	if got := nodes[1].Members()[1].Meta; got != m {
		t.Fatalf("meta after refused update: %+v", got)
	}
	if err := nodes[1].Close(); err != nil {
		t.Fatal(err)
	}
	if err := nodes[1].UpdateMeta(m); !errors.Is(err, ErrClosed) {
		t.Fatalf("UpdateMeta after Close: %v, want ErrClosed", err)
	}
}

func TestEncryption(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{0x5a}, 32)
	secure := func(id int32, k []byte, seeds ...string) Config {
		c := testConfig(t, id, seeds...)
		c.SecretKey = k
		return c
	}
	first := startNode(t, secure(1, key))
	second := startNode(t, secure(2, key, first.LocalAddr()))
	waitMembers(t, first, 10*time.Second, 1, 2)
	waitMembers(t, second, 10*time.Second, 1, 2)

	// What actually happens to a member with another key, or none: Start
	// succeeds, every join attempt fails (the seed cannot decrypt its state
	// exchange, or refuses it unencrypted), and it retries in the background
	// without ever seeing anyone, nor anyone it.
	outsiders := []*node{
		startNode(t, secure(3, bytes.Repeat([]byte{0xa5}, 32), first.LocalAddr())),
		startNode(t, secure(4, nil, first.LocalAddr())),
	}
	for _, o := range outsiders {
		testutil.WaitFor(t, 10*time.Second, o.cfg.NodeName+" to fail several join attempts", func() bool {
			return o.joinAttempts.Load() >= 3
		})
		if o.joined.Load() {
			t.Errorf("%s joined with the wrong key", o.cfg.NodeName)
		}
		waitMembers(t, o, 0, o.cfg.Meta.BrokerID)
	}
	waitMembers(t, first, 0, 1, 2)
	waitMembers(t, second, 0, 1, 2)
}

func TestJoinRetryUntilSeedStarts(t *testing.T) {
	t.Parallel()
	seedAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	early := startNode(t, testConfig(t, 2, seedAddr))
	testutil.WaitFor(t, 10*time.Second, "join attempts against a missing seed", func() bool {
		return early.joinAttempts.Load() >= 2
	})
	if early.joined.Load() {
		t.Fatal("joined a seed that does not exist")
	}

	cfg := testConfig(t, 1)
	cfg.Bind = seedAddr
	seed := startNode(t, cfg)
	waitMembers(t, early, 10*time.Second, 1, 2)
	waitMembers(t, seed, 10*time.Second, 1, 2)
	if !early.joined.Load() {
		t.Fatal("members merged but the join loop did not report success")
	}
	t.Logf("joined after %d attempts", early.joinAttempts.Load())
}

// A member that reads none of its events while the cluster changes still
// gets all of them, in order, once it reads; Members() meanwhile is current.
func TestSlowReaderSeesEveryChange(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 1)
	g, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	// Not recorded: nobody reads g.Events() until the end.
	slow := &node{Gossip: g}

	others := []*node{
		startNode(t, testConfig(t, 2, g.LocalAddr())),
		startNode(t, testConfig(t, 3, g.LocalAddr())),
		startNode(t, testConfig(t, 4, g.LocalAddr())),
	}
	// Every member, not only the slow one, must know all others before one
	// leaves: a member that leaves while its own join is still in flight
	// has no one to tell, and the others see it fail.
	for _, n := range append(others, slow) {
		waitMembers(t, n, 10*time.Second, 1, 2, 3, 4)
	}
	m3 := testMeta(3)
	m3.Version = "test-3"
	if err := others[1].UpdateMeta(m3); err != nil {
		t.Fatal(err)
	}
	if err := others[2].Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, slow, 10*time.Second, 1, 2, 3)
	testutil.WaitFor(t, 5*time.Second, "Members() to show broker 3's new meta", func() bool {
		return slow.Members()[2].Meta == m3
	})

	want := []string{"join:broker-1", "join:broker-2", "join:broker-3", "join:broker-4", "update:broker-3", "leave:broker-4"}
	var got []string
	deadline := time.After(5 * time.Second)
	for len(got) < len(want) {
		select {
		case ev := <-g.Events():
			got = append(got, ev.Kind.String()+":"+ev.Member.Name)
		case <-deadline:
			t.Fatalf("got %v, want (in some order) %v", got, want)
		}
	}
	// The joins of broker 2..4 may interleave; what matters is that each
	// member's own changes come in the order they happened.
	pos := map[string]int{}
	for i, s := range got {
		pos[s] = i
	}
	for _, s := range want {
		if _, ok := pos[s]; !ok {
			t.Fatalf("missing %s in %v", s, got)
		}
	}
	if pos["join:broker-1"] != 0 || pos["join:broker-3"] > pos["update:broker-3"] || pos["join:broker-4"] > pos["leave:broker-4"] {
		t.Fatalf("events out of order: %v", got)
	}
}

func TestCloseIsIdempotentAndClosesEvents(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t, 1))
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// Ranging over Events() ends: the recorder's goroutine drains and exits.
	timeout := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-n.Events():
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("Events() not closed by Close")
		}
	}
}

// Not parallel: it counts the process's goroutines.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	nodes := startCluster(t, 3)
	crash(t, nodes[2]) // a crashed member must clean up too
	for _, n := range nodes {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// memberlist's stream handlers and timers finish on their own shortly
	// after Shutdown; wait for them rather than assume.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines before, %d after Close:\n%s", before, runtime.NumGoroutine(), buf)
		}
		<-time.After(20 * time.Millisecond)
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t, 1))
	cfg := testConfig(t, 2)
	cfg.Bind = n.LocalAddr()
	if g, err := Start(cfg); err == nil {
		g.Close()
		t.Fatal("Start on a bound address succeeded")
	} else if !strings.HasPrefix(err.Error(), "gossip: ") {
		t.Fatalf("error %q lacks the package prefix", err)
	}
}

// A seed list naming this member itself (as one shared list for every broker
// does) must not count as joining.
func TestOwnAddressIsNotASeed(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, 1)
	cfg.Bind = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg.Join = []string{cfg.Bind}
	n := startNode(t, cfg)
	if got := n.seeds(); len(got) != 0 {
		t.Fatalf("seeds %v, want none", got)
	}
	if n.joinAttempts.Load() != 0 {
		t.Fatal("join loop ran with only its own address as seed")
	}
}
