package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// These tests make the group coordinator stop answering, as a paused
// controller does (SIGSTOP: its connections stay open and nothing comes
// back), and check that a member neither waits on it for its request
// timeout nor goes on reading past its session.

// blackHole returns a loopback address that accepts connections and never
// answers on them: what a paused broker looks like from outside.
func blackHole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// coordinatorGate holds every group call (heartbeats, commits) while it is
// closed, as a coordinator that stopped answering would, until the call's
// context ends. Fetches and everything else go through.
type coordinatorGate struct {
	closed atomic.Bool
	held   atomic.Int32
}

func isGroupCall(method string) bool {
	return strings.HasPrefix(method, "/strata.v1.GroupService/") || method == stratav1.OffsetService_CommitOffsets_FullMethodName
}

func (g *coordinatorGate) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if g.closed.Load() && isGroupCall(method) {
		g.held.Add(1)
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// New asks the next bootstrap broker when the first does not answer,
// instead of waiting for it for the request timeout.
func TestNewWithAPausedFirstBootstrapBroker(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	c, err := client.New(ctx, []string{blackHole(t), tb.cfg.Listen})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Logf("figure: New with a paused first bootstrap broker returned after %v", took.Round(time.Millisecond))
	// The request timeout is 30 s; the slack is for a busy machine.
	if took > 3*time.Second {
		t.Errorf("New took %v with the first bootstrap broker paused", took)
	}
}

// groupSetup is a broker with a topic that a producer writes all along,
// and a client whose group calls go through a gate.
type groupSetup struct {
	tb       *testBroker
	admin    *client.Client
	c        *client.Client
	gate     *coordinatorGate
	produced atomic.Int64
}

func newGroupSetup(t *testing.T, ctx context.Context, topic string, parts int32) *groupSetup {
	t.Helper()
	s := &groupSetup{tb: startBroker(t), gate: &coordinatorGate{}}
	var err error
	if s.admin, err = client.New(ctx, []string{s.tb.cfg.Listen}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.admin.Close() })
	if _, err := s.admin.CreateTopic(ctx, topic, parts, 1, nil); err != nil {
		t.Fatal(err)
	}
	// The default request timeout (30 s): the member's own bounds, not
	// that one, must end its calls to a silent coordinator.
	if s.c, err = client.New(ctx, []string{s.tb.cfg.Listen}, client.WithDialOptions(grpc.WithUnaryInterceptor(s.gate.intercept))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.c.Close() })
	p := s.admin.NewProducer(client.WithLinger(0))
	pctx, pcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; pctx.Err() == nil; i++ {
			recs := make([]*client.Record, parts)
			for part := range parts {
				recs[part] = &client.Record{Topic: topic, Partition: part, Value: fmt.Appendf(nil, "v%d", i)}
			}
			if p.ProduceSync(pctx, recs...) != nil {
				return
			}
			s.produced.Add(1)
			select {
			case <-pctx.Done():
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { pcancel(); <-done; p.Close() })
	return s
}

// A member cut off from its coordinator for longer than its session
// timeout stops its partitions (OnLost) and returns nothing more of them,
// as the coordinator has removed it by then and may have given them to
// others, although its heartbeat would otherwise still be waiting.
func TestGroupMemberCutOffStopsAtItsSessionTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := newGroupSetup(t, ctx, "t", 2)
	const session = 2 * time.Second
	var lostAt atomic.Pointer[time.Time]
	g, err := s.c.NewGroupConsumer("g", []string{"t"}, client.WithSessionTimeout(session),
		client.WithOnLost(func(context.Context, []client.TopicPartition) { now := time.Now(); lostAt.Store(&now) }))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	var mu sync.Mutex
	var delivered []time.Time
	pctx, pcancel := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pctx.Err() == nil {
			recs, _ := g.Poll(pctx)
			if len(recs) > 0 {
				mu.Lock()
				delivered = append(delivered, time.Now())
				mu.Unlock()
			}
		}
	}()
	defer func() { pcancel(); <-polled }()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered)
	}
	testutil.WaitFor(t, 20*time.Second, "the member reads", func() bool { return len(g.Assignment()) == 2 && count() > 20 })

	cutAt := time.Now()
	s.gate.closed.Store(true)
	testutil.Eventually(t, session+5*time.Second, "the cut-off member to lose its partitions", func() error {
		if lostAt.Load() == nil {
			return fmt.Errorf("the member, cut off from its coordinator %v ago with a %v session timeout, still owns %v", time.Since(cutAt).Round(time.Millisecond), session, g.Assignment())
		}
		return nil
	})
	lost := *lostAt.Load()
	t.Logf("figure: member cut off from its coordinator (session timeout %v): stopped its partitions after %v", session, lost.Sub(cutAt).Round(time.Millisecond))
	// Its session counts from the last heartbeat it sent that was
	// answered, before the cut; the slack is for a busy machine.
	if d := lost.Sub(cutAt); d > session+2*time.Second {
		t.Errorf("lost its partitions %v after it was cut off, beyond its %v session", d, session)
	}
	// Nothing more is delivered, while the producer goes on writing.
	from := s.produced.Load()
	testutil.WaitFor(t, 20*time.Second, "the producer writes on", func() bool { return s.produced.Load() > from+50 })
	mu.Lock()
	for _, at := range delivered {
		if at.After(lost.Add(100 * time.Millisecond)) {
			t.Errorf("records delivered %v after the member lost its partitions", at.Sub(lost))
			break
		}
	}
	mu.Unlock()
	if a := g.Assignment(); len(a) != 0 {
		t.Errorf("still owns %v", a)
	}
}

// Close returns within its bound when the coordinator does not answer:
// it gives up committing and leaving, and the coordinator removes the
// member when its session expires.
func TestGroupConsumerCloseWhileTheCoordinatorIsSilent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := newGroupSetup(t, ctx, "t", 2)
	const session = 3 * time.Second
	g, err := s.c.NewGroupConsumer("g", []string{"t"}, client.WithSessionTimeout(session))
	if err != nil {
		t.Fatal(err)
	}
	for len(g.Assignment()) < 2 {
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		g.Poll(pctx)
		pcancel()
		if ctx.Err() != nil {
			t.Fatal("the member was never given the partitions")
		}
	}
	s.gate.closed.Store(true)
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- g.Close(context.Background()) }()
	// The bound is three quarters of the session; the slack is for a busy
	// machine.
	select {
	case err = <-closed:
	case <-time.After(session + 2*time.Second):
		t.Fatalf("Close still running %v after it was called, with the coordinator silent", time.Since(start).Round(time.Millisecond))
	}
	took := time.Since(start)
	t.Logf("figure: Close with the coordinator silent (session timeout %v) returned after %v: %v", session, took.Round(time.Millisecond), err)
	if !errors.Is(err, client.ErrCommitOutcomeUnknown) {
		t.Errorf("Close: %v; want the commit's outcome unknown", err)
	}
}

// commitTap loses the answer to the next commit once armed: the broker
// applies it, meanwhile runs, and the client hears that the connection
// broke.
type commitTap struct {
	armed     atomic.Bool
	meanwhile func()
}

func (c *commitTap) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if method == stratav1.OffsetService_CommitOffsets_FullMethodName && err == nil && c.armed.CompareAndSwap(true, false) {
		c.meanwhile()
		return status.Error(codes.Unavailable, "test: the connection broke before the answer")
	}
	return err
}

// A commit whose answer was lost, and whose retry the coordinator refuses
// as from an unknown member (here: removed meanwhile; in life: a new
// controller that never knew it), was applied all the same: it is
// reported as of unknown outcome, never as refused. A commit refused at
// its first attempt is a refusal.
func TestGroupCommitWithALostAnswerIsNotReportedRefused(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := client.New(ctx, []string{tb.cfg.Listen})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, topic := range []string{"t", "u"} {
		if _, err := admin.CreateTopic(ctx, topic, 2, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	tap := &commitTap{}
	c, err := client.New(ctx, []string{tb.cfg.Listen}, client.WithDialOptions(grpc.WithUnaryInterceptor(tap.intercept)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := c.NewGroupConsumer("g", []string{"t"}, client.WithAutoCommitInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	for len(g.Assignment()) < 2 {
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		g.Poll(pctx)
		pcancel()
		if ctx.Err() != nil {
			t.Fatal("the member was never given the partitions")
		}
	}
	tp0 := client.TopicPartition{Topic: "t", Partition: 0}
	tp1 := client.TopicPartition{Topic: "t", Partition: 1}
	tap.meanwhile = func() {
		// Remove the member (force), setting only the other partition.
		if _, err := admin.ResetGroupOffsets(ctx, "g", map[client.TopicPartition]int64{tp1: 3}, true); err != nil {
			t.Error(err)
		}
	}
	tap.armed.Store(true)
	err = g.CommitOffsets(ctx, map[client.TopicPartition]int64{tp0: 7})
	if !errors.Is(err, client.ErrCommitOutcomeUnknown) || errors.Is(err, client.ErrUnknownMember) {
		t.Errorf("commit whose answer was lost, retry refused: %v; want ErrCommitOutcomeUnknown and not ErrUnknownMember", err)
	}
	t.Logf("the error: %v", err)
	offs, ferr := admin.FetchOffsets(ctx, "g")
	if ferr != nil {
		t.Fatal(ferr)
	}
	if offs[tp0] != 7 {
		t.Fatalf("committed %v; the commit was applied, so %s is at 7", offs, tp0)
	}

	// Refused at its first attempt: a partition the member does not own.
	testutil.WaitFor(t, 20*time.Second, "the member joins again", func() bool { return len(g.Assignment()) == 2 || pollOnce(ctx, g) })
	err = g.CommitOffsets(ctx, map[client.TopicPartition]int64{{Topic: "u", Partition: 0}: 1})
	if !errors.Is(err, client.ErrFencedMember) || errors.Is(err, client.ErrCommitOutcomeUnknown) {
		t.Errorf("commit refused at its first attempt: %v; want the refusal (FENCED_MEMBER)", err)
	}
}

// pollOnce polls briefly, so that the member carries out a handover; it
// reports false, for use inside a wait.
func pollOnce(ctx context.Context, g *client.GroupConsumer) bool {
	pctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	g.Poll(pctx)
	return false
}
