package tiering

import (
	"hash/crc32"
	"io"
	"net"
	"testing"
	"time"
)

// BenchmarkChunkBufferFirstUse is what a cold read pays for a chunk read
// into memory the process has not used before, against one read into a
// buffer the arena recycled: a GET body read from a loopback socket, then
// the CRC-32C pass over it that checking its batches makes.
//
//	go test -run '^$' -bench ChunkBufferFirstUse -benchtime 200x ./tiering/
//
// On some virtual machines the first use of fresh memory mapped in 4 KiB
// pages, even populated, is an order of magnitude slower than a reused
// buffer, for the read and for the CRC pass after it (docs/BENCHMARKS.md);
// mapBuffer's huge pages bring a fresh buffer near a recycled one, and the
// arena's recycling saves the rest once the cache has filled.
func BenchmarkChunkBufferFirstUse(b *testing.B) {
	for _, fresh := range []bool{true, false} {
		name := "recycled"
		if fresh {
			name = "fresh"
		}
		b.Run(name, func(b *testing.B) { benchChunkBuffer(b, fresh) })
	}
}

func benchChunkBuffer(b *testing.B, fresh bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		body := make([]byte, 1<<20)
		for {
			if _, err := c.Write(body); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const size = 4 << 20 // the default tiering.chunk_bytes
	table := crc32.MakeTable(crc32.Castagnoli)
	reused := mapBuffer(size)
	defer unmapBuffer(reused)
	var read, check time.Duration
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		buf := reused
		if fresh {
			buf = mapBuffer(size)
		}
		t0 := time.Now()
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		for off := 0; off < size; off += 16 << 10 { // batches of 16 KiB
			crc32.Checksum(buf[off:off+16<<10], table)
		}
		read, check = read+t1.Sub(t0), check+time.Since(t1)
		if fresh {
			unmapBuffer(buf)
		}
	}
	b.ReportMetric(float64(read.Microseconds())/float64(b.N), "read-µs/chunk")
	b.ReportMetric(float64(check.Microseconds())/float64(b.N), "crc-µs/chunk")
}
