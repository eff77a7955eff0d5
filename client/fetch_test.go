package client

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// storedBatches encodes batches of sizes[i] records each, with offsets
// assigned as a leader would, and concatenates them as a fetch response
// carries them.
func storedBatches(t *testing.T, codec record.Compression, sizes ...int) []byte {
	t.Helper()
	var out []byte
	off := int64(0)
	opts := record.DefaultBatchOptions()
	opts.Compression = codec
	for _, n := range sizes {
		bld := record.NewBuilder(opts)
		for i := range n {
			o := off + int64(i)
			bld.Add(record.Record{Timestamp: 1000 + o, Key: fmt.Appendf(nil, "k%d", o), Value: fmt.Appendf(nil, "v%d", o)})
		}
		b, err := bld.Build()
		if err != nil {
			t.Fatal(err)
		}
		b.SetBaseOffset(off)
		b.SetLeaderEpoch(3)
		out = append(out, b...)
		off += int64(n)
	}
	return out
}

func TestDecodeBatches(t *testing.T) {
	tp := TopicPartition{"t", 2}
	for _, codec := range []record.Compression{record.CompressionNone, record.CompressionZstd} {
		data := storedBatches(t, codec, 5, 5, 5)
		// The response starts at the batch holding offset 7: records
		// 5 and 6 are below the position and must be skipped.
		resp := data[len(storedBatches(t, codec, 5)):]
		recs, next, err := decodeBatches(tp, resp, 7)
		if err != nil {
			t.Fatal(err)
		}
		if next != 15 {
			t.Errorf("next = %d, want 15", next)
		}
		if len(recs) != 8 {
			t.Fatalf("%s: %d records, want 8", codec, len(recs))
		}
		for i, r := range recs {
			o := int64(7 + i)
			if r.Offset != o || r.Topic != "t" || r.Partition != 2 ||
				string(r.Key) != fmt.Sprintf("k%d", o) || string(r.Value) != fmt.Sprintf("v%d", o) ||
				r.Timestamp.UnixMilli() != 1000+o {
				t.Fatalf("record %d: %+v", i, r)
			}
		}
	}
}

func TestDecodeBatchesEmptyAndBehind(t *testing.T) {
	recs, next, err := decodeBatches(TopicPartition{"t", 0}, nil, 42)
	if err != nil || len(recs) != 0 || next != 42 {
		t.Fatalf("heartbeat: %v %d %v", recs, next, err)
	}
	// Everything below the position: nothing, and the position moves
	// past what was seen.
	data := storedBatches(t, record.CompressionNone, 3, 3)
	recs, next, err = decodeBatches(TopicPartition{"t", 0}, data, 6)
	if err != nil || len(recs) != 0 || next != 6 {
		t.Fatalf("behind: %d records, next %d, %v", len(recs), next, err)
	}
}

// A damaged batch is an error, never data: not even the good batches
// before it are returned.
func TestDecodeBatchesCorrupt(t *testing.T) {
	tp := TopicPartition{"t", 0}
	data := storedBatches(t, record.CompressionNone, 4, 4)
	first := len(storedBatches(t, record.CompressionNone, 4))

	bad := bytes.Clone(data)
	bad[first+record.HeaderSize+3] ^= 0xff // a record byte of the second batch
	recs, _, err := decodeBatches(tp, bad, 0)
	if recs != nil || err == nil {
		t.Fatalf("corrupt batch decoded: %d records, %v", len(recs), err)
	}
	if !errors.Is(err, ErrCorruptData) || !errors.Is(err, record.ErrBadCRC) || IsRetriable(err) {
		t.Errorf("error %v: want CORRUPT_DATA wrapping a CRC mismatch, not retriable", err)
	}
	if e, ok := AsError(err); !ok || e.Code != codes.DataLoss || e.Metadata["offset"] != "4" {
		t.Errorf("AsError: %+v", e)
	}

	// A response cut inside a batch is corruption too: the broker sends
	// whole batches.
	recs, _, err = decodeBatches(tp, data[:len(data)-1], 0)
	if recs != nil || !errors.Is(err, ErrCorruptData) || !errors.Is(err, record.ErrCorrupt) {
		t.Errorf("truncated response: %d records, %v", len(recs), err)
	}

	// A batch whose header and CRC hold but whose records do not decode
	// (the header claims 9 records over 4): an error naming the batch, no
	// panic.
	lying := bytes.Clone(data)
	binary.BigEndian.PutUint32(lying[first+23:], 8) // lastOffsetDelta
	binary.BigEndian.PutUint32(lying[first+57:], 9) // record count
	binary.BigEndian.PutUint32(lying[first+17:], crc32.Checksum(lying[first+21:], crc32.MakeTable(crc32.Castagnoli)))
	recs, _, err = decodeBatches(tp, lying, 0)
	if recs != nil || !errors.Is(err, ErrCorruptData) || !errors.Is(err, record.ErrBadCount) || !strings.Contains(err.Error(), "batch at offset 4") {
		t.Errorf("batch that does not decode: %d records, %v", len(recs), err)
	}
}

func TestFromWire(t *testing.T) {
	in := []*stratav1.Record{
		{Offset: 9, Value: []byte("old")},
		{Offset: 10, Key: []byte("k"), Value: []byte("v"), TimestampMs: 5, Headers: []*stratav1.Header{{Key: "h", Value: []byte("x")}}},
		{Offset: 11, Value: nil},
	}
	recs, next := fromWire(TopicPartition{"t", 1}, in, 10)
	if next != 12 || len(recs) != 2 {
		t.Fatalf("%d records, next %d", len(recs), next)
	}
	r := recs[0]
	if r.Offset != 10 || string(r.Key) != "k" || string(r.Value) != "v" || r.Timestamp.UnixMilli() != 5 ||
		len(r.Headers) != 1 || r.Headers[0].Key != "h" || string(r.Headers[0].Value) != "x" || r.Partition != 1 {
		t.Errorf("record: %+v", r)
	}
	if recs[1].Value != nil || recs[1].Key != nil {
		t.Errorf("null key and value came back as %q %q", recs[1].Key, recs[1].Value)
	}
}

func TestFetchRetriable(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{errStalled, true},
		{errStreamEnded, true},
		{status.Error(codes.Unavailable, "gone"), true},
		{status.Error(codes.Internal, "RST_STREAM"), true},
		{status.Error(codes.InvalidArgument, "bad"), false},
		{status.Error(codes.Unimplemented, "no"), false},
		{ErrNotLeader, true},
		{ErrOffsetOutOfRange, false},
		{ErrCorruptBatch, false},
		{errors.New("other"), false},
	}
	for _, c := range cases {
		if got := fetchRetriable(c.err); got != c.want {
			t.Errorf("fetchRetriable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
