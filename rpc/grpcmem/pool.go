// Package grpcmem gives Strata's gRPC servers and clients (ServerOptions,
// DialOptions) a buffer pool that does not clear its buffers, and the
// proto codec that uses it: gRPC reads frames, materializes received
// messages and marshals sent ones into buffers from them.
//
// gRPC's default pool clears every buffer it hands out, over the whole
// capacity of its tier, and its tiers jump from 32 KiB to 1 MiB, so a
// 40 KiB fetch response was marshaled into a 1 MiB buffer cleared first.
// At 50 MB/s of 1 KiB records produced and consumed, the clearing was 13%
// of a broker's CPU, and as much of a consumer's. This pool has a tier for
// every power of two and does not clear: every user of the pool in gRPC
// (checked at v1.85) and in Codec writes the bytes it passes on, as frames
// are read into buffers in full and messages copied or marshaled into
// them, so no byte a buffer held before is read. The tests of packages rpc
// and client fill each buffer with garbage as it is handed out
// (Shared.Poison), which would show if one were.
package grpcmem

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

const (
	minShift = 8  // 256 B: the smallest tier; smaller buffers come from it
	maxShift = 23 // 8 MiB: larger buffers are allocated and left to the GC
)

// Pool is a mem.BufferPool with a sync.Pool per power of two from 256 B to
// 8 MiB. Its zero value is ready to use.
type Pool struct {
	// Poison, for tests, fills each buffer Get hands out with 0xa5.
	Poison bool
	tiers  [maxShift - minShift + 1]sync.Pool
}

var _ mem.BufferPool = (*Pool)(nil)

// tier returns the tier of a buffer of capacity n, or -1.
func tier(n int) int {
	if n <= 1<<minShift {
		return 0
	}
	if n > 1<<maxShift {
		return -1
	}
	return bits.Len(uint(n-1)) - minShift
}

// Get returns a buffer of n bytes whose contents are whatever they were.
func (p *Pool) Get(n int) *[]byte {
	var b *[]byte
	if t := tier(n); t < 0 {
		buf := make([]byte, n)
		b = &buf
	} else if got, ok := p.tiers[t].Get().(*[]byte); ok {
		b = got
		*b = (*b)[:n]
	} else {
		buf := make([]byte, n, 1<<(t+minShift))
		b = &buf
	}
	if p.Poison {
		for i := range *b {
			(*b)[i] = 0xa5
		}
	}
	return b
}

// Put takes back a buffer from Get (or a prefix of one).
func (p *Pool) Put(b *[]byte) {
	c := cap(*b)
	if t := tier(c); t >= 0 && c == 1<<(t+minShift) {
		p.tiers[t].Put(b)
	}
}
