package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ledger records who owns each partition of a group, from the members'
// own rebalance callbacks, and every breach: a partition assigned to a
// member while another owns it, or a record consumed by a member that
// does not own its partition.
type ledger struct {
	mu       sync.Mutex
	owner    map[int32]string
	dead     map[string]bool
	breaches []string
	consumed map[string]int // value -> times consumed
	changed  chan struct{}
}

func newLedger() *ledger {
	return &ledger{owner: map[int32]string{}, dead: map[string]bool{}, consumed: map[string]int{}, changed: make(chan struct{})}
}

func (l *ledger) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *ledger) assigned(name string, ps []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead[name] {
		return
	}
	for _, p := range ps {
		if o, ok := l.owner[p]; ok && o != name {
			l.breaches = append(l.breaches, fmt.Sprintf("partition %d assigned to %s while %s owns it", p, name, o))
		}
		l.owner[p] = name
	}
	l.notifyLocked()
}

func (l *ledger) released(name string, ps []int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range ps {
		if l.owner[p] == name {
			delete(l.owner, p)
		}
	}
	l.notifyLocked()
}

// kill marks a member gone: what it owned is free (it can no longer
// fetch), and its callbacks from now on are ignored.
func (l *ledger) kill(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dead[name] = true
	for p, o := range l.owner {
		if o == name {
			delete(l.owner, p)
		}
	}
	l.notifyLocked()
}

func (l *ledger) consume(name string, p int32, value string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead[name] {
		return
	}
	if o := l.owner[p]; o != name {
		l.breaches = append(l.breaches, fmt.Sprintf("%s consumed %q of partition %d, owned by %q", name, value, p, o))
	}
	l.consumed[value]++
	l.notifyLocked()
}

// waitFor waits until cond holds over the ledger (locked), or fails.
func (l *ledger) waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		ok, ch := cond(), l.changed
		l.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("%s: not within %v; owners %v, %d values consumed, breaches %v", what, within, l.owner, len(l.consumed), l.breaches)
		}
	}
}

func (l *ledger) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.breaches {
		t.Error(b)
	}
}

// cuttable dials the broker until cut, then closes its connections and
// refuses new ones: a member that dies without leaving.
type cuttable struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (c *cuttable) dial(ctx context.Context, network, host string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, errors.New("cut")
	}
	nc, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err == nil {
		c.conns = append(c.conns, nc)
	}
	return nc, err
}

func (c *cuttable) setCut(cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = cut
	if cut {
		for _, nc := range c.conns {
			nc.Close()
		}
		c.conns = nil
	}
}

// revokeWork is how long a member's work on partitions it gives up takes
// to finish.
const revokeWork = 300 * time.Millisecond

// classicMember starts a kgo group member of group on topic that records
// into l, and polls until the test ends.
func classicMember(t *testing.T, tb *testBroker, l *ledger, name, grp, topic string, cut *cuttable, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	toList := func(m map[string][]int32) []int32 { return m[topic] }
	all := append([]kgo.Opt{
		kgo.SeedBrokers(tb.addr),
		kgo.ConsumerGroup(grp),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(3 * time.Second),
		kgo.HeartbeatInterval(200 * time.Millisecond),
		kgo.RebalanceTimeout(20 * time.Second),
		kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.BlockRebalanceOnPoll(),
		kgo.ClientID(name),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { l.assigned(name, toList(m)) }),
		// What auto-commit's own revoke callback would do: commit what
		// was polled (a refusal only means the next owner reads some
		// records again), then let go.
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			// Work on the partitions takes a while to finish, so that a
			// coordinator granting them before this member let go would
			// show as an overlap.
			time.Sleep(revokeWork)
			_ = cl.CommitUncommittedOffsets(ctx)
			l.released(name, toList(m))
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { l.released(name, toList(m)) }),
	}, opts...)
	if cut != nil {
		all = append(all, kgo.Dialer(cut.dial))
	}
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) { l.consume(name, r.Partition, string(r.Value)) })
			cl.AllowRebalance()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if cut != nil {
			cut.setCut(false) // let it say goodbye quickly
		}
		cl.Close()
	})
	return cl
}

func produceValues(t *testing.T, tb *testBroker, topic string, partitions int32, from, n int) {
	t.Helper()
	cl := tb.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestClassicGroupFranzGo: three kgo members of a classic group, with the
// cooperative-sticky balancer and with the eager range balancer, share a
// topic's partitions with every partition owned by one member at a time
// (as their own callbacks say), every record consumed; one member dies
// without leaving and, once its session expires, its partitions move to
// the others, and the records after are consumed too.
func TestClassicGroupFranzGo(t *testing.T) {
	for _, tc := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{
		{"cooperative-sticky", kgo.CooperativeStickyBalancer()},
		{"range", kgo.RangeBalancer()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const partitions = 6
			tb := startBroker(t)
			tb.createTopic(t, "orders", partitions)
			produceValues(t, tb, "orders", partitions, 0, 300)
			l := newLedger()
			cut := &cuttable{}
			names := []string{"m0", "m1", "m2"}
			everyOwner := func(want ...string) func() bool {
				return func() bool {
					if len(l.owner) != partitions {
						return false
					}
					seen := map[string]bool{}
					for _, o := range l.owner {
						if !slices.Contains(want, o) {
							return false
						}
						seen[o] = true
					}
					return len(seen) == len(want)
				}
			}
			consumedAll := func(n int) func() bool {
				return func() bool {
					for i := range n {
						if l.consumed[strconv.Itoa(i)] == 0 {
							return false
						}
					}
					return true
				}
			}
			// One at a time, so that each new member takes partitions
			// the others own and must give up.
			for i, name := range names {
				var c *cuttable
				if name == "m2" {
					c = cut
				}
				classicMember(t, tb, l, name, "g", "orders", c, kgo.Balancers(tc.balancer))
				l.waitFor(t, fmt.Sprintf("%d members share the partitions", i+1), 30*time.Second, everyOwner(names[:i+1]...))
			}
			l.waitFor(t, "the first records are consumed", 30*time.Second, consumedAll(300))

			cut.setCut(true)
			l.kill("m2")
			produceValues(t, tb, "orders", partitions, 300, 300)
			l.waitFor(t, "m2's partitions move to m0 and m1 once its session expires", 30*time.Second, everyOwner("m0", "m1"))
			l.waitFor(t, "every record is consumed", 30*time.Second, consumedAll(600))
			d, err := tb.DescribeGroup(testCtx(t), "g")
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Members) != 2 {
				t.Errorf("group has %d members, want 2: %+v", len(d.Members), d.Members)
			}
			l.check(t)
		})
	}
}
