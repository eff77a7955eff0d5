package compact

import (
	"errors"
	"fmt"

	"github.com/strata-log/strata/record"
)

// EntryOverhead is what a KeyMap charges for one key beyond the key's own
// bytes: the map entry's string header, offset and its share of the
// buckets, measured on amd64 (see TestKeyMapBudgetHolds).
const EntryOverhead = 64

// ErrKeyMapTooSmall means not even one batch's keys fit the key map's
// budget: the cleaner cannot make progress and says so rather than
// cleaning nothing forever.
var ErrKeyMapTooSmall = errors.New("compact: key map budget below one batch's keys")

// KeyMap maps each key of a dirty range to its highest offset there,
// within a memory budget.
type KeyMap struct {
	budget  int
	used    int
	offsets map[string]int64
}

// NewKeyMap returns an empty map that holds keys up to budget bytes.
func NewKeyMap(budget int) *KeyMap {
	return &KeyMap{budget: budget, offsets: make(map[string]int64)}
}

// Len is the number of keys held.
func (m *KeyMap) Len() int { return len(m.offsets) }

// Used is the bytes charged so far.
func (m *KeyMap) Used() int { return m.used }

// Offset returns the highest offset mapped for key.
func (m *KeyMap) Offset(key []byte) (int64, bool) {
	off, ok := m.offsets[string(key)] // no allocation for the lookup
	return off, ok
}

// cost is what adding key charges.
func cost(key []byte) int { return len(key) + EntryOverhead }

// tryAdd maps the keyed records of one batch if their new keys fit, all or
// nothing, and reports whether they did. Records whose batch rules exclude
// them from compaction (transactional, control) are not passed here.
func (m *KeyMap) tryAdd(recs []record.Record) bool {
	need := 0
	var fresh map[string]struct{}
	for _, r := range recs {
		if r.Key == nil {
			continue
		}
		if _, ok := m.offsets[string(r.Key)]; ok {
			continue
		}
		if fresh == nil {
			fresh = make(map[string]struct{})
		}
		if _, ok := fresh[string(r.Key)]; ok {
			continue
		}
		fresh[string(r.Key)] = struct{}{}
		need += cost(r.Key)
	}
	if m.used+need > m.budget {
		return false
	}
	m.used += need
	for _, r := range recs {
		if r.Key != nil {
			m.offsets[string(r.Key)] = r.Offset
		}
	}
	return true
}

// Build maps the batches of src from offset from (batches ending before it
// are skipped) until end or until the budget is full, and returns the map
// and the offset it covers up to: every batch below mapEnd and at or past
// from was mapped, none at or past mapEnd. mapEnd is a batch's base offset,
// or end when src ran out first. Batches must come in offset order.
func Build(src Source, from, end int64, budget, maxDecompressed int) (m *KeyMap, mapEnd int64, err error) {
	m = NewKeyMap(budget)
	mapEnd = end
	for b, err := range src {
		if err != nil {
			return nil, 0, err
		}
		if b.LastOffset() < from {
			continue
		}
		if b.BaseOffset() >= end {
			break
		}
		if !compactable(b) {
			continue
		}
		recs, err := b.RecordsLimit(maxDecompressed)
		if err != nil {
			return nil, 0, fmt.Errorf("compact: batch at offset %d: %w", b.BaseOffset(), err)
		}
		if !m.tryAdd(recs) {
			if m.Len() == 0 {
				return nil, 0, fmt.Errorf("%w: batch at offset %d has %d records, budget %d bytes", ErrKeyMapTooSmall, b.BaseOffset(), len(recs), budget)
			}
			return m, b.BaseOffset(), nil
		}
	}
	return m, mapEnd, nil
}

// compactable says whether compaction's rules apply to a batch's records.
func compactable(b record.Batch) bool { return !b.IsTransactional() && !b.IsControl() }
