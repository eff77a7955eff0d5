package client_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/testutil"
)

// ownership records, from the members' own callbacks, who owns each
// partition, and every moment two members owned one at once.
type ownership struct {
	mu         sync.Mutex
	owner      map[client.TopicPartition]string
	violations []string
	log        []string
	assigned   map[string]time.Time // member -> last time it was given partitions
}

func newOwnership() *ownership {
	return &ownership{owner: map[client.TopicPartition]string{}, assigned: map[string]time.Time{}}
}

func (o *ownership) assign(member string, tps []client.TopicPartition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, tp := range tps {
		if cur, ok := o.owner[tp]; ok && cur != member {
			o.violations = append(o.violations, fmt.Sprintf("%s given to %s while %s owns it", tp, member, cur))
		}
		o.owner[tp] = member
	}
	o.assigned[member] = time.Now()
	o.log = append(o.log, fmt.Sprintf("%s +%v", member, tps))
}

func (o *ownership) release(member, how string, tps []client.TopicPartition) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, tp := range tps {
		if o.owner[tp] == member {
			delete(o.owner, tp)
		}
	}
	o.log = append(o.log, fmt.Sprintf("%s %s%v", member, how, tps))
}

// releaseAll ends every ownership of a member that died.
func (o *ownership) releaseAll(member string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for tp, m := range o.owner {
		if m == member {
			delete(o.owner, tp)
		}
	}
	o.log = append(o.log, member+" killed")
}

func (o *ownership) counts() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int{}
	for _, m := range o.owner {
		out[m]++
	}
	return out
}

// member runs one GroupConsumer on its own client, polling until stopped.
// kill makes it die as a process would: every call fails from then on, and
// it never closes.
type member struct {
	name   string
	g      *client.GroupConsumer
	dead   atomic.Bool
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	seen     map[client.TopicPartition][]int64 // offsets consumed
	times    []time.Time                       // when Poll returned records
	revoked  []client.TopicPartition
	pollErrs []error
}

func startMember(t *testing.T, addr, group, topic, name string, own *ownership, opts ...client.GroupOption) *member {
	t.Helper()
	m := &member{name: name, done: make(chan struct{}), seen: map[client.TopicPartition][]int64{}}
	deadErr := status.Error(codes.Unavailable, "test: the member's process is dead")
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
		if m.dead.Load() {
			return deadErr
		}
		return invoker(ctx, method, req, reply, cc, o...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, o ...grpc.CallOption) (grpc.ClientStream, error) {
		if m.dead.Load() {
			return nil, deadErr
		}
		return streamer(ctx, desc, cc, method, o...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	c, err := client.New(ctx, []string{addr}, client.WithDialOptions(grpc.WithUnaryInterceptor(unary), grpc.WithStreamInterceptor(stream)),
		client.WithRequestTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	opts = append([]client.GroupOption{
		client.WithSessionTimeout(3 * time.Second),
		client.WithAutoCommitInterval(200 * time.Millisecond),
		client.WithGroupClientID(name),
		client.WithOnAssigned(func(_ context.Context, tps []client.TopicPartition) { own.assign(name, tps) }),
		client.WithOnRevoked(func(_ context.Context, tps []client.TopicPartition) {
			// Finishing the work on them takes a while (this is the work,
			// not a wait): the member owns the partitions until this
			// returns, so a grant to another member before then shows.
			time.Sleep(100 * time.Millisecond)
			own.release(name, "-", tps)
			m.mu.Lock()
			m.revoked = append(m.revoked, tps...)
			m.mu.Unlock()
		}),
		client.WithOnLost(func(_ context.Context, tps []client.TopicPartition) { own.release(name, "lost", tps) }),
	}, opts...)
	m.g, err = c.NewGroupConsumer(group, []string{topic}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil && !m.dead.Load() {
			recs, err := m.g.Poll(ctx)
			if m.dead.Load() {
				return // a dead process returns nothing more
			}
			m.mu.Lock()
			if err != nil && ctx.Err() == nil {
				m.pollErrs = append(m.pollErrs, err)
			}
			if len(recs) > 0 {
				m.times = append(m.times, time.Now())
			}
			for _, r := range recs {
				tp := client.TopicPartition{Topic: r.Topic, Partition: r.Partition}
				m.seen[tp] = append(m.seen[tp], r.Offset)
			}
			m.mu.Unlock()
		}
	}()
	return m
}

func (m *member) kill(own *ownership) {
	m.dead.Store(true)
	own.releaseAll(m.name)
	m.cancel()
	<-m.done
}

func (m *member) close(t *testing.T) {
	m.cancel()
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.g.Close(ctx); err != nil {
		t.Errorf("%s: close: %v", m.name, err)
	}
}

// longestGap is the longest time, within [from, to], between two Polls of
// the member that returned records.
func (m *member) longestGap(from, to time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	last, gap := from, time.Duration(0)
	for _, at := range m.times {
		if at.Before(from) || at.After(to) {
			continue
		}
		gap = max(gap, at.Sub(last))
		last = at
	}
	return max(gap, to.Sub(last))
}

// Three members share a topic while it is written; one is killed. Its
// partitions move to the others within the session timeout, the others
// keep consuming (and keep their own partitions) throughout, no two
// members ever own a partition at once, and every record is consumed.
func TestGroupMembersShareAndSurviveADeath(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{tb.cfg.Listen})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const topic, group, parts = "shared", "workers", 6
	if _, err := c.CreateTopic(ctx, topic, parts, 1, nil); err != nil {
		t.Fatal(err)
	}

	// A producer writes to every partition until told to stop.
	p := c.NewProducer(client.WithLinger(0))
	defer p.Close()
	stopProducing := make(chan struct{})
	produced := make(chan int64, 1)
	go func() {
		var n int64
		defer func() { produced <- n }()
		tick := time.NewTicker(2 * time.Millisecond) // a batch over every partition per tick
		defer tick.Stop()
		for {
			select {
			case <-stopProducing:
				return
			case <-tick.C:
			}
			recs := make([]*client.Record, parts)
			for i := range recs {
				recs[i] = &client.Record{Topic: topic, Partition: int32(i), Value: fmt.Appendf(nil, "v%d", n)}
			}
			if err := p.ProduceSync(ctx, recs...); err != nil {
				t.Error(err)
				return
			}
			n++
		}
	}()

	own := newOwnership()
	a := startMember(t, tb.cfg.Listen, group, topic, "a", own)
	testutil.WaitFor(t, 20*time.Second, "a owns every partition", func() bool { return own.counts()["a"] == parts })
	b := startMember(t, tb.cfg.Listen, group, topic, "b", own)
	joinStart := time.Now()
	cm := startMember(t, tb.cfg.Listen, group, topic, "c", own)
	balanced := func() bool {
		n := own.counts()
		return n["a"] == 2 && n["b"] == 2 && n["c"] == 2
	}
	testutil.WaitFor(t, 20*time.Second, "three members with two partitions each", balanced)
	t.Logf("figure: two members joining a member of 6 partitions: balanced after %v", time.Since(joinStart).Round(time.Millisecond))

	before := map[string][]client.TopicPartition{"a": a.g.Assignment(), "c": cm.g.Assignment()}
	killedAt := time.Now()
	b.kill(own)
	testutil.WaitFor(t, 20*time.Second, "b's partitions move to a and c", func() bool {
		n := own.counts()
		return n["a"]+n["c"] == parts
	})
	movedAt := time.Now()
	moved := movedAt.Sub(killedAt)
	t.Logf("figure: a member killed (session timeout 3s): its partitions owned again after %v", moved.Round(time.Millisecond))
	// Slack for a busy machine's late timers, not for the protocol.
	if moved > 3*time.Second+5*time.Second {
		t.Errorf("b's partitions moved %v after it died, far beyond its 3s session timeout", moved)
	}
	// Cooperative: a and c kept what they had and kept consuming.
	for name, m := range map[string]*member{"a": a, "c": cm} {
		m.mu.Lock()
		for _, tp := range before[name] {
			if slices.Contains(m.revoked, tp) {
				t.Errorf("%s gave up %s during the move; it should only have gained", name, tp)
			}
		}
		m.mu.Unlock()
		if gap := m.longestGap(killedAt, movedAt); gap > 2*time.Second {
			t.Errorf("%s went %v without records while b's partitions moved", name, gap)
		}
	}

	close(stopProducing)
	n := <-produced
	// Every record of every partition is consumed by a or c (or by b
	// before it died).
	consumedAll := func() bool {
		for i := range int32(parts) {
			tp := client.TopicPartition{Topic: topic, Partition: i}
			have := map[int64]bool{}
			for _, m := range []*member{a, b, cm} {
				m.mu.Lock()
				for _, off := range m.seen[tp] {
					have[off] = true
				}
				m.mu.Unlock()
			}
			for off := range n {
				if !have[off] {
					return false
				}
			}
		}
		return true
	}
	testutil.WaitFor(t, 20*time.Second, "every record consumed", consumedAll)
	a.close(t)
	cm.close(t)
	own.mu.Lock()
	defer own.mu.Unlock()
	if len(own.violations) > 0 {
		t.Fatalf("two members owned a partition at once: %v\nlog: %v", own.violations, own.log)
	}
	for _, m := range []*member{a, cm} {
		if len(m.pollErrs) > 0 {
			t.Errorf("%s: poll errors %v", m.name, m.pollErrs)
		}
	}
}

// A member that closes commits and leaves: a new member of the group
// starts where it stopped, with nothing read twice.
func TestGroupConsumerCloseCommitsAndLeaves(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{tb.cfg.Listen})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "t", 2, 1, nil); err != nil {
		t.Fatal(err)
	}
	p := c.NewProducer(client.WithLinger(0))
	defer p.Close()
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := p.ProduceSync(ctx, &client.Record{Topic: "t", Partition: int32(i % 2), Value: fmt.Appendf(nil, "%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 40)
	own := newOwnership()
	m1 := startMember(t, tb.cfg.Listen, "g", "t", "m1", own)
	total := func(m *member) int {
		m.mu.Lock()
		defer m.mu.Unlock()
		n := 0
		for _, offs := range m.seen {
			n += len(offs)
		}
		return n
	}
	testutil.WaitFor(t, 20*time.Second, "m1 reads 40 records", func() bool { return total(m1) == 40 })
	m1.close(t)
	if d, err := c.DescribeGroup(ctx, "g"); err != nil || len(d.GetMembers()) != 0 || d.GetState() != "empty" {
		t.Fatalf("after close: %v %v", d, err)
	}
	produce(40, 60)
	m2 := startMember(t, tb.cfg.Listen, "g", "t", "m2", own)
	testutil.WaitFor(t, 20*time.Second, "m2 reads the 20 new records", func() bool { return total(m2) == 20 })
	m2.mu.Lock()
	for tp, offs := range m2.seen {
		if offs[0] != 20 {
			t.Errorf("m2 started %s at %d, want 20 (m1's commit)", tp, offs[0])
		}
	}
	m2.mu.Unlock()
	m2.close(t)
}

// Close returns even when the member learns at that moment that it was
// removed from the group (a forced reset here), which makes its heartbeat
// loop hand the partitions in as lost while Close is stopping it.
func TestGroupConsumerCloseWhileRemoved(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{tb.cfg.Listen})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "t", 2, 1, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		group := fmt.Sprintf("g%d", i)
		g, err := c.NewGroupConsumer(group, []string{"t"})
		if err != nil {
			t.Fatal(err)
		}
		polled := make(chan struct{})
		go func() {
			defer close(polled)
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer pcancel()
			g.Poll(pctx) // takes the partitions in
		}()
		<-polled
		testutil.WaitFor(t, 20*time.Second, "the member owns the partitions", func() bool { return len(g.Assignment()) == 2 })
		done := make(chan error, 1)
		go func() {
			_, err := c.ResetGroupOffsets(ctx, group, map[client.TopicPartition]int64{{Topic: "t", Partition: 0}: 0}, true)
			done <- err
		}()
		closed := make(chan error, 1)
		go func() { closed <- g.Close(ctx) }()
		select {
		case <-closed:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: Close did not return", i)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// A member asked to give a partition up commits it first (auto-commit on
// revoke, with no interval commit due): the new owner starts exactly where
// the old one stopped.
func TestGroupConsumerCommitsOnRevoke(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{tb.cfg.Listen})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "t", 2, 1, nil); err != nil {
		t.Fatal(err)
	}
	p := c.NewProducer(client.WithLinger(0))
	defer p.Close()
	for i := range 40 {
		if err := p.ProduceSync(ctx, &client.Record{Topic: "t", Partition: int32(i % 2), Value: fmt.Appendf(nil, "%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	noInterval := client.WithAutoCommitInterval(time.Hour) // only revocations and Close commit
	a, err := c.NewGroupConsumer("g", []string{"t"}, noInterval)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	read := 0
	for read < 40 {
		recs, err := a.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		read += len(recs)
	}
	b, err := c.NewGroupConsumer("g", []string{"t"}, noInterval)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	// a's Poll carries out the revocation; b's takes the partition in.
	for len(a.Assignment()) != 1 || len(b.Assignment()) != 1 {
		for _, m := range []*client.GroupConsumer{a, b} {
			pctx, pcancel := context.WithTimeout(ctx, 20*time.Millisecond)
			m.Poll(pctx)
			pcancel()
		}
		if ctx.Err() != nil {
			t.Fatal("the partitions were not shared")
		}
	}
	moved := b.Assignment()[0]
	committed, err := c.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if committed[moved] != 20 {
		t.Fatalf("%s committed at %d when a gave it up, want 20 (all it had read)", moved, committed[moved])
	}
	if pos := b.Position(moved.Topic, moved.Partition); pos != 20 {
		t.Fatalf("b starts %s at %d, want 20", moved, pos)
	}
}
