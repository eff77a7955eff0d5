package broker

import (
	"io"
	"log/slog"
	"math"
	"reflect"
	"testing"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
)

// idemBatch encodes n records stamped with a producer identity.
func idemBatch(t testing.TB, id int64, epoch int16, seq int32, n int) record.Batch {
	t.Helper()
	return testutil.IdemBatch(t, id, epoch, seq, 1_700_000_000_000, testutil.Values(id, seq, n)...)
}

// leader is the leader's side of producerState over a log: check, append,
// record, as Produce does (batches without a producer id skip the check).
type leader struct {
	t *testing.T
	s *producerState
	l *hotlog.Log
	// epoch is the leader epoch appends carry.
	epoch int32
}

func newLeader(t *testing.T, cfg hotlog.Config) *leader {
	ld := &leader{t: t, s: newProducerState()}
	ld.l = openTestLog(t, t.TempDir(), cfg)
	return ld
}

func openTestLog(t *testing.T, dir string, cfg hotlog.Config) *hotlog.Log {
	t.Helper()
	opts := hotlog.DefaultOptions()
	opts.Config = cfg
	opts.Logger = quietLogger()
	l, err := hotlog.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// restart closes the log and opens it again with a new, empty producer
// state, as a broker restart does (openPartition attaches the state).
func (ld *leader) restart() {
	ld.t.Helper()
	if err := ld.l.Close(); err != nil {
		ld.t.Fatal(err)
	}
	ld.l = openTestLog(ld.t, ld.l.Dir(), ld.l.Config())
	ld.s = newProducerState()
	ld.s.attach(ld.l, quietLogger())
}

// send offers a batch as a produce would and returns where it went (dup
// says it was a duplicate of an earlier one) or the refusal.
func (ld *leader) send(b record.Batch) (base, last int64, dup bool, refusal *Error) {
	ld.t.Helper()
	ld.s.mu.Lock()
	defer ld.s.mu.Unlock()
	if err := ld.s.ensureBuiltLocked(ld.l); err != nil {
		ld.t.Fatal(err)
	}
	if b.ProducerID() != record.NoProducerID {
		orig, refusal := ld.s.checkLocked(b)
		if refusal != nil {
			return 0, 0, false, refusal
		}
		if orig != nil {
			return orig.baseOffset, orig.lastOffset, true, nil
		}
	}
	ar, err := ld.l.AppendUnflushed(b, ld.epoch)
	if err != nil {
		ld.t.Fatal(err)
	}
	ld.s.appendedLocked(b)
	return ar.BaseOffset, ar.LastOffset, false, nil
}

// seed appends a batch and records it without checking it, as a follower
// does with what its leader sent: for a producer the leader should know
// from before, at any sequence.
func (ld *leader) seed(b record.Batch) (base, last int64) {
	ld.t.Helper()
	ld.s.mu.Lock()
	defer ld.s.mu.Unlock()
	if err := ld.s.ensureBuiltLocked(ld.l); err != nil {
		ld.t.Fatal(err)
	}
	ar, err := ld.l.AppendUnflushed(b, ld.epoch)
	if err != nil {
		ld.t.Fatal(err)
	}
	ld.s.appendedLocked(b)
	return ar.BaseOffset, ar.LastOffset
}

// accept sends a batch that must be written, and returns its offsets.
func (ld *leader) accept(b record.Batch) (base, last int64) {
	ld.t.Helper()
	base, last, dup, refusal := ld.send(b)
	if refusal != nil || dup {
		ld.t.Fatalf("producer %d sequence %d: refusal %v, duplicate %v", b.ProducerID(), b.BaseSequence(), refusal, dup)
	}
	return base, last
}

// refused sends a batch that must be refused with reason, changing nothing.
func (ld *leader) refused(b record.Batch, reason Reason) *Error {
	ld.t.Helper()
	before, end := dumpState(ld.s), ld.l.LogEndOffset()
	_, _, _, refusal := ld.send(b)
	if refusal == nil || refusal.Reason != reason {
		ld.t.Fatalf("producer %d epoch %d sequence %d: got %v, want %s", b.ProducerID(), b.ProducerEpoch(), b.BaseSequence(), refusal, reason)
	}
	if !reflect.DeepEqual(dumpState(ld.s), before) || ld.l.LogEndOffset() != end {
		ld.t.Fatal("a refused batch changed the state or the log")
	}
	return refusal
}

// stateEntry is one producer's remembered state, oldest batch first.
type stateEntry struct {
	epoch   int16
	batches []producerBatch
}

func dumpState(s *producerState) map[int64]stateEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int64]stateEntry{}
	for id, el := range s.mu.producers {
		e := el.Value.(*producerEntry)
		se := stateEntry{epoch: e.epoch}
		for i := range e.n {
			se.batches = append(se.batches, e.batches[(e.head+i)%producerBatches])
		}
		out[id] = se
	}
	return out
}

// TestProducerDuplicates: each of a producer's last five batches, sent
// again, is answered with its original offsets and not written; the sixth
// oldest is no longer remembered and, not following the last, is refused.
func TestProducerDuplicates(t *testing.T) {
	ld := newLeader(t, hotlog.DefaultConfig())
	const id = 1000
	type sent struct{ base, last int64 }
	var batches []sent
	for i := range 6 {
		base, last := ld.accept(idemBatch(t, id, 0, int32(i*3), 3))
		batches = append(batches, sent{base, last})
		ld.accept(record.Batch(mustBatch(t, "unrelated"))) // other writers in between
	}
	end := ld.l.LogEndOffset()
	for i := 1; i < 6; i++ {
		base, last, dup, refusal := ld.send(idemBatch(t, id, 0, int32(i*3), 3))
		if refusal != nil || !dup || base != batches[i].base || last != batches[i].last {
			t.Fatalf("resend of batch %d: offsets %d-%d dup %v refusal %v, want %d-%d", i, base, last, dup, refusal, batches[i].base, batches[i].last)
		}
	}
	if ld.l.LogEndOffset() != end {
		t.Fatal("a duplicate was written")
	}
	r := ld.refused(idemBatch(t, id, 0, 0, 3), ReasonOutOfOrderSequence)
	if r.Meta["expected_sequence"] != "18" || r.Meta["sequence"] != "0" || r.Meta["producer_id"] != "1000" || !r.Retriable() {
		t.Fatalf("refusal of the sixth oldest: %+v", r)
	}
	// A batch with the same first sequence as a remembered one but another
	// length is not a resend of it.
	ld.refused(idemBatch(t, id, 0, 15, 2), ReasonOutOfOrderSequence)
	ld.accept(idemBatch(t, id, 0, 18, 1))
}

func mustBatch(t testing.TB, values ...string) record.Batch {
	t.Helper()
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Timestamp: 1_700_000_000_000, Value: []byte(v)}
	}
	b, err := record.Encode(record.DefaultBatchOptions(), recs...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestProducerSequenceRules(t *testing.T) {
	ld := newLeader(t, hotlog.DefaultConfig())

	// A producer the partition does not know is refused unless it starts
	// at sequence 0, as a new one does, whatever its epoch.
	r := ld.refused(idemBatch(t, 2000, 0, 12345, 2), ReasonUnknownProducerID)
	if r.Retriable() || r.Meta["producer_id"] != "2000" || r.Meta["producer_epoch"] != "0" || r.Meta["sequence"] != "12345" {
		t.Fatalf("unknown producer: %+v", r)
	}
	ld.refused(idemBatch(t, 2001, 3, 1, 1), ReasonUnknownProducerID)
	ld.accept(idemBatch(t, 2001, 3, 0, 1))
	// One it knows from before (a follower recorded it) continues.
	ld.seed(idemBatch(t, 2000, 0, 12345, 2))

	// A gap, and a batch from before the last one, change nothing.
	ld.refused(idemBatch(t, 2000, 0, 12348, 1), ReasonOutOfOrderSequence)
	ld.refused(idemBatch(t, 2000, 0, 12340, 1), ReasonOutOfOrderSequence)
	ld.accept(idemBatch(t, 2000, 0, 12347, 1))

	// Epochs: an older one is fenced; a newer one starts again at 0, and
	// the batches of the old epoch are forgotten.
	r = ld.refused(idemBatch(t, 2001, 2, 1, 1), ReasonInvalidProducerEpoch)
	if r.Retriable() || r.Meta["current_epoch"] != "3" || r.Meta["producer_epoch"] != "2" {
		t.Fatalf("fenced epoch: %+v", r)
	}
	ld.refused(idemBatch(t, 2001, 4, 1, 1), ReasonOutOfOrderSequence)
	ld.accept(idemBatch(t, 2001, 4, 0, 5))
	ld.refused(idemBatch(t, 2001, 3, 0, 1), ReasonInvalidProducerEpoch)
	ld.accept(idemBatch(t, 2001, 4, 5, 1))

	// Malformed identities.
	for _, b := range []record.Batch{
		idemBatch(t, -2, 0, 0, 1),
		idemBatch(t, 2002, -1, 0, 1),
		idemBatch(t, 2002, 0, -1, 1),
	} {
		ld.refused(b, ReasonInvalidRequest)
	}
}

// TestProducerSequenceWrap: sequences wrap from MaxInt32 to 0.
func TestProducerSequenceWrap(t *testing.T) {
	ld := newLeader(t, hotlog.DefaultConfig())
	base, last := ld.seed(idemBatch(t, 3000, 0, math.MaxInt32-1, 3)) // MaxInt32-1, MaxInt32, 0
	if got := dumpState(ld.s)[3000].batches[0].lastSeq; got != 0 {
		t.Fatalf("last sequence %d, want 0", got)
	}
	if b, l, dup, _ := ld.send(idemBatch(t, 3000, 0, math.MaxInt32-1, 3)); !dup || b != base || l != last {
		t.Fatalf("resend of the wrapping batch: %d-%d dup %v", b, l, dup)
	}
	ld.refused(idemBatch(t, 3000, 0, 0, 1), ReasonOutOfOrderSequence)
	ld.accept(idemBatch(t, 3000, 0, 1, 1))

	for _, c := range []struct{ seq, n, want int32 }{
		{0, 1, 1}, {5, 0, 5}, {math.MaxInt32, 1, 0}, {math.MaxInt32 - 2, 5, 2}, {math.MaxInt32, math.MaxInt32, math.MaxInt32 - 1},
	} {
		if got := addSequence(c.seq, c.n); got != c.want {
			t.Errorf("addSequence(%d, %d) = %d, want %d", c.seq, c.n, got, c.want)
		}
	}
}

// TestProducerEarlyBatches: which batches wait for their turn
// (earlyLocked) rather than going to the check at once: those starting
// past the producer's next sequence, across the wrap from MaxInt32 to 0,
// and later batches of a producer or epoch whose sequence 0 has not come;
// not the next batch, a resend, an old batch or a fenced epoch.
func TestProducerEarlyBatches(t *testing.T) {
	ld := newLeader(t, hotlog.DefaultConfig())
	ld.seed(idemBatch(t, 1, 2, 0, 3))               // producer 1, epoch 2: sequences 0-2
	ld.seed(idemBatch(t, 2, 0, math.MaxInt32-1, 1)) // producer 2: next is MaxInt32
	for _, c := range []struct {
		what  string
		b     record.Batch
		early bool
	}{
		{"the next batch", idemBatch(t, 1, 2, 3, 1), false},
		{"one batch ahead", idemBatch(t, 1, 2, 4, 1), true},
		{"far ahead", idemBatch(t, 1, 2, math.MaxInt32/2, 1), true},
		{"behind (more than half the sequences ahead)", idemBatch(t, 1, 2, math.MaxInt32-5, 1), false},
		{"a resend", idemBatch(t, 1, 2, 0, 3), false},
		{"an older epoch", idemBatch(t, 1, 1, 7, 1), false},
		{"a newer epoch at 0", idemBatch(t, 1, 3, 0, 1), false},
		{"a newer epoch past 0", idemBatch(t, 1, 3, 4, 1), true},
		{"an unknown producer at 0", idemBatch(t, 9, 0, 0, 1), false},
		{"an unknown producer past 0", idemBatch(t, 9, 0, 1, 1), true},
		{"the next batch across the wrap", idemBatch(t, 2, 0, math.MaxInt32, 1), false},
		{"ahead across the wrap", idemBatch(t, 2, 0, 3, 1), true},
	} {
		ld.s.mu.Lock()
		got := ld.s.earlyLocked(c.b)
		ld.s.mu.Unlock()
		if got != c.early {
			t.Errorf("%s (producer %d epoch %d sequence %d): early %v, want %v", c.what, c.b.ProducerID(), c.b.ProducerEpoch(), c.b.BaseSequence(), got, c.early)
		}
	}
}

// TestProducerRebuild: the state rebuilt from a real log, across segments
// and with other writers' batches between, is the state the leader built
// while appending, with or without snapshots to start from.
func TestProducerRebuild(t *testing.T) {
	cfg := hotlog.DefaultConfig()
	cfg.SegmentBytes = 4 << 10
	ld := newLeader(t, cfg)
	seqs := map[int64]int32{}
	for i := range 300 {
		id := int64(1000 + i%7)
		if i >= 200 {
			id = 1000 + int64(i%2) // only two producers at the tail
		}
		n := 1 + i%4
		ld.accept(idemBatch(t, id, 0, seqs[id], n))
		seqs[id] += int32(n)
		if i%5 == 0 {
			ld.accept(mustBatch(t, "plain"))
		}
	}
	if segs := len(ld.l.Segments()); segs < 5 {
		t.Fatalf("only %d segments", segs)
	}
	want := dumpState(ld.s)

	s := newProducerState()
	if err := s.rebuild(ld.l); err != nil {
		t.Fatal(err)
	}
	if got := dumpState(s); !reflect.DeepEqual(got, want) {
		t.Fatalf("rebuilt state differs:\n got %+v\nwant %+v", got, want)
	}
	if err := s.snapshotSealed(); err != nil {
		t.Fatal(err)
	}
	s = newProducerState()
	if err := s.rebuild(ld.l); err != nil {
		t.Fatal(err)
	}
	if got := dumpState(s); !reflect.DeepEqual(got, want) {
		t.Fatalf("state rebuilt from snapshots differs:\n got %+v\nwant %+v", got, want)
	}

	// reset forgets everything until the next check rebuilds it.
	ld.s.reset()
	if len(dumpState(ld.s)) != 0 {
		t.Fatal("reset kept producers")
	}
	ld.s.record(idemBatch(t, 9999, 0, 0, 1)) // not built: left to the rebuild
	ld.accept(idemBatch(t, 1000, 0, seqs[1000], 1))
	if _, ok := dumpState(ld.s)[9999]; ok {
		t.Fatal("a batch recorded while unbuilt (and not in the log) survived the rebuild")
	}
	if got := dumpState(ld.s)[1003]; !reflect.DeepEqual(got, want[1003]) {
		t.Fatalf("after reset and rebuild, producer 1003: %+v, want %+v", got, want[1003])
	}
}

// TestProducerLRU: past maxProducers, the producer seen least recently is
// forgotten.
func TestProducerLRU(t *testing.T) {
	s := newProducerState()
	s.mu.built = true
	next := int64(0)
	add := func(id int64) {
		b := idemBatch(t, id, 0, 0, 1)
		b.SetBaseOffset(next)
		next++
		s.record(b)
	}
	for id := range int64(maxProducers) {
		add(id)
	}
	add(0) // seen again: now the most recent
	add(maxProducers)
	got := dumpState(s)
	if len(got) != maxProducers {
		t.Fatalf("%d producers remembered, bound is %d", len(got), maxProducers)
	}
	if _, ok := got[1]; ok {
		t.Fatal("the least recently seen producer was kept")
	}
	if _, ok := got[0]; !ok {
		t.Fatal("a producer seen again was forgotten")
	}
}
