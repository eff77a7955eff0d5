package tiering

import (
	"context"
	"fmt"
	"hash/crc32"

	"github.com/strata-log/strata/compact"
	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering/objstore"
)

// wholeObject is a cold segment object read in full and checked: the
// cold cleaner's unit of reading, one object in memory at a time.
type wholeObject struct {
	ref       SegmentRef
	log       []byte // the log bytes
	producers []byte // the producer snapshot, nil when it has none
}

// readWholeObject reads seg's object and checks it against its trailer and
// the manifest's reference: sizes, offsets and CRCs of the log and the
// producer snapshot. The batches themselves are checked as they are read
// (batches).
func readWholeObject(ctx context.Context, r objstore.Reader, seg SegmentRef) (*wholeObject, error) {
	data, _, err := r.Get(ctx, seg.Key)
	if err != nil {
		return nil, fmt.Errorf("tiering: read %s: %w", seg.Key, err)
	}
	size := int64(len(data))
	t, err := DecodeTrailer(data[max(0, len(data)-maxTrailerSize):], size)
	if err != nil {
		return nil, fmt.Errorf("tiering: %s: %w", seg.Key, err)
	}
	switch {
	case size != seg.Size || t.LogLen != seg.LogLen || t.BaseOffset != seg.BaseOffset || t.LastOffset != seg.LastOffset:
		return nil, fmt.Errorf("tiering: %s: %w", seg.Key, corruptf("object of %d bytes holds %d..%d, the manifest says %d bytes holding %d..%d",
			size, t.BaseOffset, t.LastOffset, seg.Size, seg.BaseOffset, seg.LastOffset))
	case crc32.Checksum(data[:t.LogLen], castagnoli) != t.LogCRC:
		return nil, fmt.Errorf("tiering: %s: %w", seg.Key, corruptf("log crc does not match the trailer's"))
	}
	o := &wholeObject{ref: seg, log: data[:t.LogLen]}
	if t.ProducersLen > 0 {
		p := data[t.ProducersPos() : t.ProducersPos()+int64(t.ProducersLen)]
		if err := CheckProducerSnapshot(p, t); err != nil {
			return nil, fmt.Errorf("tiering: %s: %w", seg.Key, err)
		}
		o.producers = p
	}
	return o, nil
}

// batches yields the object's batches, checking each (length, CRC) and
// that they grow and stay within the object's offsets.
func (o *wholeObject) batches(yield func(record.Batch, error) bool) {
	next := o.ref.BaseOffset
	for buf := o.log; len(buf) > 0; {
		b, rest, err := record.Next(buf)
		if err == nil && (b.BaseOffset() < next || b.LastOffset() > o.ref.LastOffset) {
			err = corruptf("batch %d..%d out of place after offset %d in %d..%d", b.BaseOffset(), b.LastOffset(), next-1, o.ref.BaseOffset, o.ref.LastOffset)
		}
		if err != nil {
			yield(nil, fmt.Errorf("tiering: %s at position %d: %w", o.ref.Key, len(o.log)-len(buf), err))
			return
		}
		if !yield(b, nil) {
			return
		}
		next, buf = b.NextOffset(), rest
	}
}

// readThrottled reads seg's object whole once th lets its bytes through.
func readThrottled(ctx context.Context, r objstore.Reader, th *Throttle, seg SegmentRef) (*wholeObject, error) {
	if err := th.Wait(ctx, seg.Size); err != nil {
		return nil, err
	}
	return readWholeObject(ctx, r, seg)
}

// objectsSource streams the batches of segs, oldest first, reading one
// object at a time; seen, when not nil, is told of each object as it is
// read (before its batches are yielded).
func objectsSource(ctx context.Context, r objstore.Reader, th *Throttle, segs []SegmentRef, seen func(*wholeObject)) compact.Source {
	return func(yield func(record.Batch, error) bool) {
		for _, seg := range segs {
			o, err := readThrottled(ctx, r, th, seg)
			if err != nil {
				yield(nil, err)
				return
			}
			if seen != nil {
				seen(o)
			}
			for b, err := range o.batches {
				if !yield(b, err) || err != nil {
					return
				}
			}
		}
	}
}
