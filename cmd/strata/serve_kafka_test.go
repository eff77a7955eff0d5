package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
)

// TestKcat: kcat (librdkafka, a non-Go client) lists the broker and
// topic, produces keyed records and consumes them back unchanged, and
// queries an offset, against strata serve, with no protocol error.
// make test and .ci/run install kcat (Debian package kcat) when missing.
func TestKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat not found (apt-get install -y kcat; make tools does it): %v", err)
	}
	bin := strataBinary(t)
	grpcAddr, kafkaAddr := freeport.Loopback(t), freeport.Loopback(t)
	cmd := exec.Command(bin, "serve", "--data-dir", t.TempDir(), "--listen", grpcAddr,
		"--raft-listen", freeport.Loopback(t), "--gossip-listen", freeport.Loopback(t), "--gossip-profile", "local",
		"--admin-listen=", "--object-store-type", "none", "--kafka-listen", kafkaAddr)
	var out syncBuffer // the broker writes it while the test reads it
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	run := func(stdin string, name string, args ...string) string {
		t.Helper()
		var b []byte
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%s %v to succeed", name, args), func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c := exec.CommandContext(ctx, name, args...)
			c.Stdin = strings.NewReader(stdin)
			var err error
			if b, err = c.CombinedOutput(); err != nil {
				return fmt.Errorf("%s %v: %v\n%s\nbroker:\n%s", name, args, err, b, out.String())
			}
			return nil
		})
		return string(b)
	}
	run("", bin, "topic", "create", "kc", "--partitions", "1", "--broker", grpcAddr)
	list := run("", kcat, "-b", kafkaAddr, "-L", "-t", "kc")
	for _, want := range []string{"broker 1 at " + kafkaAddr, `topic "kc" with 1 partitions`, "partition 0, leader 1, replicas: 1, isrs: 1"} {
		if !strings.Contains(list, want) {
			t.Errorf("kcat -L lacks %q:\n%s", want, list)
		}
	}
	produced := run("k1:one\nk2:two\n:three\n", kcat, "-b", kafkaAddr, "-P", "-t", "kc", "-K:", "-X", "acks=all")
	consumed := run("", kcat, "-b", kafkaAddr, "-C", "-t", "kc", "-o", "beginning", "-e", "-q", "-f", "%k=%s@%o\n")
	if want := "k1=one@0\nk2=two@1\n=three@2\n"; consumed != want {
		t.Errorf("kcat consumed %q, want %q", consumed, want)
	}
	query := run("", kcat, "-b", kafkaAddr, "-Q", "-t", "kc:0:0")
	if !strings.Contains(query, "kc [0] offset 0") {
		t.Errorf("kcat -Q: %q", query)
	}
	for _, o := range []string{produced, consumed, list, query} {
		if strings.Contains(o, "PROTOERR") || strings.Contains(o, "ERROR") {
			t.Errorf("kcat reported a protocol error:\n%s", o)
		}
	}
}

// strataBinary is $STRATA_BIN (make test builds it) or one built now.
func strataBinary(t *testing.T) string {
	bin := os.Getenv("STRATA_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "strata")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	return bin
}

// TestServeKafka: strata serve with --kafka-listen opens the Kafka
// listener, a Kafka client finds the broker at the address advertised
// (STRATA_KAFKA_ADVERTISE here), and SIGTERM stops both.
func TestServeKafka(t *testing.T) {
	bin := strataBinary(t)
	kafkaAddr := freeport.Loopback(t)
	_, port, _ := net.SplitHostPort(kafkaAddr)
	cmd := exec.Command(bin, "serve", "--data-dir", t.TempDir(), "--listen", freeport.Loopback(t),
		"--raft-listen", freeport.Loopback(t), "--gossip-listen", freeport.Loopback(t), "--gossip-profile", "local",
		"--admin-listen=", "--object-store-type", "none", "--kafka-listen", kafkaAddr)
	cmd.Env = append(os.Environ(), "STRATA_KAFKA_ADVERTISE=localhost:"+port)
	var out syncBuffer // the broker writes it while the test reads it
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})

	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var md kadm.Metadata
	testutil.Eventually(t, 30*time.Second, "Kafka metadata", func() error {
		if md, err = kadm.NewClient(cl).BrokerMetadata(ctx); err != nil {
			return fmt.Errorf("no Kafka metadata: %v\n%s", err, out.String())
		}
		return nil
	})
	if len(md.Brokers) != 1 || md.Brokers[0].Host != "localhost" || strconv.Itoa(int(md.Brokers[0].Port)) != port {
		t.Errorf("brokers = %+v, want localhost:%s", md.Brokers, port)
	}
	cl.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("serve exited: %v\n%s", waitErr, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop on SIGTERM\n%s", out.String())
	}
	if want := fmt.Sprintf("serving Kafka on %s (advertised as localhost:%s)", kafkaAddr, port); !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}

// TestKcatEnablesItsFeatures: librdkafka (kcat) turns each of its protocol
// features on or off by the API versions a broker advertises; against
// Strata every feature a Kafka 4 broker gives it is on. MsgVer1 and
// ThrottleTime stay off, as against Kafka 4, which no longer serves the
// Fetch v1-v3 they look for (KIP-896).
func TestKcatEnablesItsFeatures(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat not found (apt-get install -y kcat; make tools does it): %v", err)
	}
	bin := strataBinary(t)
	kafkaAddr := freeport.Loopback(t)
	cmd := exec.Command(bin, "serve", "--data-dir", t.TempDir(), "--listen", freeport.Loopback(t),
		"--raft-listen", freeport.Loopback(t), "--gossip-listen", freeport.Loopback(t), "--gossip-profile", "local",
		"--admin-listen=", "--object-store-type", "none", "--kafka-listen", kafkaAddr)
	var out syncBuffer // the broker writes it while the test reads it
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	var debug string
	testutil.Eventually(t, 30*time.Second, "kcat -L to succeed", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		b, err := exec.CommandContext(ctx, kcat, "-b", kafkaAddr, "-L", "-d", "feature").CombinedOutput()
		if err != nil {
			return fmt.Errorf("kcat -L: %v\n%s\nbroker:\n%s", err, b, out.String())
		}
		debug = string(b)
		return nil
	})
	enabled, disabled := map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(debug, "\n") {
		if _, f, ok := strings.Cut(line, "Enabling feature "); ok {
			enabled[strings.TrimSpace(f)] = true
		}
		if _, f, ok := strings.Cut(line, "Disabling feature "); ok {
			disabled[strings.TrimSpace(f)] = true
		}
	}
	for _, f := range []string{"MsgVer2", "ApiVersion", "BrokerGroupCoordinator", "BrokerBalancedConsumer",
		"IdempotentProducer", "LZ4", "ZSTD", "OffsetTime", "SaslHandshake", "SaslAuthReq"} {
		if !enabled[f] || disabled[f] {
			t.Errorf("librdkafka did not enable %s", f)
		}
	}
	for f := range disabled {
		if f != "MsgVer1" && f != "ThrottleTime" {
			t.Errorf("librdkafka disabled %s", f)
		}
	}
	if t.Failed() {
		t.Logf("kcat -d feature:\n%s", debug)
	}
}
