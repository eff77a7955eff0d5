package grpcmem

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// TestCodecRoundTrip: messages small enough that gRPC does not pool them
// and large ones, marshaled into poisoned buffers and read back from
// several buffers (as frames arrive), are what was sent, byte for byte the
// encoding of gRPC's own codec.
func TestCodecRoundTrip(t *testing.T) {
	Shared.Poison = true
	defer func() { Shared.Poison = false }()
	for _, n := range []int{0, 10, 900, 5000, 1 << 20} {
		in := &stratav1.FetchResponse{Batches: bytes.Repeat([]byte{7}, n), HighWatermark: 42, NextOffset: int64(n)}
		data, err := Codec{}.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := proto.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		got := data.Materialize()
		if !bytes.Equal(got, want) {
			t.Fatalf("%d bytes of batches: the encoding differs from proto.Marshal", n)
		}
		data.Free()
		// Split as frames would be, each in a poisoned buffer of its own.
		var split mem.BufferSlice
		for rest := got; len(rest) > 0; {
			k := min(len(rest), 16<<10)
			split = append(split, mem.Copy(rest[:k], Shared))
			rest = rest[k:]
		}
		out := &stratav1.FetchResponse{}
		if err := (Codec{}).Unmarshal(split, out); err != nil {
			t.Fatal(err)
		}
		split.Free()
		if !proto.Equal(in, out) {
			t.Fatalf("%d bytes of batches: read back differs", n)
		}
	}
}

// TestEncodedLendsItsBody: an Encoded message is Head then Body on the
// wire; a large Body is not copied, and its Release runs once, when gRPC
// frees what Marshal returned, not before. A small one is copied and
// released at once.
func TestEncodedLendsItsBody(t *testing.T) {
	for _, n := range []int{0, 100, 1 << 20} {
		body := bytes.Repeat([]byte{9}, n)
		released := 0
		e := &Encoded{Head: []byte{1, 2, 3}, Body: body, Release: func() { released++ }}
		data, err := Codec{}.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := data.Materialize(), append([]byte{1, 2, 3}, body...); !bytes.Equal(got, want) {
			t.Fatalf("%d bytes of body: framed %d bytes, want head then body (%d)", n, len(got), len(want))
		}
		small := n == 0 || mem.IsBelowBufferPoolingThreshold(n)
		if small != (released == 1) {
			t.Fatalf("%d bytes of body: released %d times before gRPC freed the message", n, released)
		}
		if !small && &data[len(data)-1].ReadOnlyData()[0] != &body[0] {
			t.Fatalf("%d bytes of body: Marshal copied it", n)
		}
		data.Ref() // as gRPC's transport does while a write is queued
		data.Free()
		if !small && released != 0 {
			t.Fatalf("%d bytes of body: released while a reference remained", n)
		}
		data.Free()
		if released != 1 {
			t.Fatalf("%d bytes of body: released %d times, want once", n, released)
		}
	}
}

// BenchmarkChunkMarshal: a 1 MiB replication chunk marshaled for gRPC as
// a message (its batches copied into a pooled buffer) or as an Encoded
// lending the batches' buffer. MB/s are of the chunk.
func BenchmarkChunkMarshal(b *testing.B) {
	batches := bytes.Repeat([]byte{5}, 1<<20)
	m := &stratav1.ReplicateResponse{Topic: "t", TopicId: "id", Partition: 3, LeaderEpoch: 7, HighWatermark: 1 << 40, LogStartOffset: 1 << 30}
	b.Run("message", func(b *testing.B) {
		b.SetBytes(int64(len(batches)))
		for range b.N {
			m.Batches = batches
			data, err := Codec{}.Marshal(m)
			if err != nil {
				b.Fatal(err)
			}
			data.Free()
		}
	})
	b.Run("encoded", func(b *testing.B) {
		b.SetBytes(int64(len(batches)))
		m.Batches = nil
		for range b.N {
			head, err := proto.Marshal(m)
			if err != nil {
				b.Fatal(err)
			}
			head = append(head, 5<<3|2, 0x80, 0x80, 0x40) // batches, 1 MiB
			data, err := Codec{}.Marshal(&Encoded{Head: head, Body: batches, Release: func() {}})
			if err != nil {
				b.Fatal(err)
			}
			data.Free()
		}
	})
}
