package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/testutil"
)

// A consumer group keeps its promises while the controller, which
// coordinates it, is paused and killed, and while members are killed and
// paused: three brokers, three members committing as they go, a steady
// idempotent acks=all producer, and one fault after another. It fails on
//
//   - two members processing a partition at once (prints of one member
//     interleaved with another's, the first not having been granted the
//     partition again in between);
//   - a committed offset read back, through any broker, lower than one read
//     before;
//   - an acknowledged record never processed;
//   - the group as a whole processing nothing for longer than the bound
//     while the controller is paused or killed.
func TestGroupKeepsItsPromisesUnderFaults(t *testing.T) {
	tc := startCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c, err := client.New(ctx, tc.addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const parts, session = 6, 3 * time.Second
	if _, err := c.CreateTopic(ctx, "promises", parts, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}

	prod := startSteadyProducer(t, ctx, c, "promises", parts)
	offsets := watchCommittedOffsets(t, ctx, tc.addrs(), "g")

	brokers := strings.Join(tc.addrs(), ",")
	args := []string{"--commit-interval", "100ms", "--session-timeout", session.String()}
	var members []*memberProc
	startMember := func(name string) *memberProc {
		m := startSlowMemberProc(t, brokers, name, "promises", "g", 0, args...)
		members = append(members, m)
		return m
	}
	a, b, _ := startMember("a"), startMember("b"), startMember("c")
	printedNow := func() int {
		n := 0
		for _, m := range members {
			n += m.printedCount()
		}
		return n
	}
	progress := func(what string) {
		t.Helper()
		from := printedNow()
		testutil.WaitFor(t, 2*time.Minute, what, func() bool { return printedNow() > from+200 })
	}
	testutil.WaitFor(t, time.Minute, "three members share the partitions", func() bool {
		return len(members[0].owns())+len(members[1].owns())+len(members[2].owns()) == parts &&
			len(members[0].owns()) > 0 && len(members[1].owns()) > 0 && len(members[2].owns()) > 0
	})
	progress("the members print")

	// The controller paused 6 s, then killed and started again.
	ctrl := tc.byID(tc.controllerOf(ctx))
	pausedAt := time.Now()
	if err := ctrl.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the pause to last 6s", func() bool { return time.Since(pausedAt) >= 6*time.Second })
	ctrl.cmd.Process.Signal(syscall.SIGCONT)
	stall := groupStall(members, pausedAt, time.Now())
	t.Logf("figure: controller %d paused 6s: longest stretch with nothing processed by the group %v", ctrl.id, stall.Round(time.Millisecond))
	progress("the members print after the controller's pause")

	ctrl = tc.byID(tc.controllerOf(ctx))
	killedAt := time.Now()
	ctrl.kill9()
	progress("the members print after the controller was killed")
	stallKill := groupStall(members, killedAt, time.Now())
	t.Logf("figure: controller %d killed: longest stretch with nothing processed by the group %v", ctrl.id, stallKill.Round(time.Millisecond))
	ctrl.start()
	progress("the members print with the old controller back")

	// A member killed, another started; a member paused past its session.
	a.kill9()
	startMember("d")
	progress("the members print after a member was killed")
	if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pausedMember := time.Now()
	testutil.WaitFor(t, time.Minute, "member b's pause to outlast its session", func() bool { return time.Since(pausedMember) >= session+2*time.Second })
	b.cmd.Process.Signal(syscall.SIGCONT)
	progress("the members print after member b's pause")

	acked := prod.stop(t)
	testutil.WaitFor(t, 3*time.Minute, "every acknowledged record processed", func() bool {
		seen := printedValues(members)
		for v := range acked {
			if !seen[v] {
				return false
			}
		}
		return true
	})
	offsets.stop(t)

	// The promises.
	bound := 5 * time.Second // the election (about 1 s), a heartbeat or two, and slack for a busy machine
	if stall > bound || stallKill > bound {
		t.Errorf("the group processed nothing for %v under the controller's pause and %v after its kill; the bound is %v", stall, stallKill, bound)
	}
	for _, o := range overlaps(members, parts) {
		t.Error(o)
	}
	t.Logf("%d acknowledged records; %d reads of the committed offsets through the brokers", len(acked), offsets.reads)
}

// steadyProducer writes records to every partition of a topic, idempotent
// and acks=all, until stopped, and remembers which were acknowledged.
type steadyProducer struct {
	stopCh  chan struct{}
	stopped chan struct{}
	p       *client.Producer
	mu      sync.Mutex
	acked   map[string]bool
	failed  int
}

func startSteadyProducer(t *testing.T, ctx context.Context, c *client.Client, topic string, parts int32) *steadyProducer {
	sp := &steadyProducer{stopCh: make(chan struct{}), stopped: make(chan struct{}), acked: map[string]bool{},
		p: c.NewProducer(client.WithLinger(time.Millisecond))}
	go func() {
		defer close(sp.stopped)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-sp.stopCh:
				return
			case <-tick.C:
			}
			for part := range parts {
				v := fmt.Sprintf("p%d-%06d", part, i)
				sp.p.Produce(ctx, &client.Record{Topic: topic, Partition: part, Value: []byte(v)}, func(_ *client.Record, err error) {
					sp.mu.Lock()
					defer sp.mu.Unlock()
					if err == nil {
						sp.acked[v] = true
					} else {
						sp.failed++
					}
				})
			}
		}
	}()
	return sp
}

// stop ends the producer and returns what was acknowledged.
func (sp *steadyProducer) stop(t *testing.T) map[string]bool {
	close(sp.stopCh)
	<-sp.stopped
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sp.p.Flush(ctx)
	sp.p.Close()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	t.Logf("producer: %d records acknowledged, %d not (refused or timed out while leaders moved)", len(sp.acked), sp.failed)
	if len(sp.acked) == 0 {
		t.Fatal("the producer had nothing acknowledged")
	}
	return sp.acked
}

// offsetWatch reads a group's committed offsets through every broker in
// turn and fails the test on any read lower than one before it.
type offsetWatch struct {
	stopCh chan struct{}
	done   chan struct{}
	reads  int
}

func watchCommittedOffsets(t *testing.T, ctx context.Context, addrs []string, group string) *offsetWatch {
	var clients []*client.Client
	for _, addr := range addrs {
		c, err := client.New(ctx, []string{addr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
	}
	w := &offsetWatch{stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		highest := map[client.TopicPartition]int64{}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-w.stopCh:
				return
			case <-tick.C:
			}
			c := clients[i%len(clients)]
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			offs, err := c.FetchOffsets(rctx, group)
			cancel()
			if err != nil {
				continue // a broker paused or down, or no controller for now
			}
			w.reads++
			for tp, off := range offs {
				if off < highest[tp] {
					t.Errorf("the committed offset of %v read through %s is %d, after %d was read", tp, addrs[i%len(addrs)], off, highest[tp])
				}
				highest[tp] = max(highest[tp], off)
			}
		}
	}()
	return w
}

func (w *offsetWatch) stop(t *testing.T) {
	close(w.stopCh)
	<-w.done
	if w.reads == 0 {
		t.Fatal("no committed offsets were read")
	}
}

// printedValues is every value any member printed.
func printedValues(members []*memberProc) map[string]bool {
	seen := map[string]bool{}
	for _, m := range members {
		m.mu.Lock()
		for _, r := range m.records {
			seen[r.value] = true
		}
		m.mu.Unlock()
	}
	return seen
}

// groupStall is the longest stretch in [from, to] in which no member
// printed anything.
func groupStall(members []*memberProc, from, to time.Time) time.Duration {
	var all []time.Time
	for _, m := range members {
		m.mu.Lock()
		for _, r := range m.records {
			all = append(all, r.at)
		}
		m.mu.Unlock()
	}
	slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
	return longestStretch(all, from, to)
}

// overlaps finds two members processing a partition at once: in the
// order the test read the prints of a partition, a member's prints on
// both sides of another member's, with no grant of the partition to the
// first member in between (a member given a partition back may print it
// again). The test reads each member's output as it comes; a grant line
// and the prints around it are a member's own, in its own order.
func overlaps(members []*memberProc, parts int32) []string {
	type print struct {
		m  *memberProc
		at time.Time
	}
	var out []string
	for part := range parts {
		var seq []print
		for _, m := range members {
			m.mu.Lock()
			for _, r := range m.records {
				if r.partition == part {
					seq = append(seq, print{m, r.at})
				}
			}
			m.mu.Unlock()
		}
		slices.SortStableFunc(seq, func(a, b print) int { return a.at.Compare(b.at) })
		name := fmt.Sprintf("promises/%d", part)
		last := map[*memberProc]time.Time{} // each member's latest print of the partition so far
		var prev *memberProc
		for _, p := range seq {
			if p.m != prev && prev != nil {
				if before, ok := last[p.m]; ok && !grantedBetween(p.m, name, before, p.at) {
					out = append(out, fmt.Sprintf("%s: member %s printed it at %s and again at %s while member %s printed it in between, with no grant to %s in between",
						name, p.m.name, before.Format("15:04:05.000"), p.at.Format("15:04:05.000"), prev.name, p.m.name))
				}
			}
			last[p.m], prev = p.at, p.m
		}
	}
	return out
}

// grantedBetween reports whether member m logged a grant of partition
// name within (from, to], give or take the millisecond its log lines are
// stamped to.
func grantedBetween(m *memberProc, name string, from, to time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ev := range m.events {
		if ev.what == "assigned" && slices.Contains(ev.topics, name) &&
			ev.at.After(from.Add(-time.Millisecond)) && !ev.at.After(to.Add(time.Millisecond)) {
			return true
		}
	}
	return false
}
