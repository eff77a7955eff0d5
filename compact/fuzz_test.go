package compact

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/strata-log/strata/record"
)

// FuzzClean feeds arbitrary bytes, split into batches as a segment is read,
// to a cleaning: no input panics, and whatever comes out validates, keeps
// base offsets in order and never holds a record the input did not.
func FuzzClean(f *testing.F) {
	for seed := range uint64(4) {
		h := genHistory(rand.New(rand.NewPCG(seed, 1)))
		var seg []byte
		for _, b := range h.batches[:min(len(h.batches), 6)] {
			seg = append(seg, b...)
		}
		f.Add(seg, uint16(200), int64(5))
	}
	f.Fuzz(func(t *testing.T, data []byte, budget uint16, horizon int64) {
		var batches []record.Batch
		var prev int64 = -1
		for len(data) > 0 {
			b, rest, err := record.Next(data)
			if err != nil || b.BaseOffset() <= prev {
				break // a segment reader stops at the first bad batch too
			}
			batches = append(batches, b)
			prev, data = b.LastOffset(), rest
		}
		if len(batches) == 0 {
			return
		}
		in := map[int64]int{}
		for _, b := range batches {
			recs, err := b.RecordsLimit(1 << 20)
			if err != nil {
				return // the cleaner reports it; nothing more to check
			}
			for _, r := range recs {
				in[r.Offset]++
			}
		}
		opts := Options{NowMs: 1 << 40, Rules: Rules{TombstoneHorizon: horizon, MaxDecompressed: 1 << 20}, KeyMapBytes: int(budget)}
		out, _, _, err := Clean(batches, batches[0].BaseOffset(), opts)
		if err != nil {
			if !errors.Is(err, ErrKeyMapTooSmall) {
				t.Fatalf("valid batches refused: %v", err)
			}
			return
		}
		prev = -1
		for _, b := range out {
			if err := b.ValidateRecords(); err != nil {
				t.Fatalf("output batch at %d: %v", b.BaseOffset(), err)
			}
			if b.BaseOffset() <= prev {
				t.Fatalf("output batch at %d after one ending at %d", b.BaseOffset(), prev)
			}
			prev = b.LastOffset()
			recs, _ := b.Records()
			for _, r := range recs {
				if in[r.Offset] == 0 {
					t.Fatalf("record at %d was not in the input", r.Offset)
				}
			}
		}
	})
}

// TestKeyMapTooSmall: a budget below one batch's keys is an error naming
// the batch, not a cleaning that never ends.
func TestKeyMapTooSmall(t *testing.T) {
	b, err := record.Encode(record.DefaultBatchOptions(),
		record.Record{Key: []byte("a"), Value: []byte("1")},
		record.Record{Key: []byte("b"), Value: []byte("2")})
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, err = Clean([]record.Batch{b}, 0, Options{NowMs: 1, KeyMapBytes: cost([]byte("a"))})
	if !errors.Is(err, ErrKeyMapTooSmall) {
		t.Fatalf("got %v, want ErrKeyMapTooSmall", err)
	}
}

// TestKeyMapBudgetHolds: a map never charges more than its budget, and
// the charge per key is what EntryOverhead says, so the setting bounds
// the memory it names.
func TestKeyMapBudgetHolds(t *testing.T) {
	m := NewKeyMap(10 * cost([]byte("key-0")))
	var recs []record.Record
	for i := range 10 {
		recs = append(recs, record.Record{Offset: int64(i), Key: []byte{'k', 'e', 'y', '-', byte('0' + i)}})
	}
	if !m.tryAdd(recs) || m.Used() != 10*cost([]byte("key-0")) || m.Len() != 10 {
		t.Fatalf("ten keys: used %d, len %d", m.Used(), m.Len())
	}
	if m.tryAdd([]record.Record{{Offset: 11, Key: []byte("new")}}) {
		t.Fatal("a key past the budget was added")
	}
	if !m.tryAdd([]record.Record{{Offset: 12, Key: []byte("key-3")}}) {
		t.Fatal("a known key's new offset needs no budget")
	}
	if off, _ := m.Offset([]byte("key-3")); off != 12 {
		t.Fatalf("key-3 at %d, want 12", off)
	}
}
