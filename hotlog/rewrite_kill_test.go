package hotlog

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// The rewrite kill test runs this test binary again as a child that
// rewrites the sealed segments of a log over and over until it is killed.
const rewriteChildEnv = "HOTLOG_REWRITE_CHILD"

// runRewriteChild rewrites the log in dir with keepEven in a loop and
// prints a line after each rewrite returns.
func runRewriteChild(dir string) {
	l, err := Open(dir, testOptions(DiskFS{}))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	for {
		if _, err := l.RewriteSegments(sealedBases(l), keepEven); err != nil {
			fmt.Fprintln(os.Stderr, "child rewrite:", err)
			os.Exit(3)
		}
		fmt.Println("rewritten")
	}
}

// TestKill9DuringRewrite kills a real process with SIGKILL while it
// rewrites segments on a real disk, at a different point each round: the
// log it leaves opens to either the old records or the rewritten ones,
// with no staging file and the same log end.
func TestKill9DuringRewrite(t *testing.T) {
	for round := range 4 {
		dir := t.TempDir()
		const n = 600
		l := rewriteLog(t, DiskFS{}, dir, n)
		active, leo := l.ActiveBaseOffset(), l.LogEndOffset()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		old := make([]int, n)
		for i := range old {
			old[i] = i
		}
		fresh := expectEven(n, active)

		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), rewriteChildEnv+"="+dir)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan struct{}, 1024)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- struct{}{}
			}
		}()
		// Round 0 kills during the first rewrite (as soon as the child
		// runs); later rounds after that many whole rewrites.
		deadline := time.After(60 * time.Second)
		for got := 0; got < round; got++ {
			select {
			case _, ok := <-lines:
				if !ok {
					t.Fatalf("round %d: child exited after %d rewrites", round, got)
				}
			case <-deadline:
				cmd.Process.Kill()
				t.Fatalf("round %d: only %d rewrites within the deadline", round, got)
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for range lines {
		}
		cmd.Wait()

		l = mustOpen(t, dir, testOptions(DiskFS{}))
		got := seqsOf(t, readRecords(t, l, 0, l.LogEndOffset()))
		switch {
		case l.LogEndOffset() != leo:
			t.Fatalf("round %d: log end %d, want %d", round, l.LogEndOffset(), leo)
		case slices.Equal(got, old):
			t.Logf("round %d: the old log (recovery %+v)", round, l.Recovery())
		case slices.Equal(got, fresh):
			t.Logf("round %d: the rewritten log (recovery %+v)", round, l.Recovery())
		default:
			t.Fatalf("round %d: neither the old log nor the rewritten one (recovery %+v)", round, l.Recovery())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		checkNoStaging(t, DiskFS{}, dir)
	}
}
