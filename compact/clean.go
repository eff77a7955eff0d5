package compact

import (
	"github.com/strata-log/strata/record"
)

// Options are a cleaning's settings.
type Options struct {
	Rules
	// KeyMapBytes bounds a pass's key map (log.cleaner.dedupe.buffer.size).
	KeyMapBytes int
	// NowMs is the cleaning's clock, for the compaction lag.
	NowMs int64
	// MinCompactionLagMs: a batch whose max timestamp is younger than this
	// ends the cleanable prefix (min.compaction.lag.ms).
	MinCompactionLagMs int64
}

// CleanableEnd is the offset where the cleanable prefix of batches ends:
// the base of the first batch younger than the compaction lag, or the end
// of the batches.
func CleanableEnd(batches []record.Batch, nowMs, minLagMs int64) int64 {
	for _, b := range batches {
		if b.MaxTimestamp() > nowMs-minLagMs {
			return b.BaseOffset()
		}
	}
	if len(batches) == 0 {
		return 0
	}
	return batches[len(batches)-1].NextOffset()
}

// Clean compacts an in-memory log: batches in offset order, of which
// those from dirty on were never cleaned. It runs passes until the
// cleanable prefix is covered and returns the new batches and what the
// passes did. It is what the hot tier does segment by segment, on memory:
// the reference for tests and benchmarks.
func Clean(batches []record.Batch, dirty int64, opts Options) (out []record.Batch, passes int, st Stats, err error) {
	end := CleanableEnd(batches, opts.NowMs, opts.MinCompactionLagMs)
	producers, err := ProducerLasts(sliceSource(batches))
	if err != nil {
		return nil, 0, st, err
	}
	for dirty < end {
		m, mapEnd, err := Build(sliceSource(batches), dirty, end, opts.KeyMapBytes, opts.MaxDecompressed)
		if err != nil {
			return nil, passes, st, err
		}
		f := Filter{Map: m, MapEnd: mapEnd, Rules: opts.Rules, ProducerLast: producers}
		next := make([]record.Batch, 0, len(batches))
		s, err := f.Rewrite(sliceSource(batches), func(b record.Batch) error {
			next = append(next, b)
			return nil
		})
		st.Add(s)
		if err != nil {
			return nil, passes, st, err
		}
		batches, dirty = next, mapEnd
		passes++
	}
	return batches, passes, st, nil
}

// sliceSource yields batches from a slice.
func sliceSource(batches []record.Batch) Source {
	return func(yield func(record.Batch, error) bool) {
		for _, b := range batches {
			if !yield(b, nil) {
				return
			}
		}
	}
}
