package testutil

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/strata-log/strata/record"
)

// SeqBatch builds a batch of n records whose values carry the numbers
// first..first+n-1 in their first 8 bytes (so a checker can tell exactly
// which records came back), padded to valueSize bytes, each with key (nil
// for none) and timestamps ts, ts+1, ... Its base offset is first.
func SeqBatch(t testing.TB, first int64, n int, ts int64, valueSize int, key []byte) record.Batch {
	t.Helper()
	bl := record.NewBuilder(record.DefaultBatchOptions())
	for i := range n {
		v := make([]byte, max(valueSize, 8))
		binary.BigEndian.PutUint64(v, uint64(first)+uint64(i))
		bl.Add(record.Record{Timestamp: ts + int64(i), Key: key, Value: []byte(v)})
	}
	b, err := bl.Build()
	if err != nil {
		t.Fatalf("build batch: %v", err)
	}
	b.SetBaseOffset(first)
	return b
}

// IdemBatch builds one batch of an idempotent producer: producer id, epoch
// and base sequence as given, one record per value, timestamps ts, ts+1, ...
func IdemBatch(t testing.TB, id int64, epoch int16, seq int32, ts int64, values ...string) record.Batch {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = id, epoch, seq
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Timestamp: ts + int64(i), Value: []byte(v)}
	}
	b, err := record.Encode(opts, recs...)
	if err != nil {
		t.Fatalf("build batch: %v", err)
	}
	return b
}

// Values returns n distinct values naming the producer id and sequence
// they are written with: "p<id>-s<seq>-<i>".
func Values(id int64, seq int32, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("p%d-s%d-%d", id, seq, i)
	}
	return out
}
