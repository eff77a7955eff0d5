package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"reflect"
	"testing"
)

var allCodecs = []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}

// sampleRecords covers the shapes a decoder must tell apart: null and empty
// keys and values, headers with null and empty values, timestamps before
// the first record's (negative deltas), and values big enough to span
// several compression blocks.
func sampleRecords(n int) []Record {
	const base = 1_700_000_000_000
	recs := make([]Record, n)
	for i := range recs {
		r := Record{Timestamp: base + int64(i%7-3)*1000}
		switch i % 4 {
		case 0: // null key, null value
		case 1:
			r.Key, r.Value = []byte{}, []byte{}
		case 2:
			r.Key = []byte(fmt.Sprintf("key-%d", i))
			r.Value = bytes.Repeat([]byte(fmt.Sprintf("value %d ", i)), i%50+1)
		case 3:
			r.Key = []byte("k")
			r.Value = []byte(fmt.Sprintf("v%d", i))
			r.Headers = []Header{
				{Key: "trace", Value: []byte("abc")},
				{Key: "", Value: nil},
				{Key: "empty", Value: []byte{}},
			}
		}
		recs[i] = r
	}
	if n > 5 {
		// 100 KiB of mixed bytes: several 32 KiB snappy chunks, 64 KiB lz4 blocks.
		big := make([]byte, 100<<10)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range big {
			big[i] = byte('a' + rng.IntN(8))
		}
		recs[5].Value = big
	}
	return recs
}

// decodedForm is what decoding in must give: absolute offsets and, for a
// LogAppendTime batch, the append time as every timestamp.
func decodedForm(in []Record, baseOffset int64, appendTime *int64) []Record {
	out := make([]Record, len(in))
	for i, r := range in {
		r.Offset = baseOffset + int64(i)
		if appendTime != nil {
			r.Timestamp = *appendTime
		}
		out[i] = r
	}
	return out
}

func requireRecordsEqual(t testing.TB, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("record %d:\n got %s\nwant %s", i, describe(got[i]), describe(want[i]))
		}
	}
}

func describe(r Record) string {
	s := func(b []byte) string {
		if b == nil {
			return "null"
		}
		if len(b) > 40 {
			return fmt.Sprintf("%q...(%d bytes)", b[:40], len(b))
		}
		return fmt.Sprintf("%q", b)
	}
	out := fmt.Sprintf("{off %d ts %d key %s value %s headers [", r.Offset, r.Timestamp, s(r.Key), s(r.Value))
	if r.Headers == nil {
		out += "nil"
	}
	for _, h := range r.Headers {
		out += fmt.Sprintf("%q=%s ", h.Key, s(h.Value))
	}
	return out + "]}"
}

func mustEncode(t testing.TB, opts BatchOptions, recs ...Record) Batch {
	t.Helper()
	b, err := Encode(opts, recs...)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return b
}

func codecOpts(c Compression) BatchOptions {
	o := DefaultBatchOptions()
	o.Compression = c
	return o
}

// fixCRC recomputes the CRC after a test edits covered bytes, so the edit
// reaches the check it is meant for instead of failing the CRC.
func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[17:21], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }
