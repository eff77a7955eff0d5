package compact

import (
	"fmt"
	"math"

	"github.com/strata-log/strata/record"
)

// Rewrite filters the batches of src, in offset order, and emits what
// takes their place, such that the emitted batches cover exactly the
// offsets src's did: each run of consecutive batches that lose every
// record becomes one empty filler batch over their range (no producer,
// the run's leader epoch and largest timestamp). A log therefore keeps
// every offset from its start to its end in exactly one batch, so the
// hot tier's segment, index, replication and truncation rules hold for a
// cleaned log as for any other; the filler costs one 61-byte header per
// run, so a cleaned log's size follows its live keys, not its history.
// (Kafka's cleaner drops such batches and leaves the gap; Strata fills it.)
//
// A run breaks where the leader epoch changes, so a follower copying the
// cleaned log learns the same epoch history, and where a batch's range
// would pass what one batch can span. Fillers from an earlier cleaning
// join the runs around them.
func (f *Filter) Rewrite(src Source, emit func(record.Batch) error) (Stats, error) {
	var st Stats
	var run filler
	flush := func() error {
		if !run.open {
			return nil
		}
		b, err := run.batch()
		run = filler{}
		if err != nil {
			return err
		}
		st.BatchesOut++
		st.BytesOut += int64(len(b))
		return emit(b)
	}
	for b, err := range src {
		if err != nil {
			return st, err
		}
		var out record.Batch
		var s Stats
		if isFiller(b) && b.BaseOffset() < f.MapEnd {
			s = Stats{BatchesIn: 1, BytesIn: int64(len(b))}
		} else if out, s, err = f.Apply(b); err != nil {
			return st, err
		}
		st.Add(s)
		if out != nil {
			if err := flush(); err != nil {
				return st, err
			}
			if err := emit(out); err != nil {
				return st, err
			}
			continue
		}
		if !run.joins(b) {
			if err := flush(); err != nil {
				return st, err
			}
		}
		run.add(b)
	}
	return st, flush()
}

// isFiller says whether b is an empty batch without a producer: a filler,
// which a later cleaning may merge with its neighbours.
func isFiller(b record.Batch) bool {
	return b.NumRecords() == 0 && b.ProducerID() == record.NoProducerID && compactable(b)
}

// filler is a run of emptied batches being gathered into one.
type filler struct {
	open       bool
	base, last int64
	epoch      int32
	maxTs      int64
}

func (r *filler) joins(b record.Batch) bool {
	return r.open && b.BaseOffset() == r.last+1 && b.LeaderEpoch() == r.epoch &&
		b.LastOffset()-r.base <= math.MaxInt32
}

func (r *filler) add(b record.Batch) {
	if !r.open {
		*r = filler{open: true, base: b.BaseOffset(), epoch: b.LeaderEpoch(), maxTs: b.MaxTimestamp()}
	}
	r.last = b.LastOffset()
	r.maxTs = max(r.maxTs, b.MaxTimestamp())
}

func (r *filler) batch() (record.Batch, error) {
	opts := record.DefaultBatchOptions()
	opts.BaseOffset, opts.LeaderEpoch = r.base, r.epoch
	b, err := record.EmptyBatch(opts, int32(r.last-r.base), r.maxTs)
	if err != nil {
		return nil, fmt.Errorf("compact: filler at %d: %w", r.base, err)
	}
	return b, nil
}

// FillerFrom returns the part of filler b from offset from on, and false
// when b is not a filler that begins below from and reaches it. A cleaning
// merges the fillers of emptied batches across the batch boundaries its
// followers copied, so a follower whose log ends at such a boundary meets a
// filler that begins below its log end: it takes the filler's range from its
// log end on. The offsets below stay in the batches it holds, which hold
// them whole as before (its own cleaning empties them as the leader's did).
func FillerFrom(b record.Batch, from int64) (record.Batch, bool, error) {
	if !isFiller(b) || b.BaseOffset() >= from || b.LastOffset() < from {
		return nil, false, nil
	}
	r := filler{open: true, base: from, last: b.LastOffset(), epoch: b.LeaderEpoch(), maxTs: b.MaxTimestamp()}
	out, err := r.batch()
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}
