package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
)

// TestServeKafkaSCRAM: a broker with TLS serves Kafka with SASL/SCRAM;
// `strata user create` (over gRPC, as the admin's certificate) makes a
// credential that kgo (SHA-256 and SHA-512) and kcat (librdkafka,
// SASL_SSL with SCRAM-SHA-512, -L) log in with, and kcat with the admin's
// client certificate (SSL) is let in too; it survives a restart of
// the broker (it is in the Raft metadata); `strata user delete` makes the
// same login fail with SASL_AUTHENTICATION_FAILED.
func TestServeKafkaSCRAM(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat not found (apt-get install -y kcat; make tools does it): %v", err)
	}
	bin := strataBinary(t)
	certs := t.TempDir()
	mustStrataCmd(t, "dev", "certs", "--dir", certs, "--brokers", "1", "--client", "admin")
	gossipKey, err := os.ReadFile(filepath.Join(certs, "gossip.key"))
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	grpcAddr, kafkaAddr := freeport.Loopback(t), freeport.Loopback(t)
	raftAddr, gossipAddr := freeport.Loopback(t), freeport.Loopback(t)
	var out lockedBuffer // the broker writes it while the test reads it
	start := func() *exec.Cmd {
		t.Helper()
		cmd := exec.Command(bin, "serve", "--data-dir", dataDir, "--listen", grpcAddr,
			"--raft-listen", raftAddr, "--gossip-listen", gossipAddr, "--gossip-profile", "local",
			"--admin-listen=", "--object-store-type", "none", "--kafka-listen", kafkaAddr,
			"--kafka-sasl-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512",
			"--security-tls-ca-file", filepath.Join(certs, "ca.pem"),
			"--security-tls-cert-file", filepath.Join(certs, "broker-1.pem"),
			"--security-tls-key-file", filepath.Join(certs, "broker-1-key.pem"),
			"--gossip-secret-key", strings.TrimSpace(string(gossipKey)), "--security-superusers", "User:admin")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	stop := func(cmd *exec.Cmd) {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
	srv := start()
	t.Cleanup(func() { stop(srv) })

	admin := []string{"--broker", grpcAddr, "--tls-ca", filepath.Join(certs, "ca.pem"),
		"--tls-cert", filepath.Join(certs, "client-admin.pem"), "--tls-key", filepath.Join(certs, "client-admin-key.pem")}
	retry := func(args ...string) string {
		t.Helper()
		var o string
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("strata %v to succeed", args), func() error {
			var err error
			if o, err = strataCmd(t, args...); err != nil {
				return fmt.Errorf("strata %v: %v\n%s\nbroker:\n%s", args, err, o, out.String())
			}
			return nil
		})
		return o
	}
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret pass\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	retry(append([]string{"topic", "create", "orders", "--partitions", "1"}, admin...)...)
	created := retry(append([]string{"user", "create", "carol", "--password-file", pwFile}, admin...)...)
	if !strings.Contains(created, "set the SCRAM-SHA-512 credential of carol (principal User:carol)") {
		t.Fatalf("user create: %q", created)
	}
	mustRows(t, "user list", mustStrataCmd(t, append([]string{"user", "list"}, admin...)...),
		"USER PRINCIPAL MECHANISMS", "carol User:carol SCRAM-SHA-256,SCRAM-SHA-512")
	mustStrataCmd(t, append([]string{"acl", "add", "--principal", "User:carol", "--topic", "orders", "-o", "write"}, admin...)...)

	caPEM, _ := os.ReadFile(filepath.Join(certs, "ca.pem"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	login := func(mech sasl, pass string) error {
		t.Helper()
		a := scram.Auth{User: "carol", Pass: pass}
		m := a.AsSha512Mechanism()
		if mech == sha256 {
			m = a.AsSha256Mechanism()
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.DialTLSConfig(&tls.Config{RootCAs: pool, ServerName: "localhost"}),
			kgo.SASL(m), kgo.DisableIdempotentWrite(), kgo.RetryTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := cl.Ping(ctx); err != nil { // a refused login: kgo's produce would retry until ctx ends
			return err
		}
		return cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("hello")}).FirstErr()
	}
	kcatList := func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		b, err := exec.CommandContext(ctx, kcat, "-b", kafkaAddr, "-L", "-t", "orders",
			"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=carol", "-X", "sasl.password=s3cret pass",
			"-X", "ssl.ca.location="+filepath.Join(certs, "ca.pem"), "-X", "ssl.endpoint.identification.algorithm=none").CombinedOutput()
		return string(b), err
	}
	for _, mech := range []sasl{sha256, sha512} {
		if err := login(mech, "s3cret pass"); err != nil {
			t.Fatalf("SCRAM login %v: %v\n%s", mech, err, out.String())
		}
		if err := login(mech, "wrong"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("SCRAM login %v with a wrong password: %v", mech, err)
		}
	}
	// librdkafka with the admin's client certificate instead (mTLS).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	mtls, err := exec.CommandContext(ctx, kcat, "-b", kafkaAddr, "-L", "-t", "orders", "-X", "security.protocol=SSL",
		"-X", "ssl.ca.location="+filepath.Join(certs, "ca.pem"), "-X", "ssl.endpoint.identification.algorithm=none",
		"-X", "ssl.certificate.location="+filepath.Join(certs, "client-admin.pem"),
		"-X", "ssl.key.location="+filepath.Join(certs, "client-admin-key.pem")).CombinedOutput()
	if err != nil || !strings.Contains(string(mtls), `topic "orders" with 1 partitions`) {
		t.Fatalf("kcat -L over SSL with a client certificate: %v\n%s", err, mtls)
	}
	if list, err := kcatList(); err != nil || !strings.Contains(list, `topic "orders" with 1 partitions`) {
		t.Fatalf("kcat -L over SASL_SSL/SCRAM-SHA-512: %v\n%s\nbroker:\n%s", err, list, out.String())
	}

	// Restart: the credential is in the Raft metadata.
	stop(srv)
	srv = start()
	testutil.Eventually(t, 30*time.Second, "a SCRAM login after a restart", func() error {
		if err := login(sha512, "s3cret pass"); err != nil {
			return fmt.Errorf("SCRAM login after a restart: %v\n%s", err, out.String())
		}
		return nil
	})

	if deleted := mustStrataCmd(t, append([]string{"user", "delete", "carol"}, admin...)...); strings.Count(deleted, "deleted the") != 2 {
		t.Fatalf("user delete: %q", deleted)
	}
	for _, mech := range []sasl{sha256, sha512} {
		if err := login(mech, "s3cret pass"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("SCRAM login %v after the user was deleted: %v", mech, err)
		}
	}
	if list, err := kcatList(); err == nil {
		t.Fatalf("kcat logged in as a deleted user:\n%s", list)
	}
	if strings.Contains(out.String(), "s3cret") {
		t.Fatalf("the broker logged the password:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "serving Kafka on "+kafkaAddr+" (advertised as "+kafkaAddr+"); TLS, clients authenticate with a client certificate or SASL SCRAM-SHA-256, SCRAM-SHA-512") {
		t.Fatalf("start-up line:\n%s", out.String())
	}
}

type sasl int

const (
	sha256 sasl = iota
	sha512
)

// lockedBuffer is a bytes.Buffer that a process's output goroutine writes
// while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
