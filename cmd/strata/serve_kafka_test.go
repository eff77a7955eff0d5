package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/freeport"
)

// TestServeKafka: strata serve with --kafka-listen opens the Kafka
// listener, a Kafka client finds the broker at the address advertised
// (STRATA_KAFKA_ADVERTISE here), and SIGTERM stops both.
func TestServeKafka(t *testing.T) {
	bin := os.Getenv("STRATA_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "strata")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	kafkaAddr := freeport.Loopback(t)
	_, port, _ := net.SplitHostPort(kafkaAddr)
	cmd := exec.Command(bin, "serve", "--data-dir", t.TempDir(), "--listen", freeport.Loopback(t),
		"--raft-listen", freeport.Loopback(t), "--gossip-listen", freeport.Loopback(t), "--gossip-profile", "local",
		"--admin-listen=", "--object-store-type", "none", "--kafka-listen", kafkaAddr)
	cmd.Env = append(os.Environ(), "STRATA_KAFKA_ADVERTISE=localhost:"+port)
	var out bytes.Buffer
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
	for {
		if md, err = kadm.NewClient(cl).BrokerMetadata(ctx); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no Kafka metadata: %v\n%s", err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	if want := fmt.Sprintf("serving Kafka on %s (advertised as localhost:%s)", kafkaAddr, port); !bytes.Contains(out.Bytes(), []byte(want)) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}
