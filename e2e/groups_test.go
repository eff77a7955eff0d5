package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/testutil"
)

// memberProc is one `strata consume --group --follow --format json`
// process. It records every record it prints (with when the test read it)
// and every membership line it writes to stderr.
type memberProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // stdout and stderr ended, process reaped

	mu      sync.Mutex
	records []printed
	events  []membership
	killed  time.Time
}

type printed struct {
	partition int32
	offset    int64
	value     string
	at        time.Time
}

// membership is one "group G: assigned|revoked|lost P..." line.
type membership struct {
	at     time.Time
	what   string // assigned, revoked, lost
	topics []string
}

func startMemberProc(t *testing.T, b *brokerProc, name, topic, group string, extra ...string) *memberProc {
	return startSlowMemberProc(t, b.addr, name, topic, group, 0, extra...)
}

// startSlowMemberProc starts a member whose output the test reads with a
// pause after each line: the pipe's back-pressure paces the member.
func startSlowMemberProc(t *testing.T, brokers, name, topic, group string, pause time.Duration, extra ...string) *memberProc {
	t.Helper()
	args := append([]string{"consume", topic, "--group", group, "--follow", "--format", "json", "--broker", brokers}, extra...)
	m := &memberProc{name: name, cmd: exec.Command(strataBin(t), args...), done: make(chan struct{})}
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := m.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.cmd.Process.Kill(); <-m.done })
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var r struct {
				Partition int32  `json:"partition"`
				Offset    int64  `json:"offset"`
				Value     string `json:"value"`
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				m.mu.Lock()
				killed := !m.killed.IsZero()
				m.mu.Unlock()
				if !killed { // kill -9 may cut the last line short
					t.Errorf("%s printed %q: %v", name, sc.Text(), err)
				}
				continue
			}
			m.mu.Lock()
			m.records = append(m.records, printed{r.Partition, r.Offset, r.Value, time.Now()})
			m.mu.Unlock()
			if pause > 0 {
				time.Sleep(pause)
			}
		}
	}()
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			// 2026-12-01T21:21:24.741Z group g1: assigned demo/2 demo/3
			f := strings.Fields(sc.Text())
			if len(f) < 4 || f[1] != "group" {
				t.Logf("%s stderr: %s", name, sc.Text())
				continue
			}
			at, err := time.Parse("2006-01-02T15:04:05.000Z", f[0])
			if err != nil {
				t.Errorf("%s: membership line %q: %v", name, sc.Text(), err)
				continue
			}
			ev := membership{at: at, what: f[3]}
			for _, p := range f[4:] {
				if strings.Contains(p, "/") {
					ev.topics = append(ev.topics, p)
				}
			}
			m.mu.Lock()
			m.events = append(m.events, ev)
			m.mu.Unlock()
		}
	}()
	go func() {
		wg.Wait()
		m.cmd.Wait()
		close(m.done)
	}()
	return m
}

// owns returns what the member owns by its own log.
func (m *memberProc) owns() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	own := map[string]bool{}
	for _, ev := range m.events {
		for _, p := range ev.topics {
			own[p] = ev.what == "assigned"
		}
	}
	for p, ok := range own {
		if !ok {
			delete(own, p)
		}
	}
	return own
}

func (m *memberProc) kill9() {
	m.mu.Lock()
	m.killed = time.Now()
	m.mu.Unlock()
	m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
}

func (m *memberProc) interrupt(t *testing.T) {
	t.Helper()
	m.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still running 30s after SIGINT", m.name)
	}
	if m.cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("%s exited with %d", m.name, m.cmd.ProcessState.ExitCode())
	}
}

func (m *memberProc) printedCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.records)
}

func produceSpread(t *testing.T, ctx context.Context, c *client.Client, topic string, parts, from, to int) {
	t.Helper()
	p := c.NewProducer()
	defer p.Close()
	var recs []*client.Record
	for i := from; i < to; i++ {
		recs = append(recs, &client.Record{Topic: topic, Partition: int32(i % parts), Value: fmt.Appendf(nil, "r%06d", i)})
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
}

// A member killed with kill -9 and started again resumes at its last
// commit: nothing is skipped, and what it reads twice is exactly what it
// printed after its last commit.
func TestGroupMemberKilledResumesAtItsCommit(t *testing.T) {
	b := newBroker(t, 1)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const parts, n = 3, 30000
	if _, err := c.CreateTopic(ctx, "jobs", parts, 1, nil); err != nil {
		t.Fatal(err)
	}
	produceSpread(t, ctx, c, "jobs", parts, 0, n)

	// m1 is paced to about 10,000 records a second, so the kill lands
	// in the middle of the topic, between two of its commits.
	m1 := startSlowMemberProc(t, b.addr, "m1", "jobs", "workers", 100*time.Microsecond, "--commit-interval", "50ms", "--session-timeout", "2s")
	testutil.WaitFor(t, time.Minute, "m1 prints a third of the records and commits", func() bool {
		offs, err := c.FetchOffsets(ctx, "workers")
		return err == nil && len(offs) > 0 && m1.printedCount() >= n/3
	})
	m1.kill9()
	committed, err := c.FetchOffsets(ctx, "workers")
	if err != nil {
		t.Fatal(err)
	}
	if len(committed) == 0 {
		t.Fatal("m1 committed nothing before it was killed")
	}

	m2 := startMemberProc(t, b, "m2", "jobs", "workers", "--commit-interval", "50ms", "--session-timeout", "2s")
	testutil.WaitFor(t, time.Minute, "m2 prints the rest", func() bool {
		d, err := c.DescribeGroup(ctx, "workers")
		if err != nil {
			return false
		}
		for _, o := range d.GetOffsets() {
			if o.GetOffset() != n/parts {
				return false
			}
		}
		return len(d.GetOffsets()) == parts
	})
	m2.interrupt(t)

	seen := map[string]int{}
	dups := 0
	first := map[int32]int64{}
	for _, r := range m2.records {
		if _, ok := first[r.partition]; !ok {
			first[r.partition] = r.offset
		}
	}
	for _, r := range m1.records {
		seen[r.value]++
		// What m1 printed at or after its last commit is read again.
		if r.offset >= committed[client.TopicPartition{Topic: "jobs", Partition: r.partition}] {
			dups++
		}
	}
	for _, r := range m2.records {
		seen[r.value]++
	}
	for p := range int32(parts) {
		want := committed[client.TopicPartition{Topic: "jobs", Partition: p}]
		if got, ok := first[p]; want < n/parts && (!ok || got != want) {
			t.Errorf("m2 started partition %d at %d (read: %v), want m1's last commit %d", p, got, ok, want)
		}
	}
	twice := 0
	for i := range n {
		switch seen[fmt.Sprintf("r%06d", i)] {
		case 0:
			t.Fatalf("record r%06d was never printed", i)
		case 2:
			twice++
		}
	}
	if twice != dups {
		t.Errorf("%d records printed twice; m1 printed %d after its last commit", twice, dups)
	}
	t.Logf("m1 printed %d records before kill -9, %d of them after its last commit; m2 read %d", len(m1.records), dups, len(m2.records))
}

// Three members share a topic while it is written; one is killed with
// kill -9. Its partitions move to the others within its session timeout;
// by the members' own logs no two ever own a partition at once and the
// survivors keep their partitions and keep printing; every record is
// printed.
func TestGroupThreeMembersOneKilled(t *testing.T) {
	b := newBroker(t, 1)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const parts, session = 6, 3 * time.Second
	if _, err := c.CreateTopic(ctx, "stream", parts, 1, nil); err != nil {
		t.Fatal(err)
	}
	// Write all along, a batch over every partition every 5 ms.
	stop := make(chan struct{})
	producedN := make(chan int, 1)
	go func() {
		i := 0
		defer func() { producedN <- i }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			produceSpread(t, ctx, c, "stream", parts, i, i+parts)
			i += parts
		}
	}()

	args := []string{"--commit-interval", "100ms", "--session-timeout", session.String()}
	members := []*memberProc{startMemberProc(t, b, "a", "stream", "g", args...)}
	testutil.WaitFor(t, time.Minute, "a owns every partition", func() bool { return len(members[0].owns()) == parts })
	joined := time.Now()
	members = append(members, startMemberProc(t, b, "b", "stream", "g", args...), startMemberProc(t, b, "c", "stream", "g", args...))
	balanced := func(ms ...*memberProc) func() bool {
		return func() bool {
			total := 0
			for _, m := range ms {
				k := len(m.owns())
				if k < parts/len(ms) || k > parts/len(ms)+1 {
					return false
				}
				total += k
			}
			return total == parts
		}
	}
	testutil.WaitFor(t, time.Minute, "three members share the partitions", balanced(members...))
	took := time.Since(joined)
	t.Logf("figure: two members joining: balanced %v after they were started (process start included)", took.Round(time.Millisecond))

	a, killed, cm := members[0], members[1], members[2]
	before := map[*memberProc]map[string]bool{a: a.owns(), cm: cm.owns()}
	killedAt := time.Now()
	killed.kill9()
	testutil.WaitFor(t, session+30*time.Second, "the killed member's partitions move", balanced(a, cm))
	movedAt := time.Now()
	moved := movedAt.Sub(killedAt)
	t.Logf("figure: member killed -9 (session timeout %v): its partitions owned again after %v", session, moved.Round(time.Millisecond))
	// The coordinator removes the member a session timeout after its last
	// heartbeat, which came before the kill: the slack is for a busy
	// machine's late timers, not for the protocol.
	if moved > session+5*time.Second {
		t.Errorf("partitions moved %v after the kill, far beyond the %v session timeout", moved, session)
	}
	for _, m := range []*memberProc{a, cm} {
		now := m.owns()
		for p := range before[m] {
			if !now[p] {
				t.Errorf("%s gave up %s during the move; cooperative members only gain", m.name, p)
			}
		}
		// Kept printing: records are due every few milliseconds, so a gap of
		// half the session timeout while the partitions moved is a stop.
		m.mu.Lock()
		last, gap := killedAt, time.Duration(0)
		for _, r := range m.records {
			if r.at.After(killedAt) && r.at.Before(movedAt) {
				gap = max(gap, r.at.Sub(last))
				last = r.at
			}
		}
		gap = max(gap, movedAt.Sub(last))
		m.mu.Unlock()
		if gap > session/2 {
			t.Errorf("%s printed nothing for %v while the partitions moved", m.name, gap)
		}
	}

	close(stop)
	n := <-producedN
	printedAll := func() bool {
		seen := make([]bool, n)
		for _, m := range members {
			m.mu.Lock()
			for _, r := range m.records {
				var i int
				if _, err := fmt.Sscanf(r.value, "r%06d", &i); err == nil && i < n {
					seen[i] = true
				}
			}
			m.mu.Unlock()
		}
		for _, ok := range seen {
			if !ok {
				return false
			}
		}
		return true
	}
	testutil.WaitFor(t, time.Minute, fmt.Sprintf("all %d records printed", n), printedAll)
	a.interrupt(t)
	cm.interrupt(t)

	// Ownership intervals from the members' own logs: [assigned, revoked
	// or lost] (or the kill, or the end) never overlap.
	type interval struct {
		member   string
		from, to time.Time
	}
	end := time.Now()
	byPartition := map[string][]interval{}
	for _, m := range members {
		open := map[string]time.Time{}
		stopAt := end
		if !m.killed.IsZero() {
			stopAt = m.killed
		}
		for _, ev := range m.events {
			for _, p := range ev.topics {
				if ev.what == "assigned" {
					open[p] = ev.at
				} else if from, ok := open[p]; ok {
					byPartition[p] = append(byPartition[p], interval{m.name, from, ev.at})
					delete(open, p)
				}
			}
		}
		for p, from := range open {
			byPartition[p] = append(byPartition[p], interval{m.name, from, stopAt})
		}
	}
	for p, ivs := range byPartition {
		for i := range ivs {
			for j := range ivs {
				x, y := ivs[i], ivs[j]
				if i != j && x.member != y.member && x.from.Before(y.to) && y.from.Before(x.to) {
					t.Errorf("%s owned by %s %v..%v and by %s %v..%v", p, x.member, x.from, x.to, y.member, y.from, y.to)
				}
			}
		}
	}
}

// When the controller, which coordinates the groups, dies, the members
// find themselves unknown to the new one, join again and go on: every
// record is printed and the group ends stable with both members.
func TestGroupSurvivesControllerFailover(t *testing.T) {
	tc := startCluster(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	brokers := strings.Join(tc.addrs(), ",")
	c, err := client.New(ctx, tc.addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const parts = 4
	if _, err := c.CreateTopic(ctx, "work", parts, 3, nil); err != nil {
		t.Fatal(err)
	}
	produceSpread(t, ctx, c, "work", parts, 0, 4000)
	args := []string{"--commit-interval", "100ms", "--session-timeout", "3s"}
	a := startSlowMemberProc(t, brokers, "a", "work", "g", 0, args...)
	b := startSlowMemberProc(t, brokers, "b", "work", "g", 0, args...)
	testutil.WaitFor(t, time.Minute, "two members share the partitions", func() bool {
		return len(a.owns()) == parts/2 && len(b.owns()) == parts/2
	})

	ctrl := tc.controllerOf(ctx)
	tc.byID(ctrl).kill9()
	t.Logf("killed broker %d, the controller", ctrl)
	produceSpread(t, ctx, c, "work", parts, 4000, 8000)

	printedAll := func() bool {
		seen := map[string]bool{}
		for _, m := range []*memberProc{a, b} {
			m.mu.Lock()
			for _, r := range m.records {
				seen[r.value] = true
			}
			m.mu.Unlock()
		}
		return len(seen) == 8000
	}
	acked := time.Now()
	testutil.WaitFor(t, 2*time.Minute, "every record printed after the failover", printedAll)
	took := time.Since(acked)
	t.Logf("all 8000 records printed %v after the records after the failover were acknowledged", took.Round(time.Millisecond))
	testutil.WaitFor(t, time.Minute, "the group is stable with both members again", func() bool {
		d, err := c.DescribeGroup(ctx, "g")
		return err == nil && d.GetState() == "stable" && len(d.GetMembers()) == 2 &&
			len(a.owns())+len(b.owns()) == parts
	})
	a.interrupt(t)
	b.interrupt(t)
	offs, err := c.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(parts) {
		if got := offs[client.TopicPartition{Topic: "work", Partition: p}]; got != 2000 {
			t.Errorf("partition %d committed at %d after both members stopped, want 2000", p, got)
		}
	}
}
