package tiering

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// partitionState is what a ColdReader keeps per partition.
type partitionState struct {
	// head is the cached manifest head (nil: no cold tier), trusted for
	// HeadTTL after loadedAt when loaded is set.
	head     *Head
	loaded   bool
	loadedAt time.Time
	// invalidations counts Invalidate calls, so that a load that began
	// before one is not kept: it may predate the commit that caused it.
	invalidations uint64
	// ends are where the last few reads ended, so that a read starting at
	// one of them is known to be sequential (one slot per consumer, up to
	// len(ends) of them) and can start there without a scan.
	ends    [4]readMark
	nextEnd int
}

// readMark is where a read ended: the offset it returned as NextOffset,
// and where that offset's batch starts in the log bytes of the object key
// (pos is the log's length when the read ended the segment).
type readMark struct {
	next int64
	key  string
	pos  int64
}

func (r *ColdReader) stateLocked(p PartitionRef) *partitionState {
	st, ok := r.mu.partitions.get(p)
	if !ok {
		st = &partitionState{}
		for i := range st.ends {
			st.ends[i].next = -1
		}
		r.mu.partitions.add(p, st, 1)
	}
	return st
}

// head returns p's manifest head: the cached one while it is younger than
// HeadTTL, unless force, and otherwise a fresh one (concurrent loads of the
// same head share one GET). fresh reports that it was read for this call,
// so checking again would tell nothing new.
func (r *ColdReader) head(ctx context.Context, p PartitionRef, force bool) (h *Head, fresh bool, err error) {
	r.mu.Lock()
	st := r.stateLocked(p)
	if !force && st.loaded && time.Since(st.loadedAt) < r.cfg.HeadTTL {
		h := st.head
		r.mu.Unlock()
		return h, false, nil
	}
	r.mu.Unlock()
	h, _, err = r.heads.do(ctx, p.ManifestKey(), func(ctx context.Context) (*Head, error) {
		return r.loadHead(ctx, p)
	})
	return h, err == nil, err
}

func (r *ColdReader) loadHead(ctx context.Context, p PartitionRef) (*Head, error) {
	r.mu.Lock()
	invalidations := r.stateLocked(p).invalidations
	r.mu.Unlock()
	start := time.Now()
	if r.cfg.Pace != nil {
		if err := r.cfg.Pace(ctx, p, 0); err != nil {
			return nil, err
		}
	}
	r.counters.manifestGets.Add(1)
	h, _, err := LoadHead(ctx, r.store, p)
	if err != nil {
		return nil, err
	}
	if h != nil && (h.TopicID != p.TopicID || h.Partition != p.Partition) {
		return nil, fmt.Errorf("tiering: manifest at %s belongs to topic id %s partition %d", p.ManifestKey(), h.TopicID, h.Partition)
	}
	r.mu.Lock()
	if st := r.stateLocked(p); st.invalidations == invalidations {
		st.head, st.loaded, st.loadedAt = h, true, start
	}
	r.mu.Unlock()
	return h, nil
}

// locate finds the segment of h that holds offset. Unless h is fresh
// already, an offset at or past its end (any offset, when it is empty) is
// looked up again in a fresh head: the leader may have committed since. It
// returns the head it used.
func (r *ColdReader) locate(ctx context.Context, p PartitionRef, h *Head, fresh bool, offset int64) (*Head, SegmentRef, error) {
	if !fresh && (h == nil || h.Empty() || offset >= h.EndOffset()) {
		var err error
		if h, _, err = r.head(ctx, p, true); err != nil {
			return nil, SegmentRef{}, err
		}
	}
	if h == nil || h.Empty() {
		return h, SegmentRef{}, &OutOfColdRangeError{Offset: offset, Start: -1, End: -1}
	}
	if start, end := h.StartOffset(), h.EndOffset(); offset < start || offset >= end {
		return h, SegmentRef{}, &OutOfColdRangeError{Offset: offset, Start: start, End: end}
	}
	seg, err := r.segmentIn(ctx, h, offset)
	return h, seg, err
}

// segmentIn returns the segment of h holding offset, which must lie in
// [h.StartOffset(), h.EndOffset()).
func (r *ColdReader) segmentIn(ctx context.Context, h *Head, offset int64) (SegmentRef, error) {
	if i := h.partFor(offset); i >= 0 {
		segs, err := r.liveSegments(ctx, h.Parts[i])
		if err != nil {
			return SegmentRef{}, err
		}
		j := sort.Search(len(segs), func(j int) bool { return segs[j].LastOffset >= offset })
		if j < len(segs) && segs[j].BaseOffset <= offset {
			return segs[j], nil
		}
		return SegmentRef{}, fmt.Errorf("tiering: manifest part %s: %w", h.Parts[i].Key, corruptf("no segment holds offset %d", offset))
	}
	if i := h.tailFor(offset); i >= 0 {
		return h.Tail[i], nil
	}
	// DecodeHead checked that the segments follow on, so this is a head
	// built by hand.
	return SegmentRef{}, fmt.Errorf("tiering: manifest of %s/%d: %w", h.Topic, h.Partition, corruptf("no segment holds offset %d", offset))
}

// segmentAfter returns the segment of h that follows seg, if h has one.
func (r *ColdReader) segmentAfter(ctx context.Context, h *Head, seg SegmentRef) (SegmentRef, bool, error) {
	next := seg.LastOffset + 1
	if h == nil || h.Empty() || next < h.StartOffset() || next >= h.EndOffset() {
		return SegmentRef{}, false, nil
	}
	s, err := r.segmentIn(ctx, h, next)
	return s, err == nil, err
}

// liveSegments returns the segments of a closed part that ref leaves live.
// Parts never change, so each is read once and kept (by key, the most
// recently used readerParts of them).
func (r *ColdReader) liveSegments(ctx context.Context, ref PartRef) ([]SegmentRef, error) {
	r.mu.Lock()
	part, ok := r.mu.parts.get(ref.Key)
	r.mu.Unlock()
	if !ok {
		var err error
		part, _, err = r.parts.do(ctx, ref.Key, func(ctx context.Context) (*Part, error) {
			r.counters.manifestGets.Add(1)
			part, err := LoadPart(ctx, r.store, ref.Key)
			if err != nil {
				return nil, err
			}
			r.mu.Lock()
			r.mu.parts.add(ref.Key, part, 1)
			r.mu.Unlock()
			return part, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return partLiveSegments(ref, part)
}

// partLiveSegments returns the segments of a closed part that ref leaves
// live, once the head's summary of the part agrees with the part itself.
func partLiveSegments(ref PartRef, part *Part) ([]SegmentRef, error) {
	segs := part.Segments
	if n := len(segs); part.Seq != ref.Seq || n != ref.Count || ref.Skip < 0 || ref.Skip >= n ||
		segs[ref.Skip].BaseOffset != ref.BaseOffset || segs[n-1].LastOffset != ref.LastOffset {
		return nil, fmt.Errorf("tiering: manifest part %s: %w", ref.Key,
			corruptf("part %d of %d segments does not match the head's %+v", part.Seq, n, ref))
	}
	return segs[ref.Skip:], nil
}
