package compact

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-log/strata/record"
)

// history is a generated log: its batches and, for the model, every record
// with its offset and the index of its batch.
type history struct {
	batches []record.Batch
	records []record.Record
	batchOf []int
}

// genHistory writes a random log: keys from a small set (so keys repeat),
// some tombstones, a few keyless records, several producers (one without
// idempotence), every codec, timestamps that mostly rise, and offset gaps
// between batches as a log cleaned before has.
func genHistory(rng *rand.Rand) history {
	var h history
	nKeys := 1 + rng.IntN(60)
	producers := []int64{record.NoProducerID, 11, 12, 13}[:1+rng.IntN(4)]
	seq := map[int64]int32{}
	off := int64(rng.IntN(1000))
	ts := int64(1_000_000)
	for range 1 + rng.IntN(120) {
		pid := producers[rng.IntN(len(producers))]
		opts := record.DefaultBatchOptions()
		opts.Compression = record.Compression(rng.IntN(5))
		opts.BaseOffset = off
		opts.LeaderEpoch = int32(rng.IntN(3))
		if rng.IntN(6) == 0 {
			opts.TimestampType = record.LogAppendTime
		}
		if pid != record.NoProducerID {
			opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, 1, seq[pid]
		}
		n := 1 + rng.IntN(16)
		bld := record.NewBuilder(opts)
		var recs []record.Record
		for i := range n {
			ts += int64(rng.IntN(50)) - 5
			r := record.Record{Timestamp: ts}
			if rng.IntN(40) != 0 {
				r.Key = []byte(fmt.Sprintf("key-%d", rng.IntN(nKeys)))
			}
			if rng.IntN(5) != 0 {
				r.Value = bytes.Repeat([]byte{byte(i)}, rng.IntN(30))
			}
			if rng.IntN(8) == 0 {
				r.Headers = []record.Header{{Key: "h", Value: []byte("x")}}
			}
			bld.Add(r)
			recs = append(recs, r)
		}
		b, err := bld.Build()
		if err != nil {
			panic(err)
		}
		// Decode what was written: LogAppendTime gives every record the
		// batch's max timestamp.
		dec, err := b.Records()
		if err != nil {
			panic(err)
		}
		for _, r := range dec {
			h.records = append(h.records, r)
			h.batchOf = append(h.batchOf, len(h.batches))
		}
		h.batches = append(h.batches, b)
		seq[pid] += int32(n)
		off = b.NextOffset() + int64(rng.IntN(3)) // an earlier cleaning's gap
	}
	return h
}

// model is what a compacted log must hold: for the records below the
// cleanable end, the last of each key unless it is an expired tombstone;
// every record from the end on.
func model(h history, opts Options) (kept []record.Record, end int64) {
	end = h.batches[len(h.batches)-1].NextOffset()
	for _, b := range h.batches {
		if b.MaxTimestamp() > opts.NowMs-opts.MinCompactionLagMs {
			end = b.BaseOffset()
			break
		}
	}
	last := map[string]int64{}
	for _, r := range h.records {
		if r.Offset < end && r.Key != nil {
			last[string(r.Key)] = r.Offset
		}
	}
	for _, r := range h.records {
		switch {
		case r.Offset >= end:
		case r.Key == nil || last[string(r.Key)] != r.Offset:
			continue
		case r.Value == nil && r.Offset < opts.TombstoneHorizon:
			continue
		}
		kept = append(kept, r)
	}
	return kept, end
}

// maxBatchKeyCost is the key map budget the largest batch needs.
func maxBatchKeyCost(h history) int {
	need := 0
	for _, b := range h.batches {
		seen := map[string]bool{}
		n := 0
		recs, _ := b.Records()
		for _, r := range recs {
			if r.Key != nil && !seen[string(r.Key)] {
				seen[string(r.Key)] = true
				n += cost(r.Key)
			}
		}
		need = max(need, n)
	}
	return need
}

// TestCleanMatchesModel: over random key histories, the compacted log
// holds exactly the model's records at their own offsets, in order; every
// batch validates (CRC and records), keeps its base and last offset, leader
// epoch and producer fields; an emptied batch survives, as a header, only
// when it is its producer's last; an untouched batch is byte for byte the
// same; and cleaning the result again changes nothing.
func TestCleanMatchesModel(t *testing.T) {
	seeds := 400
	if testing.Short() {
		seeds = 60
	}
	multiPass := 0 // seeds whose budget forced more than one pass
	defer func() {
		if multiPass < seeds/10 {
			t.Errorf("only %d of %d seeds cleaned in several passes: the budgets do not exercise passes", multiPass, seeds)
		}
	}()
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 27))
		h := genHistory(rng)
		need := maxBatchKeyCost(h)
		span := h.records[len(h.records)-1].Timestamp - h.records[0].Timestamp
		opts := Options{
			NowMs: h.records[len(h.records)-1].Timestamp + int64(rng.IntN(200)),
			// Anywhere from before the log (every tombstone kept) to past
			// it (every superseded-by-nothing tombstone removed).
			Rules: Rules{TombstoneHorizon: h.batches[0].BaseOffset() - 1 + int64(rng.IntN(int(h.batches[len(h.batches)-1].NextOffset()-h.batches[0].BaseOffset())+2))},
			// From one batch's keys (many passes) to all of them (one).
			KeyMapBytes:        need + rng.IntN(need*4+1),
			MinCompactionLagMs: int64(rng.IntN(int(span)/2 + 2)),
		}
		if rng.IntN(4) == 0 {
			opts.MinCompactionLagMs = 0
		}
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			out, passes, _, err := Clean(h.batches, h.batches[0].BaseOffset(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if passes > 1 {
				multiPass++
			}
			want, end := model(h, opts)
			checkAgainstModel(t, h, out, want, end)
			if passes < 1 && end > h.batches[0].BaseOffset() {
				t.Fatalf("no pass over a cleanable prefix ending at %d", end)
			}
			again, _, _, err := Clean(out, h.batches[0].BaseOffset(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(again) != len(out) {
				t.Fatalf("cleaning twice: %d batches, then %d", len(out), len(again))
			}
			for i := range again {
				if !bytes.Equal(again[i], out[i]) {
					t.Fatalf("cleaning twice changed batch %d (offset %d)", i, out[i].BaseOffset())
				}
			}
		})
	}
}

func checkAgainstModel(t *testing.T, h history, out []record.Batch, want []record.Record, end int64) {
	t.Helper()
	lasts, _ := ProducerLasts(sliceSource(h.batches))
	in := map[int64]record.Batch{}
	for _, b := range h.batches {
		in[b.BaseOffset()] = b
	}
	keptIn := map[int64]int{} // input batch base -> records the model keeps
	for _, r := range want {
		i := slices.IndexFunc(h.batches, func(b record.Batch) bool { return b.BaseOffset() <= r.Offset && r.Offset <= b.LastOffset() })
		keptIn[h.batches[i].BaseOffset()]++
	}
	var got []record.Record
	seen := map[int64]bool{}
	var covered, inputCovered int64
	prevEnd := int64(-1)
	for _, b := range out {
		if err := b.ValidateRecords(); err != nil {
			t.Fatalf("batch at %d: %v", b.BaseOffset(), err)
		}
		if b.BaseOffset() <= prevEnd {
			t.Fatalf("batch at %d overlaps the one before, ending at %d", b.BaseOffset(), prevEnd)
		}
		prevEnd = b.LastOffset()
		covered += b.LastOffset() - b.BaseOffset() + 1
		if isFiller(b) {
			// A filler stands for whole input batches that lost every
			// record and none of which was a producer's last.
			for _, ib := range h.batches {
				if ib.BaseOffset() > b.LastOffset() || ib.LastOffset() < b.BaseOffset() {
					continue
				}
				if ib.BaseOffset() < b.BaseOffset() || ib.LastOffset() > b.LastOffset() {
					t.Fatalf("filler [%d, %d] cuts input batch [%d, %d]", b.BaseOffset(), b.LastOffset(), ib.BaseOffset(), ib.LastOffset())
				}
				if keptIn[ib.BaseOffset()] > 0 {
					t.Fatalf("filler [%d, %d] covers batch at %d, which keeps records", b.BaseOffset(), b.LastOffset(), ib.BaseOffset())
				}
				if pid := ib.ProducerID(); pid != record.NoProducerID && lasts[pid] == ib.LastOffset() {
					t.Fatalf("filler [%d, %d] covers producer %d's last batch", b.BaseOffset(), b.LastOffset(), pid)
				}
				if ib.LeaderEpoch() != b.LeaderEpoch() {
					t.Fatalf("filler [%d, %d] of epoch %d covers a batch of epoch %d", b.BaseOffset(), b.LastOffset(), b.LeaderEpoch(), ib.LeaderEpoch())
				}
			}
			continue
		}
		orig, ok := in[b.BaseOffset()]
		if !ok {
			t.Fatalf("batch at %d has no input batch at that base", b.BaseOffset())
		}
		seen[b.BaseOffset()] = true
		if b.LastOffset() != orig.LastOffset() || b.LeaderEpoch() != orig.LeaderEpoch() ||
			b.ProducerID() != orig.ProducerID() || b.ProducerEpoch() != orig.ProducerEpoch() ||
			b.BaseSequence() != orig.BaseSequence() || b.TimestampType() != orig.TimestampType() {
			t.Fatalf("batch at %d lost header fields", b.BaseOffset())
		}
		switch n := int(b.NumRecords()); {
		case n == 0:
			if orig.ProducerID() == record.NoProducerID || lasts[orig.ProducerID()] != orig.LastOffset() {
				t.Fatalf("empty batch at %d is not its producer's last", b.BaseOffset())
			}
		case n == int(orig.NumRecords()):
			if !bytes.Equal(b, orig) {
				t.Fatalf("batch at %d kept every record but changed", b.BaseOffset())
			}
		default:
			if b.Compression() != orig.Compression() {
				t.Fatalf("batch at %d: codec %v, was %v", b.BaseOffset(), b.Compression(), orig.Compression())
			}
		}
		if int(b.NumRecords()) != keptIn[b.BaseOffset()] {
			t.Fatalf("batch at %d holds %d records, the model keeps %d", b.BaseOffset(), b.NumRecords(), keptIn[b.BaseOffset()])
		}
		recs, err := b.Records()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, recs...)
	}
	for _, b := range h.batches {
		inputCovered += b.LastOffset() - b.BaseOffset() + 1
	}
	if covered != inputCovered {
		t.Fatalf("output batches cover %d offsets, the input's %d: no offset may lose its batch", covered, inputCovered)
	}
	for _, b := range h.batches {
		if keptIn[b.BaseOffset()] > 0 && !seen[b.BaseOffset()] {
			t.Fatalf("batch at %d, which keeps records, is gone", b.BaseOffset())
		}
	}
	for _, b := range h.batches {
		pid := b.ProducerID()
		if pid != record.NoProducerID && lasts[pid] == b.LastOffset() && !seen[b.BaseOffset()] {
			t.Fatalf("producer %d's last batch at %d is gone", pid, b.BaseOffset())
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, the model keeps %d (cleanable end %d)", len(got), len(want), end)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Offset != w.Offset || !bytes.Equal(g.Key, w.Key) || (g.Key == nil) != (w.Key == nil) ||
			!bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) ||
			g.Timestamp != w.Timestamp || len(g.Headers) != len(w.Headers) {
			t.Fatalf("record %d: got offset %d key %q value %q ts %d, want offset %d key %q value %q ts %d",
				i, g.Offset, g.Key, g.Value, g.Timestamp, w.Offset, w.Key, w.Value, w.Timestamp)
		}
	}
}
