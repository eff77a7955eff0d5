package client_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
)

// These tests make the group coordinator stop answering, as a paused
// controller does (SIGSTOP: its connections stay open and nothing comes
// back), and check that a member neither waits on it for its request
// timeout nor goes on reading past its session.

// blackHole returns a loopback address that accepts connections and never
// answers on them: what a paused broker looks like from outside.
func blackHole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// New asks the next bootstrap broker when the first does not answer,
// instead of waiting for it for the request timeout.
func TestNewWithAPausedFirstBootstrapBroker(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	c, err := client.New(ctx, []string{blackHole(t), tb.cfg.Listen})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Logf("figure: New with a paused first bootstrap broker returned after %v", took.Round(time.Millisecond))
	// The request timeout is 30 s; the slack is for a busy machine.
	if took > 3*time.Second {
		t.Errorf("New took %v with the first bootstrap broker paused", took)
	}
}

