package broker

import (
	"bytes"
	"testing"
	"time"

	"github.com/strata-log/strata/record"
)

// TestBatchOf: simple records become one batch as sent, compressed as
// asked, with timestamp 0 meaning the broker's clock now and every other
// timestamp (-1, "no timestamp", too) kept for Produce to judge.
func TestBatchOf(t *testing.T) {
	before := time.Now().UnixMilli()
	b, err := BatchOf([]record.Record{
		{Timestamp: 0, Key: []byte("k"), Value: []byte("now")},
		{Timestamp: -1, Value: nil, Headers: []record.Header{{Key: "h", Value: []byte("x")}}},
		{Timestamp: 1234, Key: nil, Value: []byte{}},
	}, record.CompressionGzip)
	after := time.Now().UnixMilli()
	if err != nil {
		t.Fatal(err)
	}
	if b.Compression() != record.CompressionGzip || b.NumRecords() != 3 || b.TimestampType() != record.CreateTime {
		t.Fatalf("batch: compression %v, %d records, %v", b.Compression(), b.NumRecords(), b.TimestampType())
	}
	recs, err := b.Records()
	if err != nil {
		t.Fatal(err)
	}
	if ts := recs[0].Timestamp; ts < before || ts > after {
		t.Errorf("timestamp 0 became %d, want now (%d to %d)", ts, before, after)
	}
	if recs[1].Timestamp != -1 || recs[2].Timestamp != 1234 {
		t.Errorf("timestamps %d and %d, want -1 and 1234 as sent", recs[1].Timestamp, recs[2].Timestamp)
	}
	if string(recs[0].Key) != "k" || recs[1].Value != nil || recs[2].Key != nil || recs[2].Value == nil {
		t.Errorf("null and empty not kept apart: %+v", recs)
	}
	if h := recs[1].Headers; len(h) != 1 || h[0].Key != "h" || !bytes.Equal(h[0].Value, []byte("x")) {
		t.Errorf("headers %+v", h)
	}

	if _, err := BatchOf(nil, record.CompressionNone); ReasonOf(err) != ReasonInvalidRequest {
		t.Errorf("no records: %v, want INVALID_REQUEST", err)
	}
}
