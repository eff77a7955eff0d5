package tiering

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/strata-log/strata/tiering/objstore"
)

// TestProducerSnapshotInColdObjects: each cold object carries the producer
// snapshot it was uploaded with, read back whole and checked with ranged
// reads (one for a small snapshot, two for one past the read-ahead);
// objects without one, new or in the version 1 layout, say so; and the
// cold reader serves the batches of all of them byte for byte.
func TestProducerSnapshotInColdObjects(t *testing.T) {
	f := newColdFixture(t)
	small := []byte("the producers as of segment 0")
	large := make([]byte, snapshotReadAhead+1000)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range large {
		large[i] = byte(rng.Uint32())
	}
	spec := batchSpec{count: 5, records: 3, valueLen: 500}
	f.producers = small
	withSmall := f.addSegment(spec)
	f.producers = large
	withLarge := f.addSegment(spec)
	f.producers = nil
	without := f.addSegment(spec)
	f.version1 = true
	version1 := f.addSegment(spec)

	reads := func() int64 { return f.opCount(objstore.OpReadAt) }
	before := reads()
	got, err := ReadProducerSnapshot(f.ctx, f.read, withSmall)
	if err != nil || !bytes.Equal(got, small) {
		t.Fatalf("small snapshot: %q, %v", got, err)
	}
	if n := reads() - before; n != 1 {
		t.Fatalf("a small snapshot took %d ranged reads, want 1", n)
	}
	before = reads()
	got, err = ReadProducerSnapshot(f.ctx, f.read, withLarge)
	if err != nil || !bytes.Equal(got, large) {
		t.Fatalf("large snapshot: %d bytes, %v", len(got), err)
	}
	if n := reads() - before; n != 2 {
		t.Fatalf("a large snapshot took %d ranged reads, want 2", n)
	}
	for name, seg := range map[string]SegmentRef{"no snapshot": without, "version 1": version1} {
		if _, err := ReadProducerSnapshot(f.ctx, f.read, seg); !errors.Is(err, ErrNoProducerSnapshot) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: %v, want ErrNoProducerSnapshot", name, err)
		}
	}

	r := f.reader(smallChunks())
	if got := f.readAll(r, 0, 7000); !bytes.Equal(got, f.bytesFrom(0)) {
		t.Fatal("the batches read back differ from those encoded")
	}
}

// TestProducerSnapshotCorrupt: a damaged snapshot, trailer or object, or
// an object that does not match its manifest entry, is ErrCorrupt.
func TestProducerSnapshotCorrupt(t *testing.T) {
	f := newColdFixture(t)
	f.producers = []byte("producers")
	seg := f.addSegment(batchSpec{count: 3, records: 2, valueLen: 100})
	obj, _, err := f.store.Get(f.ctx, seg.Key)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := DecodeTrailer(obj[len(obj)-trailerSizeV2:], int64(len(obj)))
	if err != nil {
		t.Fatal(err)
	}
	damage := map[string]func([]byte) []byte{
		"snapshot byte": func(b []byte) []byte { b[tr.ProducersPos()+2] ^= 1; return b },
		"trailer byte":  func(b []byte) []byte { b[len(b)-10] ^= 1; return b },
		"truncated":     func(b []byte) []byte { return b[:len(b)-1] },
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			bad := fn(bytes.Clone(obj))
			s := seg
			s.Key += "-" + name
			s.Size = int64(len(bad))
			if _, err := f.store.Put(f.ctx, s.Key, bad, objstore.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := ReadProducerSnapshot(f.ctx, f.read, s); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
		})
	}
	for name, s := range map[string]SegmentRef{
		"offsets": func() SegmentRef { s := seg; s.LastOffset++; return s }(),
		"size":    func() SegmentRef { s := seg; s.Size--; return s }(),
		"log crc": func() SegmentRef { s := seg; s.LogCRC++; return s }(),
	} {
		if _, err := ReadProducerSnapshot(f.ctx, f.read, s); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("manifest entry with other %s: %v, want ErrCorrupt", name, err)
		}
	}
}

// TestSegmentEndingIn finds the newest segment ending in a range, in the
// tail and in closed parts of the manifest.
func TestSegmentEndingIn(t *testing.T) {
	f := newColdFixture(t)
	for range 6 {
		f.addSegment(batchSpec{count: 2, records: 5, valueLen: 10}) // 10 offsets each: ends at 10, 20, ... 60
	}
	// The first four in two closed parts, the first of which skips its
	// first (expired) segment; the rest in the tail.
	h := cloneHead(f.com.Head())
	h.Parts, h.Tail = nil, f.segs[4:]
	for seq, segs := range [][]SegmentRef{f.segs[0:2], f.segs[2:4]} {
		part := &Part{Seq: uint64(seq), Segments: segs}
		data, err := EncodePart(part)
		if err != nil {
			t.Fatal(err)
		}
		key := f.ref.newPartKey(part.Seq)
		if _, err := f.store.Put(f.ctx, key, data, objstore.WriteOptions{IfAbsent: true}); err != nil {
			t.Fatal(err)
		}
		h.Parts = append(h.Parts, partRef(key, part, 1-min(seq, 1)))
	}
	for _, c := range []struct {
		lo, hi int64
		end    int64 // -1: none
	}{
		{60, 60, 60}, {0, 1000, 60}, {45, 59, 50}, {55, 59, -1}, {41, 49, -1}, {40, 49, 40},
		{30, 35, 30}, {20, 29, 20}, {0, 19, -1}, {10, 19, -1}, {25, 21, -1},
	} {
		seg, ok, err := SegmentEndingIn(f.ctx, f.read, h, c.lo, c.hi)
		if err != nil {
			t.Fatal(err)
		}
		if got := map[bool]int64{true: seg.LastOffset + 1, false: -1}[ok]; got != c.end {
			t.Errorf("ending in [%d, %d]: %d, want %d", c.lo, c.hi, got, c.end)
		}
	}
	if _, ok, err := SegmentEndingIn(f.ctx, f.read, &Head{}, 0, 100); ok || err != nil {
		t.Fatalf("an empty cold tier: %v %v", ok, err)
	}
}
