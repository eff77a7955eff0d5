package compact

import (
	"testing"

	"github.com/strata-log/strata/record"
)

// A follower whose log ends inside a leader's merged filler takes the
// filler from its log end on; anything else is not cut.
func TestFillerFrom(t *testing.T) {
	opts := record.DefaultBatchOptions()
	opts.BaseOffset, opts.LeaderEpoch = 2170, 4
	filler, err := record.EmptyBatch(opts, 30, 12345) // 2170..2200
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := FillerFrom(filler, 2193)
	if err != nil || !ok {
		t.Fatalf("FillerFrom(2170..2200, 2193) = %v, %v", ok, err)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("the cut filler does not validate: %v", err)
	}
	if got.BaseOffset() != 2193 || got.LastOffset() != 2200 || got.NumRecords() != 0 ||
		got.LeaderEpoch() != 4 || got.MaxTimestamp() != 12345 || got.ProducerID() != record.NoProducerID {
		t.Fatalf("cut filler: base %d last %d records %d epoch %d maxTs %d producer %d",
			got.BaseOffset(), got.LastOffset(), got.NumRecords(), got.LeaderEpoch(), got.MaxTimestamp(), got.ProducerID())
	}
	for _, from := range []int64{2170, 2169, 2201} { // begins at, or does not reach, from
		if _, ok, err := FillerFrom(filler, from); ok || err != nil {
			t.Errorf("FillerFrom(2170..2200, %d) = %v, %v; want not cut", from, ok, err)
		}
	}
	// A batch with records, and a producer's retained empty batch, keep
	// their own boundaries: never cut.
	b := record.NewBuilder(opts)
	b.Add(record.Record{Key: []byte("k"), Value: []byte("v")})
	b.SetLastOffsetDelta(30)
	withRecords, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	popts := opts
	popts.ProducerID, popts.ProducerEpoch = 7, 0
	retained, err := record.EmptyBatch(popts, 30, 12345)
	if err != nil {
		t.Fatal(err)
	}
	for name, batch := range map[string]record.Batch{"with records": withRecords, "producer's": retained} {
		if _, ok, err := FillerFrom(batch, 2193); ok || err != nil {
			t.Errorf("%s batch: FillerFrom = %v, %v; want not cut", name, ok, err)
		}
	}
}
