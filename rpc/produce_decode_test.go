package rpc

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// decodeProduceRequest reads what proto.Unmarshal reads, with Batch a
// slice of the input rather than a copy.
func TestDecodeProduceRequest(t *testing.T) {
	msgs := []*stratav1.ProduceRequest{
		{},
		{Topic: "t", Partition: 3, Acks: stratav1.Acks_ACKS_ALL, TimeoutMs: 500},
		{Topic: "t", Batch: bytes.Repeat([]byte{1, 2, 3}, 5000), Acks: stratav1.Acks_ACKS_LEADER},
		{Topic: "t", Records: []*stratav1.Record{{Key: []byte("k"), Value: []byte("v"), TimestampMs: 9}}, Compression: stratav1.Compression_COMPRESSION_ZSTD},
	}
	for i, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		// A field this build does not know is kept as proto.Unmarshal keeps it.
		b = protowire.AppendTag(b, 99, protowire.VarintType)
		b = protowire.AppendVarint(b, 5)
		want := new(stratav1.ProduceRequest)
		if err := proto.Unmarshal(b, want); err != nil {
			t.Fatal(err)
		}
		got, err := decodeProduceRequest(b)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("message %d: got %v, want %v", i, got, want)
		}
		if len(m.Batch) > 0 {
			if j := bytes.Index(b, m.Batch); j < 0 || &b[j] != &got.Batch[0] {
				t.Fatalf("message %d: Batch is a copy", i)
			}
		}
	}
}

// A second batch field replaces the first, as proto.Unmarshal does.
func TestDecodeProduceRequestLastBatchWins(t *testing.T) {
	var b []byte
	for _, v := range []string{"first", "second"} {
		b = protowire.AppendTag(b, batchField, protowire.BytesType)
		b = protowire.AppendBytes(b, []byte(v))
	}
	got, err := decodeProduceRequest(b)
	if err != nil || string(got.Batch) != "second" {
		t.Fatalf("got %q, %v; want \"second\"", got.GetBatch(), err)
	}
}

// Whatever the bytes, decodeProduceRequest agrees with proto.Unmarshal:
// both refuse them, or both read the same request, and never panics.
func FuzzDecodeProduceRequest(f *testing.F) {
	for _, m := range []*stratav1.ProduceRequest{
		{Topic: "t", Batch: []byte("batch"), Acks: stratav1.Acks_ACKS_ALL},
		{Topic: "t", Records: []*stratav1.Record{{Value: []byte("v")}}},
	} {
		b, _ := proto.Marshal(m)
		f.Add(b)
		f.Add(b[:len(b)-2])
	}
	f.Add([]byte{0x2a, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		want := new(stratav1.ProduceRequest)
		werr := proto.Unmarshal(b, want)
		got, err := decodeProduceRequest(b)
		if (err == nil) != (werr == nil) {
			t.Fatalf("% x: decodeProduceRequest says %v, proto.Unmarshal %v", b, err, werr)
		}
		if err == nil && !proto.Equal(got, want) {
			t.Fatalf("% x: got %v, want %v", b, got, want)
		}
	})
}

// Batches decoded in place are stored as sent: many producers at once,
// each batch lying in a pooled receive buffer that goes back to the pool
// (and to the next request, filled with 0xa5 by this package's tests) as
// soon as its call returns. Every batch read back holds its own records,
// which it would not if the log kept or wrote a buffer after its call
// returned; under -race, a request still reading a buffer the next one is
// received into is a race.
func TestProduceInPlaceStoresWhatWasSent(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	tb.createTopic(t, "inplace", 1, nil)
	const producers, batches, perBatch = 8, 20, 50
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range batches {
				values := make([]string, perBatch)
				for i := range values {
					// Large enough that gRPC pools the request's buffer.
					values[i] = fmt.Sprintf("p%d-b%d-r%d-%s", p, n, i, bytes.Repeat([]byte{byte('a' + p)}, 200))
				}
				_, err := tb.produce.Produce(testCtx(t), &stratav1.ProduceRequest{Topic: "inplace", Batch: batchOf(t, values...)})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	_, recs := tb.readAll(t, "inplace", 0, 0)
	if len(recs) != producers*batches*perBatch {
		t.Fatalf("read %d records, want %d", len(recs), producers*batches*perBatch)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		v := string(r.Value)
		var p, n, i int
		if _, err := fmt.Sscanf(v, "p%d-b%d-r%d-", &p, &n, &i); err != nil || string(r.Key) != "k"+v ||
			!bytes.HasSuffix(r.Value, bytes.Repeat([]byte{byte('a' + p)}, 200)) || seen[v] {
			t.Fatalf("record at %d is not one sent, or sent once: key %q value %q", r.Offset, r.Key, v)
		}
		seen[v] = true
	}
}

// A request that is not a ProduceRequest is refused as gRPC refuses one
// its codec cannot decode, and nothing is written.
func TestProduceInPlaceDamagedRequest(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	tb.createTopic(t, "damaged", 1, nil)
	err := tb.conn.Invoke(testCtx(t), stratav1.ProduceService_Produce_FullMethodName, []byte{0x2a, 0xff}, new(stratav1.ProduceResponse), grpc.ForceCodec(rawCodec{}))
	if status.Code(err) != codes.Internal {
		t.Fatalf("got %v, want Internal", err)
	}
	if _, recs := tb.readAll(t, "damaged", 0, 0); len(recs) != 0 {
		t.Fatalf("a damaged request wrote %d records", len(recs))
	}
}

// rawCodec sends a []byte as the message's bytes, unchecked.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.([]byte); ok {
		return b, nil
	}
	return proto.Marshal(v.(proto.Message))
}
func (rawCodec) Unmarshal(b []byte, v any) error { return proto.Unmarshal(b, v.(proto.Message)) }

// The decode of a 1 MiB produce request: proto.Unmarshal copies the batch
// into a fresh allocation, decodeProduceRequest leaves it where it is.
//
//	go test -run '^$' -bench ProduceRequestDecode -benchmem ./rpc/
func BenchmarkProduceRequestDecode(b *testing.B) {
	msg, err := proto.Marshal(&stratav1.ProduceRequest{Topic: "t", Batch: bytes.Repeat([]byte{7}, 1<<20), Acks: stratav1.Acks_ACKS_ALL})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("proto.Unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			if err := proto.Unmarshal(msg, new(stratav1.ProduceRequest)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("in place", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			if _, err := decodeProduceRequest(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
}
