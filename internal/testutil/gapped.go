package testutil

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/strata-log/strata/record"
)

// GappedBatch builds a batch as the log cleaner leaves one: it covers
// offsets base to base+lastDelta (its lastOffsetDelta kept) but holds only
// the records at the deltas in keep, which increase; none is an empty
// batch, the header the cleaner keeps for a producer's last batch. Record
// values are their offsets (8 bytes, big-endian, as SeqBatch's), keys
// "k<offset>", timestamps ts plus the delta. The batch carries leader epoch
// epoch, as a log stores it.
func GappedBatch(t testing.TB, base int64, lastDelta int32, keep []int32, epoch int32, ts int64) record.Batch {
	t.Helper()
	var b record.Batch
	var err error
	if len(keep) == 0 {
		b, err = record.EmptyBatch(record.DefaultBatchOptions(), lastDelta, ts)
	} else {
		bl := record.NewBuilder(record.DefaultBatchOptions())
		for _, d := range keep {
			v := make([]byte, 8)
			binary.BigEndian.PutUint64(v, uint64(base+int64(d)))
			bl.AddAt(d, record.Record{Timestamp: ts + int64(d), Key: []byte(fmt.Sprintf("k%d", base+int64(d))), Value: v})
		}
		bl.SetLastOffsetDelta(lastDelta)
		b, err = bl.Build()
	}
	if err != nil {
		t.Fatalf("build gapped batch at %d: %v", base, err)
	}
	b.SetBaseOffset(base)
	b.SetLeaderEpoch(epoch)
	if err := b.Validate(); err != nil {
		t.Fatalf("gapped batch at %d: %v", base, err)
	}
	return b
}

// GapSpec is one batch of a gapped log: its offset range and the deltas
// of the records it keeps.
type GapSpec struct {
	Base      int64
	LastDelta int32
	Keep      []int32
}

// GappedLog builds the batches of specs, one after another, as the bytes a
// leader of a compacted log sends a follower, with epoch; a record's
// timestamp is ts plus its offset. It returns them with the offsets of
// every record they hold.
func GappedLog(t testing.TB, specs []GapSpec, epoch int32, ts int64) (data []byte, offsets []int64) {
	t.Helper()
	for _, s := range specs {
		data = append(data, GappedBatch(t, s.Base, s.LastDelta, s.Keep, epoch, ts+s.Base)...)
		for _, d := range s.Keep {
			offsets = append(offsets, s.Base+int64(d))
		}
	}
	return data, offsets
}
