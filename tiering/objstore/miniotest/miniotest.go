// Package miniotest runs a real MinIO server for tests: a separate process
// of the binary the Makefile installs at a pinned version (make tools), on
// loopback ports, with random credentials and a fresh bucket. MinIO is
// never imported; tests talk to it through the code under test and, to
// check what is really stored, through minio-go.
package miniotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/strata-log/strata/tiering/objstore/s3"
)

// Timeouts of the server's life cycle.
const (
	// readyTimeout bounds the wait for a started server to report ready;
	// it is up in well under a second on a quiet machine.
	readyTimeout = 30 * time.Second
	// stopTimeout bounds the wait after SIGTERM before SIGKILL.
	stopTimeout = 10 * time.Second
	// logTail is how much of the server's log a failed test shows.
	logTail = 32 << 10
)

// Region is the region the server is addressed with; MinIO accepts any
// region it has not been configured against, and signs with this one.
const Region = "us-east-1"

// Server is a running MinIO server owned by one test.
type Server struct {
	// Endpoint is the server's base URL, "http://127.0.0.1:<port>".
	Endpoint string
	// Addr is the server's host:port.
	Addr string
	// AccessKey and SecretKey are the server's random root credentials.
	AccessKey string
	SecretKey string
	// Bucket is the bucket Start created, empty.
	Bucket string
	// Client talks to the server with minio-go, independently of the code
	// under test, to check what is really stored.
	Client *minio.Client

	t           testing.TB
	bin         string
	dataDir     string
	logPath     string
	consoleAddr string
	proc        *process // nil while stopped
}

// process is one run of the server binary. done closes when it has exited
// and been waited for; one goroutine per run owns the Wait.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts a MinIO server for t, waits until it is ready and creates a
// bucket. The server is stopped, and its data removed, when t ends; if t
// failed, the end of the server's log is shown.
//
// The binary is $STRATA_MINIO, or .tools/bin/minio in the module's root
// (the directory of go.mod). If there is none the test fails: a missing
// server is a broken setup, not a reason to skip (run make tools).
func Start(t testing.TB) *Server {
	t.Helper()
	bin := binary(t)
	dir := t.TempDir()
	addrs := freeAddrs(t, 2)
	s := &Server{
		Endpoint:    "http://" + addrs[0],
		Addr:        addrs[0],
		AccessKey:   "strata-" + randomHex(t, 6),
		SecretKey:   randomHex(t, 16),
		t:           t,
		bin:         bin,
		dataDir:     filepath.Join(dir, "data"),
		logPath:     filepath.Join(dir, "minio.log"),
		consoleAddr: addrs[1],
	}
	// Registered after TempDir, so it runs before the directory goes.
	t.Cleanup(s.cleanup)
	if err := s.start(); err != nil {
		t.Fatalf("miniotest: %v", err)
	}
	client, err := minio.New(s.Addr, &minio.Options{
		Creds:  credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Secure: false,
		Region: Region,
	})
	if err != nil {
		t.Fatalf("miniotest: minio client: %v", err)
	}
	s.Client = client
	s.Bucket = s.MakeBucket(t)
	return s
}

// MakeBucket creates another empty bucket with a random name and returns
// the name, for tests that want a clean bucket per case on one server.
func (s *Server) MakeBucket(t testing.TB) string {
	t.Helper()
	name := "strata-test-" + randomHex(t, 6)
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := s.Client.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: Region}); err != nil {
		t.Fatalf("miniotest: make bucket %s: %v", name, err)
	}
	return name
}

// S3Config returns the configuration that reaches Bucket through the s3
// package.
func (s *Server) S3Config() s3.Config {
	return s3.Config{
		Endpoint:  s.Endpoint,
		Region:    Region,
		Bucket:    s.Bucket,
		PathStyle: true,
		AccessKey: s.AccessKey,
		SecretKey: s.SecretKey,
	}
}

// Stop stops the server (SIGTERM, then SIGKILL if it lingers), keeping its
// data, for tests of a store that goes away. It fails the test that
// started the server if the server cannot be stopped; call it from that
// test's goroutine.
func (s *Server) Stop() {
	s.t.Helper()
	if err := s.stop(); err != nil {
		s.t.Fatalf("miniotest: %v", err)
	}
}

// Pid is the process id of the running server, or 0 while it is stopped:
// a benchmark reads the server's CPU time from it.
func (s *Server) Pid() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Restart starts a stopped server again (or stops and starts a running
// one) on the same data directory, port and credentials, and waits until
// it is ready. Like Stop, it fails the test that started the server.
func (s *Server) Restart() {
	s.t.Helper()
	if err := s.stop(); err != nil {
		s.t.Fatalf("miniotest: %v", err)
	}
	if err := s.start(); err != nil {
		s.t.Fatalf("miniotest: %v", err)
	}
}

// start runs the binary and waits for readiness.
func (s *Server) start() error {
	logf, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== miniotest: starting %s at %s\n", s.bin, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(s.bin, "server", s.dataDir, "--address", s.Addr, "--console-address", s.consoleAddr)
	cmd.Env = append(environ(),
		"MINIO_ROOT_USER="+s.AccessKey,
		"MINIO_ROOT_PASSWORD="+s.SecretKey,
		// No update check, no call-home, no web console: nothing that
		// leaves the machine or prints noise into the log.
		"MINIO_UPDATE=off",
		"MINIO_CALLHOME_ENABLE=off",
		"MINIO_BROWSER=off",
	)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	logf.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("starting %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.proc = p
	if err := s.waitReady(p); err != nil {
		s.stop()
		return err // the cleanup shows the log of the failed test
	}
	return nil
}

// waitReady polls MinIO's readiness probe until it answers 200, the
// process exits, or readyTimeout passes.
func (s *Server) waitReady(p *process) error {
	client := &http.Client{Timeout: time.Second}
	url := s.Endpoint + "/minio/health/ready"
	deadline := time.Now().Add(readyTimeout)
	for {
		resp, err := client.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server at %s not ready after %v (last: %v)", s.Addr, readyTimeout, err)
		}
		select {
		case <-p.done:
			return fmt.Errorf("server exited before it was ready: %v", p.err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop ends the running process by its pid, politely first.
func (s *Server) stop() error {
	p := s.proc
	if p == nil {
		return nil
	}
	s.proc = nil
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stopping pid %d: %w", p.cmd.Process.Pid, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing pid %d: %w", p.cmd.Process.Pid, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
		return fmt.Errorf("pid %d still running after SIGKILL", p.cmd.Process.Pid)
	}
}

// cleanup stops the server at the end of the test, and shows its log if
// the test failed.
func (s *Server) cleanup() {
	if err := s.stop(); err != nil {
		s.t.Errorf("miniotest: %v", err)
	}
	if s.t.Failed() {
		s.t.Logf("miniotest: %s", s.logTail())
	}
}

// logTail returns the end of the server's log.
func (s *Server) logTail() string {
	f, err := os.Open(s.logPath)
	if err != nil {
		return fmt.Sprintf("no server log: %v", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > logTail {
		f.Seek(fi.Size()-logTail, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return fmt.Sprintf("server log %s (last %d bytes):\n%s", s.logPath, len(b), b)
}

// binary finds the MinIO server binary.
func binary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("STRATA_MINIO"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("miniotest: STRATA_MINIO=%s: %v (run make tools, or point it at a MinIO server binary)", bin, err)
		}
		return bin
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("miniotest: %v; set STRATA_MINIO to a MinIO server binary", err)
	}
	bin := filepath.Join(root, ".tools", "bin", "minio")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("miniotest: no MinIO server at %s (%v): run make tools, or set STRATA_MINIO", bin, err)
	}
	return bin
}

// moduleRoot walks up from the working directory (a package directory,
// under go test) to the directory that holds go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// environ is the test's environment without MINIO_ settings, so that a
// developer's own MinIO configuration does not leak into the server.
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINIO_") {
			env = append(env, kv)
		}
	}
	return env
}

// freeAddrs returns n distinct loopback addresses with ports that were
// free a moment ago. All are held open together, so none repeats.
func freeAddrs(t testing.TB, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("miniotest: free port: %v", err)
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("miniotest: %v", err)
	}
	return hex.EncodeToString(b)
}
