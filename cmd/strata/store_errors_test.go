package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/rpc"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// TestStoreErrorsExplained: against a real MinIO, a missing bucket, a
// wrong secret key, an unknown access key and an endpoint nobody listens
// on each give one line naming the store and what to check, from strata
// bucket and from a broker's start, never the SDK's dump.
func TestStoreErrorsExplained(t *testing.T) {
	m := miniotest.Start(t)
	closed := "http://" + freeport.Loopback(t) // nothing listens there
	for _, tc := range []struct {
		name, endpoint, bucket, access, secret string
		want                                   string
	}{
		{"no bucket", m.Endpoint, "no-such-bucket", m.AccessKey, m.SecretKey,
			"object store s3://no-such-bucket at " + m.Endpoint + ": the bucket does not exist: create it, correct object_store.bucket, or set object_store.create_bucket"},
		{"wrong secret", m.Endpoint, m.Bucket, m.AccessKey, "wrong-secret",
			"object store s3://" + m.Bucket + " at " + m.Endpoint + ": the store refused the secret key: check object_store.secret_key (STRATA_OBJECT_STORE_SECRET_KEY)"},
		{"unknown access key", m.Endpoint, m.Bucket, "nobody", m.SecretKey,
			"object store s3://" + m.Bucket + " at " + m.Endpoint + ": the store does not know the access key: check object_store.access_key"},
		{"unreachable", closed, m.Bucket, m.AccessKey, m.SecretKey,
			"object store s3://" + m.Bucket + " at " + closed + ": cannot reach the endpoint: check object_store.endpoint and that the store is running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("STRATA_OBJECT_STORE_SECRET_KEY", tc.secret)
			_, stderr, code := bucketCmd(t, "bucket", "ls", "--object-store-type", "s3", "--object-store-endpoint", tc.endpoint,
				"--object-store-bucket", tc.bucket, "--object-store-access-key", tc.access, "--object-store-path-style")
			if code != exitUsage || stderr != "reading s3://"+tc.bucket+" at "+tc.endpoint+"\nstrata: "+tc.want+"\n" {
				t.Errorf("bucket ls: status %d, stderr:\n%s\nwant the line\nstrata: %s", code, stderr, tc.want)
			}

			cfg := testBrokerConfig(t)
			o := &cfg.ObjectStore
			o.Type, o.Endpoint, o.Bucket, o.AccessKey, o.SecretKey, o.PathStyle = config.ObjectStoreS3, tc.endpoint, tc.bucket, tc.access, config.Secret(tc.secret), true
			var logged bytes.Buffer
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			b, err := broker.Start(ctx, cfg, slog.New(slog.NewTextHandler(&logged, nil)), rpc.NewPeers(nil, ""))
			if tc.name == "unreachable" {
				// The store may be down a moment: the broker starts, and
				// says so in one line.
				if err != nil {
					t.Fatalf("start with the store unreachable: %v", err)
				}
				b.Close()
				if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), tc.want) {
					t.Errorf("start with the store unreachable logged:\n%s", logged.String())
				}
				return
			}
			if err == nil {
				b.Close()
				t.Fatal("the broker started")
			}
			if err.Error() != "broker: "+tc.want {
				t.Errorf("start: %q\nwant %q", err, "broker: "+tc.want)
			}
		})
	}
}

// TestServeStartLine: a single broker starts without a warning, and its
// start line names the admin endpoint and where the cold tier is.
func TestServeStartLine(t *testing.T) {
	bin := strataBinary(t)
	dir := t.TempDir()
	listen, admin := freeport.Loopback(t), freeport.Loopback(t)
	cmd := exec.Command(bin, "serve", "--data-dir", dir, "--listen", listen,
		"--raft-listen", freeport.Loopback(t), "--gossip-listen", freeport.Loopback(t), "--gossip-profile", "local",
		"--admin-listen", admin)
	// Only this test's settings: a STRATA_ variable of the test run
	// (STRATA_BIN) would be warned about as unknown, rightly.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRATA_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })

	var line string
	testutil.Eventually(t, time.Minute, "the start line", func() error {
		for l := range strings.Lines(out.String()) {
			if strings.Contains(l, "serving gRPC on") {
				line = l
			}
		}
		if line != "" {
			return nil
		}
		select {
		case <-exited:
			t.Fatalf("serve ended before its start line:\n%s", out.String())
		default:
		}
		return fmt.Errorf("no start line within a minute:\n%s", out.String())
	})
	abs, _ := filepath.Abs(dir)
	for _, want := range []string{"serving gRPC on " + listen, "cold tier fs " + filepath.Join(abs, "objects"),
		"admin on http://" + admin + " (console at /ui; /metrics, /healthz, /readyz)"} {
		if !strings.Contains(line, want) {
			t.Errorf("start line lacks %q: %s", want, line)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("serve: %v\n%s", waitErr, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop on SIGTERM:\n%s", out.String())
	}
	for l := range strings.Lines(out.String()) {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			t.Errorf("a single broker's start and stop logged: %s", l)
		}
	}
}
