package compact

import (
	"fmt"
	"iter"

	"github.com/strata-log/strata/record"
)

// Source yields batches in offset order: a segment's, or a log's.
type Source = iter.Seq2[record.Batch, error]

// Rules are the topic settings a filter applies, in milliseconds.
type Rules struct {
	// TombstoneHorizon: a tombstone (null value) at an offset below it is
	// removed once superseded by nothing; at or above it, kept. The caller
	// sets it where delete.retention.ms has passed since a cleaning first
	// covered the offsets below (Kafka's rule: a tombstone stays readable
	// for delete.retention.ms after the cleaner first passed it), so a
	// tombstone written with an old timestamp is not removed at once.
	TombstoneHorizon int64
	// MaxDecompressed bounds a batch's decompressed records (<= 0:
	// record.MaxDecompressedSize).
	MaxDecompressed int
}

// Filter is one pass's decision over the batches below its map end.
type Filter struct {
	Map *KeyMap
	// MapEnd: batches at or past it are not filtered.
	MapEnd int64
	Rules  Rules
	// ProducerLast maps a producer id to the last offset of its last batch
	// in the whole log (see ProducerLasts): an emptied batch ending there
	// keeps its header.
	ProducerLast map[int64]int64
}

// Stats counts what a filter did.
type Stats struct {
	BatchesIn, BatchesOut int
	RecordsIn, RecordsOut int
	BytesIn, BytesOut     int64
	// EmptyKept counts emptied batches kept as headers for their producer.
	EmptyKept int
}

// Add sums s and o.
func (s *Stats) Add(o Stats) {
	s.BatchesIn += o.BatchesIn
	s.BatchesOut += o.BatchesOut
	s.RecordsIn += o.RecordsIn
	s.RecordsOut += o.RecordsOut
	s.BytesIn += o.BytesIn
	s.BytesOut += o.BytesOut
	s.EmptyKept += o.EmptyKept
}

// Apply filters one batch. It returns the batch to write in its place:
// b itself when every record stays (or the batch is past MapEnd or not
// compactable), a new batch when some do, or nil when the batch goes. b
// must have passed Validate (as record.Next does).
func (f *Filter) Apply(b record.Batch) (record.Batch, Stats, error) {
	st := Stats{BatchesIn: 1, RecordsIn: int(b.NumRecords()), BytesIn: int64(len(b))}
	if b.BaseOffset() >= f.MapEnd || !compactable(b) {
		st.BatchesOut, st.RecordsOut, st.BytesOut = 1, st.RecordsIn, st.BytesIn
		return b, st, nil
	}
	recs, err := b.RecordsLimit(f.Rules.MaxDecompressed)
	if err != nil {
		return nil, st, fmt.Errorf("compact: batch at offset %d: %w", b.BaseOffset(), err)
	}
	kept := recs[:0:0]
	for _, r := range recs {
		if f.retain(r) {
			kept = append(kept, r)
		}
	}
	switch {
	case len(kept) == 0:
		if last, ok := f.ProducerLast[b.ProducerID()]; !ok || b.ProducerID() == record.NoProducerID || last != b.LastOffset() {
			return nil, st, nil
		}
		out, err := record.EmptyBatch(optionsOf(b), b.LastOffsetDelta(), b.MaxTimestamp())
		if err != nil {
			return nil, st, err
		}
		st.BatchesOut, st.BytesOut, st.EmptyKept = 1, int64(len(out)), 1
		return out, st, nil
	case len(kept) == len(recs):
		st.BatchesOut, st.RecordsOut, st.BytesOut = 1, st.RecordsIn, st.BytesIn
		return b, st, nil
	}
	bld := record.NewBuilder(optionsOf(b))
	for _, r := range kept {
		bld.AddAt(int32(r.Offset-b.BaseOffset()), r)
	}
	bld.SetLastOffsetDelta(b.LastOffsetDelta())
	out, err := bld.Build()
	if err != nil {
		return nil, st, fmt.Errorf("compact: rewrite batch at offset %d: %w", b.BaseOffset(), err)
	}
	st.BatchesOut, st.RecordsOut, st.BytesOut = 1, len(kept), int64(len(out))
	return out, st, nil
}

// Loses reports whether Apply would drop a record of b, so that a cleaner
// can leave a stretch of the log that loses nothing as it is. Fillers,
// empty batches and batches past MapEnd or not compactable lose nothing
// (an emptied producer batch that is no longer its producer's last is
// left too: keeping its header is only conservative).
func (f *Filter) Loses(b record.Batch) (bool, error) {
	if b.BaseOffset() >= f.MapEnd || !compactable(b) || b.NumRecords() == 0 {
		return false, nil
	}
	recs, err := b.RecordsLimit(f.Rules.MaxDecompressed)
	if err != nil {
		return false, fmt.Errorf("compact: batch at offset %d: %w", b.BaseOffset(), err)
	}
	for _, r := range recs {
		if !f.retain(r) {
			return true, nil
		}
	}
	return false, nil
}

// retain is Kafka's rule for one record below the map end.
func (f *Filter) retain(r record.Record) bool {
	if r.Key == nil {
		return false // a compacted log has no use for it, as in Kafka
	}
	if off, ok := f.Map.Offset(r.Key); ok && r.Offset < off {
		return false // superseded
	}
	if r.Value == nil {
		return r.Offset >= f.Rules.TombstoneHorizon
	}
	return true
}

// optionsOf are the header fields a rewrite of b keeps.
func optionsOf(b record.Batch) record.BatchOptions {
	return record.BatchOptions{
		Compression:   b.Compression(),
		BaseOffset:    b.BaseOffset(),
		LeaderEpoch:   b.LeaderEpoch(),
		ProducerID:    b.ProducerID(),
		ProducerEpoch: b.ProducerEpoch(),
		BaseSequence:  b.BaseSequence(),
		TimestampType: b.TimestampType(),
	}
}

// ProducerLasts maps each producer id in src to the last offset of its
// last batch: the batches a cleaning must not remove entirely.
func ProducerLasts(src Source) (map[int64]int64, error) {
	last := make(map[int64]int64)
	for b, err := range src {
		if err != nil {
			return nil, err
		}
		if pid := b.ProducerID(); pid != record.NoProducerID {
			last[pid] = max(last[pid], b.LastOffset())
		}
	}
	return last, nil
}
