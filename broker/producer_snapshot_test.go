package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"reflect"
	"testing"

	"github.com/strata-log/strata/hotlog"
)

// sampleSnapshot is the state of a leader that wrote batches of several
// producers: one with more batches than remembered, one that wrapped its
// sequence, one that moved to a newer epoch, and plain batches between.
func sampleSnapshot(t *testing.T) (*producerSnapshot, map[int64]stateEntry) {
	t.Helper()
	ld := newLeader(t, hotlog.DefaultConfig())
	for i := range 7 {
		ld.accept(idemBatch(t, 10, 0, int32(i*2), 2))
		ld.accept(mustBatch(t, "plain"))
	}
	ld.seed(idemBatch(t, 11, 0, math.MaxInt32-1, 4))
	ld.accept(idemBatch(t, 12, 3, 0, 1))
	ld.accept(idemBatch(t, 12, 4, 0, 2))
	ld.accept(idemBatch(t, 10, 0, 14, 1)) // 10 is now the most recently seen
	ld.s.mu.Lock()
	snap := ld.s.snapshotLocked(ld.l.LogEndOffset(), 0)
	ld.s.mu.Unlock()
	return snap, dumpState(ld.s)
}

// TestProducerSnapshotRoundTrip: a state encoded, decoded and loaded is the
// state it was, in the same recency order, and encodes to the same bytes.
func TestProducerSnapshotRoundTrip(t *testing.T) {
	snap, want := sampleSnapshot(t)
	if ids := []int64{snap.producers[0].id, snap.producers[1].id, snap.producers[2].id}; !reflect.DeepEqual(ids, []int64{11, 12, 10}) {
		t.Fatalf("producers in order %v, want the least recently seen first", ids)
	}
	data := encodeProducerSnapshot(snap)
	got, err := decodeProducerSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, snap) {
		t.Fatalf("decoded %+v, encoded %+v", got, snap)
	}
	if again := encodeProducerSnapshot(got); !bytes.Equal(again, data) {
		t.Fatal("a decoded snapshot encodes to other bytes")
	}
	s := newProducerState()
	s.mu.Lock()
	s.loadLocked(got)
	s.mu.Unlock()
	if st := dumpState(s); !reflect.DeepEqual(st, want) {
		t.Fatalf("loaded state\n %+v\nwant\n %+v", st, want)
	}
	// Recency survives the load: past the bound, the least recently seen
	// (11) goes first.
	s.mu.Lock()
	if s.mu.lru.Back().Value.(*producerEntry).id != 11 || s.mu.lru.Front().Value.(*producerEntry).id != 10 {
		t.Fatal("the loaded state lost the order producers were seen in")
	}
	s.mu.Unlock()

	empty := encodeProducerSnapshot(&producerSnapshot{offset: 0, lastEpoch: -1})
	if got, err := decodeProducerSnapshot(empty); err != nil || got.offset != 0 || got.lastEpoch != -1 || got.partial || len(got.producers) != 0 {
		t.Fatalf("empty snapshot: %+v, %v", got, err)
	}
	snap.partial = true
	if got, err := decodeProducerSnapshot(encodeProducerSnapshot(snap)); err != nil || !reflect.DeepEqual(got, snap) {
		t.Fatalf("partial snapshot: %+v, %v", got, err)
	}
}

// reseal recomputes the frame's length and CRC around a body, so that a
// test reaches the checks of the body itself.
func reseal(body []byte) []byte {
	b := append([]byte(nil), snapshotMagic[:]...)
	b = binary.BigEndian.AppendUint16(b, snapshotVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	b = append(b, body...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// TestProducerSnapshotChecks: every damaged frame and every body the
// encoder would not write is refused as corrupt.
func TestProducerSnapshotChecks(t *testing.T) {
	snap, _ := sampleSnapshot(t)
	data := encodeProducerSnapshot(snap)
	corrupt := func(what string, b []byte) {
		t.Helper()
		if _, err := decodeProducerSnapshot(b); !errors.Is(err, errCorruptSnapshot) {
			t.Fatalf("%s: %v, want a corrupt snapshot", what, err)
		}
	}
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x04
		corrupt("byte flipped", bad)
	}
	for n := range len(data) {
		corrupt("cut short", data[:n])
	}
	corrupt("a byte more", append(bytes.Clone(data), 0))

	body := data[snapshotHead : len(data)-4]
	// Field positions in the body: the first producer starts after the
	// body's head, its first batch after the producer's head.
	p0, b0 := snapshotBodyHead, snapshotBodyHead+snapshotEntryHead
	edit := func(what string, change func(b []byte) []byte) {
		t.Helper()
		corrupt(what, reseal(change(bytes.Clone(body))))
	}
	edit("negative offset", func(b []byte) []byte { binary.BigEndian.PutUint64(b, uint64(1<<63)); return b })
	edit("last epoch below -1", func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], uint32(0xfffffffe)); return b })
	edit("unknown flag", func(b []byte) []byte { b[13] |= 2; return b })
	edit("count beyond the bytes", func(b []byte) []byte { binary.BigEndian.PutUint32(b[14:], 1000); return b })
	edit("count short of the bytes", func(b []byte) []byte { binary.BigEndian.PutUint32(b[14:], 2); return b })
	edit("negative producer id", func(b []byte) []byte { b[p0] = 0x80; return b })
	edit("negative producer epoch", func(b []byte) []byte { b[p0+8] = 0x80; return b })
	edit("no batches", func(b []byte) []byte { b[p0+10] = 0; return b })
	edit("too many batches", func(b []byte) []byte { b[p0+10] = producerBatches + 1; return b })
	edit("negative sequence", func(b []byte) []byte { b[b0] = 0x80; return b })
	edit("sequences not matching offsets", func(b []byte) []byte { b[b0+7]++; return b })
	edit("batch past the snapshot", func(b []byte) []byte {
		binary.BigEndian.PutUint64(b, uint64(snap.producers[0].batches[0].lastOffset))
		return b
	})
	edit("append time below -1", func(b []byte) []byte { binary.BigEndian.PutUint64(b[b0+24:], uint64(1<<63)); return b })
	edit("a producer twice", func(b []byte) []byte {
		copy(b[p0+snapshotEntryHead+snapshotBatchBytes:], b[p0:p0+8]) // producer 11 has one batch; the next gets its id
		return b
	})
	edit("producers out of order", func(b []byte) []byte {
		// Swap the first two producers (one batch each).
		n := snapshotEntryHead + snapshotBatchBytes
		first := bytes.Clone(b[p0 : p0+n])
		copy(b[p0:], b[p0+n:p0+2*n])
		copy(b[p0+n:], first)
		return b
	})
	edit("batches out of order", func(b []byte) []byte {
		// Producer 10, the last, has five batches, the first two of two
		// records: give the second the offsets of the first.
		at := len(b) - 5*snapshotBatchBytes
		copy(b[at+snapshotBatchBytes+8:at+snapshotBatchBytes+24], b[at+8:at+24])
		return b
	})
	if _, err := decodeProducerSnapshot(reseal(body)); err != nil {
		t.Fatalf("the untouched body, resealed: %v", err)
	}
}

// FuzzProducerSnapshot: decoding never panics, refuses with a corrupt
// snapshot error, and what it accepts encodes back to the same bytes.
func FuzzProducerSnapshot(f *testing.F) {
	f.Add(encodeProducerSnapshot(&producerSnapshot{lastEpoch: -1}))
	snap := &producerSnapshot{offset: 100, lastEpoch: 3, partial: true, producers: []producerEntry{
		{id: 7, epoch: 1, n: 2, batches: [producerBatches]producerBatch{
			{firstSeq: 0, lastSeq: 1, baseOffset: 10, lastOffset: 11, logAppendTime: -1},
			{firstSeq: 2, lastSeq: 2, baseOffset: 50, lastOffset: 50, logAppendTime: 1_700_000_000_000},
		}},
		{id: 8, epoch: 0, n: 1, batches: [producerBatches]producerBatch{
			{firstSeq: math.MaxInt32, lastSeq: 0, baseOffset: 60, lastOffset: 61, logAppendTime: -1},
		}},
	}}
	f.Add(encodeProducerSnapshot(snap))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeProducerSnapshot(data)
		if err != nil {
			if !errors.Is(err, errCorruptSnapshot) {
				t.Fatalf("error %v is not a corrupt snapshot", err)
			}
			return
		}
		if again := encodeProducerSnapshot(s); !bytes.Equal(again, data) {
			t.Fatalf("decoded %+v encodes to other bytes", s)
		}
	})
}

// FuzzProducerSnapshotBody is FuzzProducerSnapshot with the frame's length
// and CRC made right around the fuzzed bytes, so that the checks of the
// body itself are what is exercised (a random change almost never keeps a
// CRC valid).
func FuzzProducerSnapshotBody(f *testing.F) {
	data := encodeProducerSnapshot(&producerSnapshot{offset: 100, lastEpoch: 3, producers: []producerEntry{
		{id: 7, epoch: 1, n: 2, batches: [producerBatches]producerBatch{
			{firstSeq: 0, lastSeq: 1, baseOffset: 10, lastOffset: 11, logAppendTime: -1},
			{firstSeq: 2, lastSeq: 2, baseOffset: 50, lastOffset: 50, logAppendTime: 1_700_000_000_000},
		}},
	}})
	f.Add(data[snapshotHead : len(data)-4])
	f.Fuzz(func(t *testing.T, body []byte) {
		framed := reseal(body)
		s, err := decodeProducerSnapshot(framed)
		if err != nil {
			if !errors.Is(err, errCorruptSnapshot) {
				t.Fatalf("error %v is not a corrupt snapshot", err)
			}
			return
		}
		if again := encodeProducerSnapshot(s); !bytes.Equal(again, framed) {
			t.Fatalf("decoded %+v encodes to other bytes", s)
		}
	})
}
