package kafka

import (
	"bufio"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
)

// kcatOutput collects the "partition value" lines of running kcats.
type kcatOutput struct {
	mu    sync.Mutex
	lines map[string][]string // kcat name -> lines
}

func (o *kcatOutput) add(name, line string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lines[name] = append(o.lines[name], line)
}

// seen returns, for each kcat, the partitions of the values it consumed
// that satisfy keep, and all values consumed.
func (o *kcatOutput) seen(keep func(v int) bool) (map[string]map[string]bool, map[int]bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	parts, values := map[string]map[string]bool{}, map[int]bool{}
	for name, lines := range o.lines {
		for _, l := range lines {
			p, v, ok := strings.Cut(l, " ")
			n, err := strconv.Atoi(strings.TrimPrefix(v, "v"))
			if !ok || err != nil {
				continue
			}
			values[n] = true
			if keep(n) {
				if parts[name] == nil {
					parts[name] = map[string]bool{}
				}
				parts[name][p] = true
			}
		}
	}
	return parts, values
}

func (o *kcatOutput) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 45*time.Second, what, func() error {
		if cond() {
			return nil
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		return fmt.Errorf("%s: not within 45s; kcat output %v", what, o.lines)
	})
}

// startKcat runs kcat -G as a member of grp on topic, its lines into out.
func startKcat(t *testing.T, tb *testBroker, out *kcatOutput, name, grp, topic string) {
	t.Helper()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat not found (apt-get install -y kcat; make tools does it): %v", err)
	}
	cmd := exec.Command(kcat, "-b", tb.addr, "-G", grp, "-u", "-q", "-f", "%p v%s\n",
		"-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=300",
		"-X", "client.id="+name, topic)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out.add(name, sc.Text())
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM) // kcat leaves the group and exits
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, stderr.String())
		}
	})
}

// TestClassicGroupKcat: kcat -G (librdkafka, its eager range assignor)
// joins a group and consumes every partition; a second kcat joins and the
// two split the partitions, each consuming new records of its own
// partitions only.
func TestClassicGroupKcat(t *testing.T) {
	const partitions = 4
	tb := startBroker(t)
	tb.createTopic(t, "kc", partitions)
	produceValues(t, tb, "kc", partitions, 0, 40)
	out := &kcatOutput{lines: map[string][]string{}}
	all := func(n int) func() bool {
		return func() bool {
			_, values := out.seen(func(int) bool { return false })
			for i := range n {
				if !values[i] {
					return false
				}
			}
			return true
		}
	}

	startKcat(t, tb, out, "kcat-a", "kg", "kc")
	out.waitFor(t, "the first kcat consumes every record", all(40))

	startKcat(t, tb, out, "kcat-b", "kg", "kc")
	out.waitFor(t, "the two kcats split the partitions", func() bool {
		d, err := tb.DescribeGroup(testCtx(t), "kg")
		if err != nil || len(d.Members) != 2 || d.State != "stable" {
			return false
		}
		for _, m := range d.Members {
			if len(m.Owned) == 0 {
				return false
			}
		}
		return true
	})

	produceValues(t, tb, "kc", partitions, 40, 40)
	out.waitFor(t, "every new record is consumed", all(80))
	parts, _ := out.seen(func(v int) bool { return v >= 40 })
	if len(parts["kcat-a"]) == 0 || len(parts["kcat-b"]) == 0 {
		t.Fatalf("new records by partition: %v; want both kcats consuming", parts)
	}
	for p := range parts["kcat-a"] {
		if parts["kcat-b"][p] {
			t.Errorf("partition %s consumed by both kcats after the split: %v", p, parts)
		}
	}
}
