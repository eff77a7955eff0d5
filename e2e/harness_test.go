package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/record"
)

// strataBin returns the binary under test: $STRATA_BIN (make test builds it)
// or one built now into a temp dir.
func strataBin(t testing.TB) string {
	if bin := os.Getenv("STRATA_BIN"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "strata-e2e-bin")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "strata")
		out, err := exec.Command("go", "build", "-o", builtBin, "../cmd/strata").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// brokerProc is one `strata serve` process.
type brokerProc struct {
	t       testing.TB
	id      int
	dataDir string
	addr    string
	args    []string
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	prefix  []string // a command the broker runs under, if any
	// creds, when set, are what the test's own calls to the broker use
	// (a broker with TLS); nil means plaintext.
	creds credentials.TransportCredentials
}

// newBroker prepares a broker with its own data dir and loopback ports.
func newBroker(t testing.TB, id int, extra ...string) *brokerProc {
	return newBrokerAt(t, id, brokerAddrs{grpc: freeport.Loopback(t), raft: freeport.Loopback(t), gossip: freeport.Loopback(t)}, nil, extra...)
}

// brokerAddrs are the addresses a broker listens on.
type brokerAddrs struct{ grpc, raft, gossip string }

// newBrokerAt prepares a broker on the given addresses; prefix, when set,
// is a command the broker runs under (ip netns exec NS, say).
func newBrokerAt(t testing.TB, id int, addrs brokerAddrs, prefix []string, extra ...string) *brokerProc {
	dir := t.TempDir()
	b := &brokerProc{t: t, id: id, dataDir: filepath.Join(dir, "data"), addr: addrs.grpc, logPath: filepath.Join(dir, "broker.log"), prefix: prefix}
	b.args = append([]string{"serve",
		"--node-id", fmt.Sprint(id),
		"--data-dir", b.dataDir,
		"--listen", b.addr,
		"--raft-listen", addrs.raft,
		"--gossip-listen", addrs.gossip,
		"--admin-listen", "",
		"--object-store-type", "none",
		"--log-level", "debug",
	}, extra...)
	t.Cleanup(func() {
		b.kill()
		if t.Failed() {
			t.Logf("broker %d log (%s):\n%s", id, b.logPath, tail(b.log(), 60))
		}
	})
	return b
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// start runs the broker and waits until its health check says SERVING.
func (b *brokerProc) start() {
	b.t.Helper()
	b.launch()
	b.waitServing()
}

// launch starts the broker process without waiting for it.
func (b *brokerProc) launch() {
	b.t.Helper()
	logf, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.t.Fatal(err)
	}
	argv := append(append(append([]string(nil), b.prefix...), strataBin(b.t)), b.args...)
	b.cmd = exec.Command(argv[0], argv[1:]...)
	b.cmd.Env = brokerEnv()
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	if err := b.cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	b.exited = make(chan struct{})
	go func() { b.cmd.Wait(); logf.Close(); close(b.exited) }()
}

// waitServing waits until the broker's health check says SERVING.
func (b *brokerProc) waitServing() {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	creds := b.creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(b.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		b.t.Fatal(err)
	}
	defer conn.Close()
	health := grpc_health_v1.NewHealthClient(conn)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := health.Check(ctx, &grpc_health_v1.HealthCheckRequest{})
		if err == nil && resp.Status == grpc_health_v1.HealthCheckResponse_SERVING {
			return
		}
		select {
		case <-b.exited:
			b.t.Fatalf("broker %d exited while starting:\n%s", b.id, b.log())
		case <-ctx.Done():
			b.t.Fatalf("broker %d not serving within 60s:\n%s", b.id, b.log())
		case <-tick.C:
		}
	}
}

// brokerEnv is this process's environment without the STRATA_* variables
// that steer the tests, which the broker would warn about as unknown.
func brokerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRATA_") {
			env = append(env, kv)
		}
	}
	return env
}

// kill9 stops the broker with SIGKILL, as a crash would, and waits for it.
func (b *brokerProc) kill9() {
	b.signal(syscall.SIGKILL)
}

// stop sends SIGTERM and waits for a graceful exit; it fails the test if the
// broker does not exit within 30 s or exits with an error.
func (b *brokerProc) stop() {
	b.t.Helper()
	if b.cmd == nil {
		return
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
		if code := b.cmd.ProcessState.ExitCode(); code != 0 {
			b.t.Fatalf("broker %d exited with %d after SIGTERM:\n%s", b.id, code, b.log())
		}
	case <-time.After(30 * time.Second):
		b.kill9()
		b.t.Fatalf("broker %d did not stop within 30s of SIGTERM", b.id)
	}
	b.cmd = nil
}

func (b *brokerProc) signal(sig syscall.Signal) {
	if b.cmd == nil {
		return
	}
	b.cmd.Process.Signal(sig)
	<-b.exited
	b.cmd = nil
}

// kill is the cleanup: only this test's process, by its pid.
func (b *brokerProc) kill() { b.signal(syscall.SIGKILL) }

func (b *brokerProc) log() string {
	data, _ := os.ReadFile(b.logPath)
	return string(data)
}

// run runs a strata client command against the broker and returns its
// standard output; it fails the test on a non-zero exit.
func (b *brokerProc) run(stdin io.Reader, args ...string) string {
	b.t.Helper()
	out, err := b.tryRun(stdin, args...)
	if err != nil {
		b.t.Fatalf("strata %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (b *brokerProc) tryRun(stdin io.Reader, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, strataBin(b.t), append(args, "--broker", b.addr)...)
	cmd.Stdin = stdin
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

// lines splits command output into lines without the trailing empty one.
func lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func grpcConn(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// localLog reads a stopped broker's log of a partition from its data dir.
func localLog(t *testing.T, dataDir, topic, id string, p int32) []byte {
	t.Helper()
	opts := hotlog.DefaultOptions()
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := hotlog.Open(filepath.Join(dataDir, "logs", topic+"-"+id, fmt.Sprint(p)), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out []byte
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		res, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		out, off = append(out, res.Data...), res.NextOffset
	}
	return out
}

// decodeAll decodes concatenated batches into records.
func decodeAll(t *testing.T, data []byte) []record.Record {
	t.Helper()
	var out []record.Record
	for len(data) > 0 {
		b, rest, err := record.Next(data)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := b.Records()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, recs...)
		data = rest
	}
	return out
}
