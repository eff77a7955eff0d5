package hotlog

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
)

// The kill test runs this test binary again as a child process that appends
// until it is killed with SIGKILL.
const killChildEnv = "HOTLOG_KILL_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(killChildEnv); spec != "" {
		runKillChild(spec)
		return
	}
	if dir := os.Getenv(rewriteChildEnv); dir != "" {
		runRewriteChild(dir)
		return
	}
	os.Exit(m.Run())
}

// runKillChild appends from four goroutines to the log in dir with
// FlushAlways and prints "seq\n" for every record once its append returned,
// that is once it was acknowledged.
func runKillChild(spec string) {
	dir, round, _ := strings.Cut(spec, ",")
	r, _ := strconv.Atoi(round)
	opts := testOptions(DiskFS{})
	opts.SegmentBytes = 64 << 10
	opts.MaxBatchBytes = 16 << 10
	l, err := Open(dir, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n += 3 {
				seq := (r*10+w)*1_000_000 + n
				if _, err := l.Append(testutil.SeqBatch(nopTB{}, int64(seq), 3, 0, 700, []byte("k")), 0); err != nil {
					fmt.Fprintln(os.Stderr, "child append:", err)
					os.Exit(3)
				}
				out.Lock()
				fmt.Fprintf(os.Stdout, "%d\n%d\n%d\n", seq, seq+1, seq+2)
				out.Unlock()
			}
		}()
	}
	wg.Wait()
}

// nopTB lets the child use the test helpers outside a test.
type nopTB struct{ testing.TB }

func (nopTB) Helper()               {}
func (nopTB) Fatalf(string, ...any) { os.Exit(4) }

// TestKill9DuringAppends kills a real process with SIGKILL in the middle of
// appending, three times over the same log: after each kill every
// acknowledged record is there exactly once, each writer's records are in
// order, and the offsets have no gaps.
func TestKill9DuringAppends(t *testing.T) {
	dir := t.TempDir()
	acked := map[int]bool{}
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d", killChildEnv, dir, round))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan int, 1024)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if n, err := strconv.Atoi(sc.Text()); err == nil {
					lines <- n
				}
			}
		}()
		// Kill after a few thousand acknowledgements: enough for several rolls.
		target := 3000 + round*1000
		deadline := time.After(60 * time.Second)
		got := 0
	wait:
		for got < target {
			select {
			case n, ok := <-lines:
				if !ok {
					t.Fatalf("round %d: child exited after %d acks", round, got)
				}
				acked[n] = true
				got++
			case <-deadline:
				cmd.Process.Kill()
				t.Fatalf("round %d: only %d acks within the deadline", round, got)
				break wait
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for n := range lines { // acks printed before the kill
			acked[n] = true
		}
		cmd.Wait()

		l := mustOpen(t, dir, testOptions(DiskFS{}))
		recs := readRecords(t, l, 0, l.LogEndOffset())
		seen := map[int]bool{}
		lastPerWriter := map[int]int{}
		for i, r := range recs {
			if r.Offset != int64(i) {
				t.Fatalf("round %d: record %d has offset %d", round, i, r.Offset)
			}
			s := seqOf(r)
			if seen[s] {
				t.Fatalf("round %d: record %d appears twice", round, s)
			}
			seen[s] = true
			w := s / 1_000_000
			if last, ok := lastPerWriter[w]; ok && s <= last {
				t.Fatalf("round %d: writer %d's record %d after %d", round, w, s, last)
			}
			lastPerWriter[w] = s
		}
		for n := range acked {
			if !seen[n] {
				t.Fatalf("round %d: acknowledged record %d lost (log has %d records, report %+v)", round, n, len(recs), l.Recovery())
			}
		}
		t.Logf("round %d: %d acknowledged, %d in the log, %d segments, recovery %+v",
			round, len(acked), len(recs), len(l.Segments()), l.Recovery())
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
