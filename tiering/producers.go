package tiering

// The producer snapshot a cold segment object carries (see segment.go): the
// broker reads it back when its local log starts where the cold tier ends,
// so that what it knows of idempotent producers survives the local log.

import (
	"context"
	"fmt"
	"sort"

	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering/objstore"
)

// snapshotReadAhead is how much more than a trailer the first ranged read
// of ReadProducerSnapshot fetches: a snapshot smaller than that (the usual
// case: a few producers) comes with the trailer, in one GET.
const snapshotReadAhead = 64 << 10

// ReadProducerSnapshot reads the producer snapshot of a cold segment with
// ranged reads of its end, checking the trailer against seg and the
// snapshot against the trailer's length and CRC. An object without one
// (written before objects carried one, or by an uploader that had none)
// gives ErrNoProducerSnapshot; a damaged one ErrCorrupt.
func ReadProducerSnapshot(ctx context.Context, store objstore.Reader, seg SegmentRef) ([]byte, error) {
	rd, err := store.Open(ctx, seg.Key)
	if err != nil {
		return nil, fmt.Errorf("tiering: open cold segment %s: %w", seg.Key, err)
	}
	defer rd.Close()
	corrupt := func(err error) error { return fmt.Errorf("tiering: cold segment %s: %w", seg.Key, err) }
	size := rd.Size()
	if seg.Size != 0 && size != seg.Size {
		return nil, corrupt(corruptf("the object has %d bytes, the manifest says %d", size, seg.Size))
	}
	if size < trailerSizeV1+record.HeaderSize {
		return nil, corrupt(corruptf("object of %d bytes is too small", size))
	}
	n := min(size, maxTrailerSize+snapshotReadAhead)
	tail := make([]byte, n)
	if _, err := rd.ReadAt(ctx, tail, size-n); err != nil {
		return nil, fmt.Errorf("tiering: read cold segment %s at %d: %w", seg.Key, size-n, err)
	}
	t, err := DecodeTrailer(tail, size)
	if err != nil {
		return nil, corrupt(err)
	}
	if t.BaseOffset != seg.BaseOffset || t.LastOffset != seg.LastOffset {
		return nil, corrupt(corruptf("trailer says offsets %d..%d, the manifest %d..%d", t.BaseOffset, t.LastOffset, seg.BaseOffset, seg.LastOffset))
	}
	if seg.LogLen != 0 && (t.LogLen != seg.LogLen || t.LogCRC != seg.LogCRC) {
		return nil, corrupt(corruptf("trailer says %d log bytes with crc %#08x, the manifest %d with %#08x", t.LogLen, t.LogCRC, seg.LogLen, seg.LogCRC))
	}
	if t.ProducersLen == 0 {
		return nil, corrupt(ErrNoProducerSnapshot)
	}
	var snap []byte
	if rel := t.ProducersPos() - (size - n); rel >= 0 {
		snap = tail[rel : rel+int64(t.ProducersLen)]
	} else {
		snap = make([]byte, t.ProducersLen)
		if _, err := rd.ReadAt(ctx, snap, t.ProducersPos()); err != nil {
			return nil, fmt.Errorf("tiering: read cold segment %s at %d: %w", seg.Key, t.ProducersPos(), err)
		}
	}
	if err := CheckProducerSnapshot(snap, t); err != nil {
		return nil, corrupt(err)
	}
	return snap, nil
}

// SegmentEndingIn returns the newest live segment of h whose end (the
// offset after its last) lies in [lo, hi], reading a closed part of the
// manifest from store when the segment is in one; ok is false when no
// segment ends there. A broker uses it to find the producer snapshot that
// gives the state at a point of its local log.
func SegmentEndingIn(ctx context.Context, store objstore.Reader, h *Head, lo, hi int64) (seg SegmentRef, ok bool, err error) {
	if h == nil || h.Empty() || hi < lo {
		return SegmentRef{}, false, nil
	}
	start, end := h.StartOffset(), h.EndOffset()
	target := min(hi, end) - 1 // the last offset of the segment sought
	if target < start {
		return SegmentRef{}, false, nil
	}
	if seg, err = segmentHolding(ctx, store, h, target); err != nil {
		return SegmentRef{}, false, err
	}
	if seg.LastOffset != target {
		// hi falls inside seg: the segment before it ends below hi.
		if seg.BaseOffset <= start {
			return SegmentRef{}, false, nil
		}
		if seg, err = segmentHolding(ctx, store, h, seg.BaseOffset-1); err != nil {
			return SegmentRef{}, false, err
		}
	}
	if seg.LastOffset+1 < lo {
		return SegmentRef{}, false, nil
	}
	return seg, true, nil
}

// segmentHolding returns the live segment of h holding offset, which must
// lie in [h.StartOffset(), h.EndOffset()).
func segmentHolding(ctx context.Context, store objstore.Reader, h *Head, offset int64) (SegmentRef, error) {
	if i := h.partFor(offset); i >= 0 {
		ref := h.Parts[i]
		part, err := LoadPart(ctx, store, ref.Key)
		if err != nil {
			return SegmentRef{}, err
		}
		segs, err := partLiveSegments(ref, part)
		if err != nil {
			return SegmentRef{}, err
		}
		j := sort.Search(len(segs), func(j int) bool { return segs[j].LastOffset >= offset })
		if j < len(segs) && segs[j].BaseOffset <= offset {
			return segs[j], nil
		}
		return SegmentRef{}, fmt.Errorf("tiering: manifest part %s: %w", ref.Key, corruptf("no segment holds offset %d", offset))
	}
	if i := h.tailFor(offset); i >= 0 {
		return h.Tail[i], nil
	}
	return SegmentRef{}, fmt.Errorf("tiering: manifest of %s/%d: %w", h.Topic, h.Partition, corruptf("no segment holds offset %d", offset))
}
