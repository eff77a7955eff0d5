package record

import (
	"bytes"
	"errors"
	"testing"
)

// TestRecompress: every codec to every codec keeps the records and every
// header field but the codec, with a valid CRC; the batch's own codec
// comes back unchanged; the decompression bound holds.
func TestRecompress(t *testing.T) {
	recs := []Record{
		{Timestamp: 1700000000000, Key: []byte("k1"), Value: bytes.Repeat([]byte("value "), 100), Headers: []Header{{Key: "h", Value: []byte("v")}}},
		{Timestamp: 1700000000007, Key: nil, Value: []byte("second")},
		{Timestamp: 1700000000003, Key: []byte("k3"), Value: nil},
	}
	codecs := []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}
	for _, from := range codecs {
		opts := DefaultBatchOptions()
		opts.Compression = from
		opts.BaseOffset, opts.LeaderEpoch = 42, 7
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 1234, 3, 99
		src, err := Encode(opts, recs...)
		if err != nil {
			t.Fatal(err)
		}
		want, err := src.Records()
		if err != nil {
			t.Fatal(err)
		}
		for _, to := range codecs {
			got, err := Recompress(src, to, MaxDecompressedSize)
			if err != nil {
				t.Fatalf("%s -> %s: %v", from, to, err)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("%s -> %s: %v", from, to, err)
			}
			if got.Compression() != to || got.BaseOffset() != 42 || got.LeaderEpoch() != 7 || got.ProducerID() != 1234 ||
				got.ProducerEpoch() != 3 || got.BaseSequence() != 99 || got.NumRecords() != 3 || got.LastOffsetDelta() != 2 ||
				got.FirstTimestamp() != src.FirstTimestamp() || got.MaxTimestamp() != src.MaxTimestamp() || got.TimestampType() != src.TimestampType() {
				t.Fatalf("%s -> %s: header differs", from, to)
			}
			if to == from && &got[0] != &src[0] {
				t.Fatalf("%s -> %s: copied a batch already in the codec", from, to)
			}
			rs, err := got.Records()
			if err != nil {
				t.Fatalf("%s -> %s: %v", from, to, err)
			}
			mustEqualRecords(t, rs, want)
		}
	}
	big, err := Encode(DefaultBatchOptions(), Record{Value: make([]byte, 10000)})
	if err != nil {
		t.Fatal(err)
	}
	zipped, err := Recompress(big, CompressionZstd, MaxDecompressedSize)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Recompress(zipped, CompressionNone, 1000); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("decompressing past the bound: %v", err)
	}
	if _, err := Recompress(big, Compression(7), MaxDecompressedSize); err == nil {
		t.Fatal("an unknown codec was accepted")
	}
}

func mustEqualRecords(t *testing.T, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Offset != w.Offset || g.Timestamp != w.Timestamp || !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) ||
			(g.Key == nil) != (w.Key == nil) || (g.Value == nil) != (w.Value == nil) || len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d: %+v, want %+v", i, g, w)
		}
	}
}
