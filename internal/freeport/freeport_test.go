package freeport

import (
	"net"
	"testing"
)

// TestAddressesAreFreeAndNeverRepeat: each address can be listened on, and
// none comes back twice although each listener closes before the next call.
func TestAddressesAreFreeAndNeverRepeat(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		addr := Loopback(t)
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		lis.Close()
	}
}
