package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/testutil"
)

// A controller paused with SIGSTOP (a long GC, a frozen VM) is replaced by
// an election in about a second. Its group's members used to wait on it
// for the request timeout, their heartbeats and their commits alike, and,
// committing by hand between polls, print nothing for as long as the
// pause. Now every group call is bounded well below the session timeout
// and the next one goes to the new controller: the group goes on within
// the election time and a heartbeat or two.
//
// The topic has one replica per partition, so the partitions the paused
// broker leads stop (there is nobody to take them over) while the others,
// and the producer writing to them, go on: what the members print measures
// the group, not the failover of the data.
func TestGroupGoesOnWhileTheControllerIsPaused(t *testing.T) {
	tc := startCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := client.New(ctx, tc.addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const parts, session, pause = 6, 3 * time.Second, 8 * time.Second
	if _, err := c.CreateTopic(ctx, "steady", parts, 1, nil); err != nil {
		t.Fatal(err)
	}

	// A record to every partition every 5 ms, without waiting for the
	// answers: a partition on the paused broker holds only its own.
	p := c.NewProducer(client.WithLinger(0))
	defer p.Close()
	stop := make(chan struct{})
	stopped := make(chan struct{})
	var produceErrs atomic.Int32
	go func() {
		defer close(stopped)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for part := range int32(parts) {
				p.Produce(ctx, &client.Record{Topic: "steady", Partition: part, Value: fmt.Appendf(nil, "r%d-%d", part, i)},
					func(_ *client.Record, err error) {
						if err != nil {
							produceErrs.Add(1)
						}
					})
			}
		}
	}()

	brokers := strings.Join(tc.addrs(), ",")
	args := []string{"--commit-interval", "100ms", "--session-timeout", session.String()}
	members := []*memberProc{
		startSlowMemberProc(t, brokers, "a", "steady", "g", 0, args...),
		startSlowMemberProc(t, brokers, "b", "steady", "g", 0, args...),
		startSlowMemberProc(t, brokers, "c", "steady", "g", 0, args...),
	}
	testutil.WaitFor(t, time.Minute, "three members share the partitions", func() bool {
		total := 0
		for _, m := range members {
			if len(m.owns()) != parts/len(members) {
				return false
			}
			total += len(m.owns())
		}
		return total == parts
	})
	// Printing steadily before the pause.
	from := 0
	for _, m := range members {
		from += m.printedCount()
	}
	testutil.WaitFor(t, time.Minute, "the members print", func() bool {
		n := 0
		for _, m := range members {
			n += m.printedCount()
		}
		return n > from+300
	})

	ctrl := tc.controllerOf(ctx)
	victim := tc.byID(ctrl)
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			victim.cmd.Process.Signal(syscall.SIGCONT)
			resumed = true
		}
	}
	defer resume()
	pausedAt := time.Now()
	t.Logf("paused broker %d, the controller", ctrl)
	testutil.WaitFor(t, pause+time.Minute, "the pause to last", func() bool { return time.Since(pausedAt) >= pause })
	resume()
	resumedAt := time.Now()

	// The longest stretch within the pause in which no member printed
	// anything, and each member's own.
	for _, m := range members {
		t.Logf("figure: member %s: longest stretch without printing during the pause %v", m.name, groupStall([]*memberProc{m}, pausedAt, resumedAt).Round(time.Millisecond))
	}
	gap := groupStall(members, pausedAt, resumedAt)
	t.Logf("figure: controller paused %v (session timeout %v): longest stretch with nothing printed by the group %v", pause, session, gap.Round(time.Millisecond))
	// The election takes about a second and a member finds the new
	// controller within a heartbeat or two; the rest is slack for a busy
	// machine. Before, the group stalled for most of the pause.
	if gap > 5*time.Second {
		t.Errorf("the group printed nothing for %v while the controller was paused", gap)
	}

	close(stop)
	<-stopped
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := produceErrs.Load(); n > 0 {
		t.Fatalf("%d records were not written", n)
	}
	// Nothing is lost: every record is printed (some twice: a member that
	// lost its partitions leaves what it printed after its last commit to
	// the next owner).
	testutil.WaitFor(t, 2*time.Minute, "every record printed after the pause", func() bool {
		seen := map[string]bool{}
		for _, m := range members {
			m.mu.Lock()
			for _, r := range m.records {
				seen[r.value] = true
			}
			m.mu.Unlock()
		}
		for part := range int32(parts) {
			hw, err := c.ListOffsets(ctx, "steady", part, client.Latest())
			if err != nil {
				return false
			}
			n := 0
			for v := range seen {
				if strings.HasPrefix(v, fmt.Sprintf("r%d-", part)) {
					n++
				}
			}
			if int64(n) < hw {
				return false
			}
		}
		return true
	})
	for _, m := range members {
		m.interrupt(t)
	}
}

// longestStretch is the longest time within [from, to] between two of the
// sorted moments, or from one to an end of the window.
func longestStretch(at []time.Time, from, to time.Time) time.Duration {
	last, gap := from, time.Duration(0)
	for _, a := range at {
		if a.Before(from) || a.After(to) {
			continue
		}
		gap = max(gap, a.Sub(last))
		last = a
	}
	return max(gap, to.Sub(last))
}
