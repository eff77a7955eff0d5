package gossip

import (
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
)

// testWriter sends log output to t.Log until the test's cleanup ends.
// memberlist goroutines that are still winding down after that are silenced,
// since t.Log after a test completes panics.
type testWriter struct {
	t       *testing.T
	mu      sync.Mutex
	stopped bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// testLogger logs at info, or at debug when GOSSIP_TEST_DEBUG is set. Call it
// before starting nodes so its cleanup runs after theirs.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.stopped = true
	})
	level := slog.LevelInfo
	if os.Getenv("GOSSIP_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// testMeta gives broker id distinct, recognisable addresses.
func testMeta(id int32) Meta {
	return Meta{
		BrokerID:  id,
		GRPCAddr:  fmt.Sprintf("127.0.0.1:%d", 19000+id),
		RaftAddr:  fmt.Sprintf("127.0.0.1:%d", 29000+id),
		AdminAddr: fmt.Sprintf("127.0.0.1:%d", 39000+id),
		Rack:      fmt.Sprintf("rack-%d", id%2),
		Version:   "test",
	}
}

// testConfig is a loopback member with the fast failure-detection profile.
func testConfig(t *testing.T, id int32, seeds ...string) Config {
	return Config{
		Bind:             "127.0.0.1:0",
		Join:             seeds,
		Meta:             testMeta(id),
		Logger:           testLogger(t),
		Timing:           FastFailureDetection(),
		JoinRetryMin:     50 * time.Millisecond,
		JoinRetryMax:     400 * time.Millisecond,
		LeaveTimeout:     2 * time.Second,
		BroadcastTimeout: 2 * time.Second,
	}
}

// node is a started member whose events are recorded from the start.
type node struct {
	*Gossip
	rec *recorder
}

// startNode starts cfg and closes it when the test ends.
func startNode(t *testing.T, cfg Config) *node {
	t.Helper()
	g, err := Start(cfg)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.NodeName, err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("close %s: %v", g.cfg.NodeName, err)
		}
	})
	return &node{Gossip: g, rec: record(g)}
}

// startCluster starts n members with broker ids 1..n; all but the first join
// through the first only. It returns once every member sees all n.
func startCluster(t *testing.T, n int) []*node {
	t.Helper()
	first := startNode(t, testConfig(t, 1))
	nodes := []*node{first}
	for id := 2; id <= n; id++ {
		nodes = append(nodes, startNode(t, testConfig(t, int32(id), first.LocalAddr())))
	}
	for _, nd := range nodes {
		waitMembers(t, nd, 10*time.Second, ids(1, n)...)
	}
	return nodes
}

func ids(from, to int) []int32 {
	var out []int32
	for i := from; i <= to; i++ {
		out = append(out, int32(i))
	}
	return out
}

// crash stops n the way a killed process stops: memberlist shuts down
// without a leave broadcast. shutdown(false) then ends our goroutines.
func crash(t *testing.T, n *node) {
	t.Helper()
	if err := n.ml.Shutdown(); err != nil {
		t.Fatalf("memberlist shutdown: %v", err)
	}
	if err := n.shutdown(false); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

// brokerIDs returns the ids in g.Members(), in the order given.
func brokerIDs(g *Gossip) []int32 {
	var out []int32
	for _, m := range g.Members() {
		out = append(out, m.Meta.BrokerID)
	}
	return out
}

// waitMembers waits until g's Members() are exactly the brokers want, each
// with the Meta testMeta gives it.
func waitMembers(t *testing.T, n *node, timeout time.Duration, want ...int32) {
	t.Helper()
	testutil.WaitFor(t, timeout, fmt.Sprintf("%s to see brokers %v (sees %v)", n.cfg.NodeName, want, brokerIDs(n.Gossip)), func() bool {
		got := n.Members()
		if len(got) != len(want) {
			return false
		}
		for i, m := range got {
			if m.Meta.BrokerID != want[i] || m.State != StateAlive || m.Name != fmt.Sprintf("broker-%d", want[i]) {
				return false
			}
		}
		return true
	})
}

// recorder collects a member's events as they arrive, so tests can wait for
// several events in any order.
type recorder struct {
	mu     sync.Mutex
	events []Event
	kick   chan struct{}
}

// record reads g.Events() until Close closes the channel.
func record(g *Gossip) *recorder {
	r := &recorder{kick: make(chan struct{}, 1)}
	go func() {
		for ev := range g.Events() {
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
			select {
			case r.kick <- struct{}{}:
			default:
			}
		}
	}()
	return r
}

// find returns the first recorded event that matches.
func (r *recorder) find(kind EventKind, name string) (Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		if ev.Kind == kind && ev.Member.Name == name {
			return ev, true
		}
	}
	return Event{}, false
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, ev := range r.events {
		fmt.Fprintf(&b, " %s:%s", ev.Kind, ev.Member.Name)
	}
	return b.String()
}

// wait returns the first event of kind about member name, waiting up to
// timeout for it.
func (r *recorder) wait(t *testing.T, timeout time.Duration, kind EventKind, name string) Event {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		if ev, ok := r.find(kind, name); ok {
			return ev
		}
		select {
		case <-r.kick:
		case <-timer.C:
			t.Fatalf("no %s event for %s within %v; got%s", kind, name, timeout, r)
		}
	}
}

// freePort returns a loopback port that was free for both TCP and UDP a
// moment ago. It comes from freeport, so no other address handed out in
// this test binary has it.
func freePort(t *testing.T) int {
	t.Helper()
	for range 20 {
		addr := freeport.Loopback(t)
		ul, err := net.ListenPacket("udp", addr)
		if err != nil {
			continue
		}
		ul.Close()
		return ul.LocalAddr().(*net.UDPAddr).Port
	}
	t.Fatal("no free port")
	return 0
}

// testNet joins in-process members through transports it can cut apart the
// way a firewall that drops packets cuts hosts apart: a datagram across a
// cut vanishes and a connection across it times out. Members on one side of
// a cut still reach each other. Cuts are enforced by the sender, and every
// cut is symmetric, so nothing crosses in either direction.
type testNet struct {
	mu  sync.Mutex
	cut map[[2]string]bool // both orders of every cut pair of addresses
}

func newTestNet() *testNet {
	return &testNet{cut: map[[2]string]bool{}}
}

// config is testConfig for a member on this network: memberlist's own
// transport, bound to a free loopback port, behind a cuttable wrapper.
func (tn *testNet) config(t *testing.T, id int32, seeds ...string) Config {
	t.Helper()
	cfg := testConfig(t, id, seeds...)
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{"127.0.0.1"},
		BindPort:  freePort(t),
		Logger:    log.New(logWriter{logger: cfg.Logger.With("component", "transport")}, "", 0),
	})
	if err != nil {
		t.Fatalf("transport for broker %d: %v", id, err)
	}
	self := fmt.Sprintf("127.0.0.1:%d", nt.GetAutoBindPort())
	cfg.Bind = self
	cfg.transport = &cuttableTransport{NetTransport: nt, net: tn, self: self}
	return cfg
}

// partition cuts every member of a off from every member of b.
func (tn *testNet) partition(a, b []*node) {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	for _, x := range a {
		for _, y := range b {
			tn.cut[[2]string{x.LocalAddr(), y.LocalAddr()}] = true
			tn.cut[[2]string{y.LocalAddr(), x.LocalAddr()}] = true
		}
	}
}

// heal removes every cut.
func (tn *testNet) heal() {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	clear(tn.cut)
}

func (tn *testNet) isCut(from, to string) bool {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return tn.cut[[2]string{from, to}]
}

// cuttableTransport is memberlist's NetTransport with sends to cut-off
// addresses dropped. The address variants are overridden too because
// NetTransport's own call its plain methods, not the wrapper's.
type cuttableTransport struct {
	*memberlist.NetTransport
	net  *testNet
	self string
}

var _ memberlist.NodeAwareTransport = (*cuttableTransport)(nil)

func (c *cuttableTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if c.net.isCut(c.self, addr) {
		return time.Now(), nil // sent, as far as the sender can tell
	}
	return c.NetTransport.WriteTo(b, addr)
}

func (c *cuttableTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return c.WriteTo(b, a.Addr)
}

func (c *cuttableTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if c.net.isCut(c.self, addr) {
		// A dropped SYN: the dial fails only when its timeout runs out.
		<-time.After(timeout)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	}
	return c.NetTransport.DialTimeout(addr, timeout)
}

func (c *cuttableTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return c.DialTimeout(a.Addr, timeout)
}

// count returns how many recorded events match.
func (r *recorder) count(kind EventKind, name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ev := range r.events {
		if ev.Kind == kind && ev.Member.Name == name {
			n++
		}
	}
	return n
}

// waitCount waits up to timeout until at least n events of kind about
// member name have been recorded.
func (r *recorder) waitCount(t *testing.T, timeout time.Duration, n int, kind EventKind, name string) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for r.count(kind, name) < n {
		select {
		case <-r.kick:
		case <-timer.C:
			t.Fatalf("fewer than %d %s events for %s within %v; got%s", n, kind, name, timeout, r)
		}
	}
}
