package tiering

import (
	"context"
	"errors"

	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering/objstore"
)

// OffsetForTimestamp returns the first offset in p's cold tier whose record
// timestamp is at or after ts, with that record's timestamp; found is false
// (and offset and timestamp -1) when every cold record is older or the cold
// tier is empty. Timestamps need not grow with offsets: the first segment
// whose MaxTs reaches ts holds the answer (closed parts whose MaxTs is
// below ts are not even read); its footer says where to start, and the
// first batch whose MaxTimestamp reaches ts holds the record. A cached head
// without an answer is checked against a fresh one once.
func (r *ColdReader) OffsetForTimestamp(ctx context.Context, p PartitionRef, ts int64) (offset, timestamp int64, found bool, err error) {
	ctx, end, err := r.begin(ctx)
	if err != nil {
		return -1, -1, false, err
	}
	defer end()
	h, fresh, err := r.head(ctx, p, false)
	if err != nil {
		return -1, -1, false, err
	}
	for {
		offset, timestamp, found, err = r.offsetForTime(ctx, p, h, ts)
		if found || fresh || (err != nil && !errors.Is(err, objstore.ErrNotFound)) {
			return offset, timestamp, found, err
		}
		// Newer segments may have been committed, or (ErrNotFound) older
		// ones removed, since h was read.
		if h, fresh, err = r.head(ctx, p, true); err != nil {
			return -1, -1, false, err
		}
	}
}

func (r *ColdReader) offsetForTime(ctx context.Context, p PartitionRef, h *Head, ts int64) (int64, int64, bool, error) {
	if h == nil {
		return -1, -1, false, nil
	}
	for _, ref := range h.Parts {
		if ref.MaxTs < ts {
			continue
		}
		segs, err := r.liveSegments(ctx, ref)
		if err != nil {
			return -1, -1, false, err
		}
		for _, seg := range segs {
			if seg.MaxTs >= ts {
				if off, t, ok, err := r.segmentOffsetForTime(ctx, p, seg, ts); ok || err != nil {
					return off, t, ok, err
				}
			}
		}
	}
	for _, seg := range h.Tail {
		if seg.MaxTs >= ts {
			if off, t, ok, err := r.segmentOffsetForTime(ctx, p, seg, ts); ok || err != nil {
				return off, t, ok, err
			}
		}
	}
	return -1, -1, false, nil
}

// segmentOffsetForTime finds the first record at or after ts in seg.
func (r *ColdReader) segmentOffsetForTime(ctx context.Context, p PartitionRef, seg SegmentRef, ts int64) (int64, int64, bool, error) {
	o, err := r.object(ctx, p, seg)
	if err != nil {
		return -1, -1, false, err
	}
	defer o.release()
	s := r.scan(o, o.entryForTime(ts))
	var buf []byte
	for !s.done() {
		b, err := s.header(ctx)
		if err != nil {
			return -1, -1, false, err
		}
		if b.MaxTimestamp() < ts {
			s.skip(b)
			continue
		}
		at := s.pos
		if buf, err = s.appendBatch(ctx, buf[:0], b); err != nil {
			return -1, -1, false, err
		}
		for rec, err := range record.Batch(buf).All() {
			if err != nil {
				return -1, -1, false, o.corrupt("batch at position %d: %w", at, err)
			}
			if rec.Timestamp >= ts {
				return rec.Offset, rec.Timestamp, true, nil
			}
		}
		// The header promised a record this late and none was: look on.
	}
	return -1, -1, false, s.checkEnd()
}
