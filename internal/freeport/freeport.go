// Package freeport hands tests addresses for listeners that must know
// their address before they open (a broker's raft and gossip listeners,
// say).
package freeport

import (
	"net"
	"sync"
	"testing"
)

// handedOut holds every address returned in this process.
var handedOut sync.Map

// Loopback returns 127.0.0.1:port with a port that was free a moment ago.
func Loopback(t testing.TB) string { return On(t, "127.0.0.1") }

// On returns host:port with a port that was free on host a moment ago. The
// kernel may hand a port out again once its listener closes, so no two
// calls in a process return the same address: a broker whose listeners
// were given one port refuses its configuration.
func On(t testing.TB, host string) string {
	t.Helper()
	for {
		lis, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		addr := lis.Addr().String()
		lis.Close()
		if _, taken := handedOut.LoadOrStore(addr, true); !taken {
			return addr
		}
	}
}
