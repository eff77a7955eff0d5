package rpc

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// decodeReplicateResponse reads what proto.Unmarshal reads, with Batches
// a slice of the input rather than a copy.
func TestDecodeReplicateResponse(t *testing.T) {
	msgs := []*stratav1.ReplicateResponse{
		{},
		{Topic: "t", TopicId: "id", Partition: 3, LeaderEpoch: 7, HighWatermark: 99, LogStartOffset: 4},
		{Topic: "t", Batches: bytes.Repeat([]byte{1, 2, 3}, 5000), HighWatermark: 10},
		{Topic: "t", ErrorReason: "OFFSET_OUT_OF_RANGE", ErrorMessage: "below", LogStartOffset: 12},
	}
	for i, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		// A field this build does not know is kept as proto.Unmarshal keeps it.
		b = protowire.AppendTag(b, 99, protowire.VarintType)
		b = protowire.AppendVarint(b, 5)
		want := new(stratav1.ReplicateResponse)
		if err := proto.Unmarshal(b, want); err != nil {
			t.Fatal(err)
		}
		got, err := decodeReplicateResponse(b)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("message %d: got %v, want %v", i, got, want)
		}
		if len(m.Batches) > 0 {
			// Batches is the input's bytes, not a copy.
			if i := bytes.Index(b, m.Batches); i < 0 || &b[i] != &got.Batches[0] {
				t.Fatalf("message %d: Batches is a copy", i)
			}
		}
	}
}

// A second batches field replaces the first, as proto.Unmarshal does.
func TestDecodeReplicateResponseLastBatchesWins(t *testing.T) {
	var b []byte
	for _, v := range []string{"first", "second"} {
		b = protowire.AppendTag(b, batchesField, protowire.BytesType)
		b = protowire.AppendBytes(b, []byte(v))
	}
	got, err := decodeReplicateResponse(b)
	if err != nil || string(got.Batches) != "second" {
		t.Fatalf("got %q, %v; want \"second\"", got.GetBatches(), err)
	}
}

// Damaged input is an error, as from proto.Unmarshal, never a chunk.
func TestDecodeReplicateResponseDamaged(t *testing.T) {
	full, err := proto.Marshal(&stratav1.ReplicateResponse{Topic: "t", Batches: make([]byte, 100), HighWatermark: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{
		full[:len(full)-50], // batches cut short
		{0x2a, 0xff},        // a length that never ends
		{0x0a, 0x05, 'a'},   // topic cut short
		{0x07},              // field number 0
	} {
		if c, err := decodeReplicateResponse(b); err == nil {
			t.Errorf("% x: decoded %v, want an error", b, c)
		}
		if proto.Unmarshal(b, new(stratav1.ReplicateResponse)) == nil {
			t.Errorf("% x: proto.Unmarshal takes it: not a damaged message", b)
		}
	}
}
