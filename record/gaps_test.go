package record

import (
	"encoding/binary"
	"errors"
	"testing"
)

// TestCompactedBatch: a batch built with AddAt and SetLastOffsetDelta, as
// the cleaner writes one, keeps its base offset, offset range and producer
// fields, decodes to the retained records at their own offsets in every
// codec, and is refused by the produce path's dense check.
func TestCompactedBatch(t *testing.T) {
	for c := CompressionNone; c <= CompressionZstd; c++ {
		t.Run(c.String(), func(t *testing.T) {
			opts := BatchOptions{Compression: c, BaseOffset: 100, ProducerID: 7, ProducerEpoch: 2, BaseSequence: 40}
			bld := NewBuilder(opts)
			bld.AddAt(1, Record{Timestamp: 5, Key: []byte("a"), Value: []byte("1")})
			bld.AddAt(4, Record{Timestamp: 9, Key: []byte("b"), Value: nil})
			bld.SetLastOffsetDelta(9)
			b, err := bld.Build()
			if err != nil {
				t.Fatal(err)
			}
			if b.BaseOffset() != 100 || b.LastOffset() != 109 || b.NumRecords() != 2 ||
				b.ProducerID() != 7 || b.ProducerEpoch() != 2 || b.BaseSequence() != 40 || b.Compression() != c {
				t.Fatalf("header: base %d last %d n %d producer %d/%d/%d codec %v",
					b.BaseOffset(), b.LastOffset(), b.NumRecords(), b.ProducerID(), b.ProducerEpoch(), b.BaseSequence(), b.Compression())
			}
			if err := b.ValidateRecords(); err != nil {
				t.Fatal(err)
			}
			recs, err := b.Records()
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 2 || recs[0].Offset != 101 || string(recs[0].Key) != "a" || recs[1].Offset != 104 || recs[1].Value != nil {
				t.Fatalf("records %+v", recs)
			}
			if _, err := b.CheckRecordTimes(1 << 20); !errors.Is(err, ErrBadCount) {
				t.Fatalf("produce check of a gapped batch: %v, want ErrBadCount", err)
			}
		})
	}
}

// TestCompactedBatchRefusals: deltas out of order, a lastOffsetDelta below
// the last record and records past the range are errors, never batches.
func TestCompactedBatchRefusals(t *testing.T) {
	bld := NewBuilder(DefaultBatchOptions())
	bld.AddAt(3, Record{Key: []byte("a")})
	bld.AddAt(3, Record{Key: []byte("b")})
	if _, err := bld.Build(); err == nil {
		t.Fatal("repeated delta built")
	}
	bld.Reset(DefaultBatchOptions())
	bld.AddAt(3, Record{Key: []byte("a")})
	bld.SetLastOffsetDelta(2)
	if _, err := bld.Build(); err == nil {
		t.Fatal("lastOffsetDelta below the last record built")
	}
	// A record whose delta passes lastOffsetDelta: forge it by lowering
	// the field and fixing the CRC.
	bld.Reset(DefaultBatchOptions())
	bld.AddAt(0, Record{Key: []byte("a")})
	bld.AddAt(5, Record{Key: []byte("b")})
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint32(b[23:], 3)
	fixCRC(b)
	if err := b.ValidateRecords(); !errors.Is(err, ErrBadCount) {
		t.Fatalf("delta past lastOffsetDelta: %v", err)
	}
}

// TestEmptyBatch: the header compaction keeps for a producer's last batch
// validates, holds no records and keeps the producer's fields.
func TestEmptyBatch(t *testing.T) {
	opts := BatchOptions{BaseOffset: 50, ProducerID: 3, ProducerEpoch: 1, BaseSequence: 12, LeaderEpoch: 4}
	b, err := EmptyBatch(opts, 4, 1234)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ValidateRecords(); err != nil {
		t.Fatal(err)
	}
	recs, err := b.Records()
	if err != nil || len(recs) != 0 {
		t.Fatalf("records %v %v", recs, err)
	}
	if b.LastOffset() != 54 || b.ProducerID() != 3 || b.BaseSequence() != 12 || b.MaxTimestamp() != 1234 || b.LeaderEpoch() != 4 {
		t.Fatal("header fields lost")
	}
	if _, err := EmptyBatch(opts, -1, 0); err == nil {
		t.Fatal("negative lastOffsetDelta accepted")
	}
}
