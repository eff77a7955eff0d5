package broker

// The producer snapshot: what producerState knows of a partition's
// idempotent producers as of an offset, as stored in the partition dir
// ("<20-digit offset>.producers") and carried by the cold segment object
// whose end is that offset. Big-endian:
//
//	magic [8] "STRATPRD" | version u16 | length u32 | body | crc u32
//
//	body: offset i64 | lastEpoch i32 | flags u16 | count u32 | producers
//	producer: id i64 | epoch i16 | n u8 | n batches, oldest first
//	batch: firstSeq i32 | lastSeq i32 | baseOffset i64 | lastOffset i64 |
//	       logAppendTime i64
//
// length is the body's; the CRC-32C covers every byte before it. offset:
// the state is that after every batch below it. lastEpoch: the leader
// epoch of the batch that ends at offset-1 (-1 when there is none), which
// ties the snapshot to one history of the log: a replica whose log holds a
// different batch there (it was truncated and written again by a newer
// leader) does not use it. flags: bit 0 (partial) says the state was
// computed without the whole history below offset (no snapshot at or after
// the log start was there to start from, and the log did not start at 0):
// producers that last wrote before that log start may be missing, so a
// better source (the cold tier) is still worth asking; other bits are 0.
// Producers come least recently seen first, which
// is the order of their last batches' offsets; that order is what the
// state's bound on producers evicts by, so it is kept.
//
// Every field has a fixed width and the decoder refuses anything the
// encoder would not write (see decodeProducerSnapshot), so what decodes
// encodes back to the same bytes.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/strata-log/strata/internal/corrupt"
)

const (
	snapshotVersion    = 1
	snapshotHead       = 14 // magic, version, length
	snapshotBodyHead   = 18 // offset, lastEpoch, flags, count
	snapshotPartial    = 1  // flags bit
	snapshotEntryHead  = 11 // id, epoch, n
	snapshotBatchBytes = 32
)

var (
	snapshotMagic = [8]byte{'S', 'T', 'R', 'A', 'T', 'P', 'R', 'D'}
	castagnoli    = crc32.MakeTable(crc32.Castagnoli)
)

// errCorruptSnapshot marks producer snapshot bytes that fail a check.
// Marked as corruption (corrupt.Is).
var errCorruptSnapshot = corrupt.Mark(errors.New("broker: corrupt producer snapshot"))

func snapshotCorrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errCorruptSnapshot}, args...)...)
}

// producerSnapshot is the state of a partition's idempotent producers as
// of an offset.
type producerSnapshot struct {
	offset    int64
	lastEpoch int32
	// partial: computed without the whole history below offset (see the
	// top of this file).
	partial bool
	// producers, least recently seen first; each entry's ring starts at 0.
	producers []producerEntry
}

func encodeProducerSnapshot(s *producerSnapshot) []byte {
	size := snapshotBodyHead
	for i := range s.producers {
		size += snapshotEntryHead + s.producers[i].n*snapshotBatchBytes
	}
	b := make([]byte, 0, snapshotHead+size+4)
	b = append(b, snapshotMagic[:]...)
	b = binary.BigEndian.AppendUint16(b, snapshotVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	b = binary.BigEndian.AppendUint64(b, uint64(s.offset))
	b = binary.BigEndian.AppendUint32(b, uint32(s.lastEpoch))
	var flags uint16
	if s.partial {
		flags |= snapshotPartial
	}
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.producers)))
	for i := range s.producers {
		e := &s.producers[i]
		b = binary.BigEndian.AppendUint64(b, uint64(e.id))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = append(b, byte(e.n))
		for j := range e.n {
			pb := &e.batches[(e.head+j)%producerBatches]
			b = binary.BigEndian.AppendUint32(b, uint32(pb.firstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(pb.lastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(pb.baseOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(pb.lastOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(pb.logAppendTime))
		}
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeProducerSnapshot checks and decodes a snapshot: the frame (magic,
// version, length, CRC), then every field against what the state can hold
// (no unknown flag; ids, epochs and sequences not negative; one to producerBatches batches
// per producer, each below the snapshot's offset, after the one before, its
// sequence range as long as its offset range; producers in the order of
// their last batches, none twice; no byte left over). Errors wrap
// errCorruptSnapshot.
func decodeProducerSnapshot(data []byte) (*producerSnapshot, error) {
	if len(data) < snapshotHead+snapshotBodyHead+4 {
		return nil, snapshotCorrupt("%d bytes is too short", len(data))
	}
	if [8]byte(data[:8]) != snapshotMagic {
		return nil, snapshotCorrupt("bad magic %q", data[:8])
	}
	if v := binary.BigEndian.Uint16(data[8:]); v != snapshotVersion {
		return nil, snapshotCorrupt("unknown version %d", v)
	}
	if n := binary.BigEndian.Uint32(data[10:]); int64(n) != int64(len(data)-snapshotHead-4) {
		return nil, snapshotCorrupt("length says %d body bytes, there are %d", n, len(data)-snapshotHead-4)
	}
	if sum, want := crc32.Checksum(data[:len(data)-4], castagnoli), binary.BigEndian.Uint32(data[len(data)-4:]); sum != want {
		return nil, snapshotCorrupt("crc %#08x, stored %#08x", sum, want)
	}
	d := snapshotDecoder{b: data[snapshotHead : len(data)-4]}
	s := &producerSnapshot{offset: d.i64(), lastEpoch: d.i32()}
	flags, count := uint16(d.i16()), d.u32()
	if s.offset < 0 || s.lastEpoch < -1 || flags&^snapshotPartial != 0 {
		return nil, snapshotCorrupt("offset %d, last epoch %d, flags %#x", s.offset, s.lastEpoch, flags)
	}
	s.partial = flags&snapshotPartial != 0
	// Each producer takes at least one batch: the count cannot promise
	// more than the bytes hold, so it cannot make us allocate more.
	if int64(count) > int64(len(d.b))/(snapshotEntryHead+snapshotBatchBytes) {
		return nil, snapshotCorrupt("%d producers in %d bytes", count, len(d.b))
	}
	s.producers = make([]producerEntry, count)
	seen := make(map[int64]bool, count)
	prevLast := int64(-1)
	for i := range s.producers {
		if len(d.b) < snapshotEntryHead {
			return nil, snapshotCorrupt("producer %d of %d is cut short", i, count)
		}
		e := &s.producers[i]
		e.id, e.epoch, e.n = d.i64(), d.i16(), int(d.u8())
		switch {
		case e.id < 0 || e.epoch < 0:
			return nil, snapshotCorrupt("producer id %d, epoch %d", e.id, e.epoch)
		case seen[e.id]:
			return nil, snapshotCorrupt("producer %d appears twice", e.id)
		case e.n < 1 || e.n > producerBatches:
			return nil, snapshotCorrupt("producer %d has %d batches", e.id, e.n)
		case len(d.b) < e.n*snapshotBatchBytes:
			return nil, snapshotCorrupt("producer %d is cut short", e.id)
		}
		seen[e.id] = true
		for j := range e.n {
			pb := producerBatch{firstSeq: d.i32(), lastSeq: d.i32(), baseOffset: d.i64(), lastOffset: d.i64(), logAppendTime: d.i64()}
			if err := checkSnapshotBatch(s, e, j, pb); err != nil {
				return nil, err
			}
			e.batches[j] = pb
		}
		last := e.batches[e.n-1].lastOffset
		if last <= prevLast {
			return nil, snapshotCorrupt("producer %d (last batch at %d) listed after one whose last batch is at %d", e.id, last, prevLast)
		}
		prevLast = last
	}
	if len(d.b) != 0 {
		return nil, snapshotCorrupt("%d bytes after the last producer", len(d.b))
	}
	return s, nil
}

// checkSnapshotBatch checks batch j of e as decoded.
func checkSnapshotBatch(s *producerSnapshot, e *producerEntry, j int, pb producerBatch) error {
	span := pb.lastOffset - pb.baseOffset
	switch {
	case pb.firstSeq < 0 || pb.lastSeq < 0:
		return snapshotCorrupt("producer %d: sequences %d..%d", e.id, pb.firstSeq, pb.lastSeq)
	case pb.baseOffset < 0 || span < 0 || span > math.MaxInt32 || pb.lastOffset >= s.offset:
		return snapshotCorrupt("producer %d: batch at offsets %d..%d in a snapshot at %d", e.id, pb.baseOffset, pb.lastOffset, s.offset)
	case addSequence(pb.firstSeq, int32(span)) != pb.lastSeq:
		return snapshotCorrupt("producer %d: sequences %d..%d for offsets %d..%d", e.id, pb.firstSeq, pb.lastSeq, pb.baseOffset, pb.lastOffset)
	case pb.logAppendTime < -1:
		return snapshotCorrupt("producer %d: append time %d", e.id, pb.logAppendTime)
	case j > 0 && pb.baseOffset <= e.batches[j-1].lastOffset:
		return snapshotCorrupt("producer %d: batch at %d after one ending at %d", e.id, pb.baseOffset, e.batches[j-1].lastOffset)
	}
	return nil
}

// snapshotDecoder reads fixed-width fields; the caller checks the length
// first.
type snapshotDecoder struct{ b []byte }

func (d *snapshotDecoder) u8() uint8 {
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *snapshotDecoder) i16() int16 {
	v := int16(binary.BigEndian.Uint16(d.b))
	d.b = d.b[2:]
	return v
}

func (d *snapshotDecoder) u32() uint32 {
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *snapshotDecoder) i32() int32 { return int32(d.u32()) }

func (d *snapshotDecoder) i64() int64 {
	v := int64(binary.BigEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}
