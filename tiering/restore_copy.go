package tiering

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"

	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering/objstore"
)

// NoCut: a RestoreCut field that says nothing.
const NoCut int64 = -1

// RestoreCut says where a restored copy of a partition ends. The copy is
// always a prefix of the source's log: it holds the offsets from the cold
// tier's start up to, not including, the first offset the cut leaves out.
//
//   - ToOffset P (when not NoCut): the records with offset < P.
//   - ToTime T (when not NoCut): the records before the first record whose
//     timestamp is after T, so T itself is included. The timestamps are
//     the records' own, as ListOffsets by time reads them (a
//     LogAppendTime batch's maxTimestamp for each of its records). Where
//     timestamps go back in time, a record at or before T that follows one
//     after T is not in the copy: the copy is the log up to the moment it
//     first went past T.
//
// When both are set the copy ends at the earlier of the two.
type RestoreCut struct {
	ToOffset int64
	ToTime   int64
}

// keepsAll reports whether the cut keeps every record of seg whole.
func (c RestoreCut) keepsAll(seg SegmentRef) bool {
	return (c.ToOffset == NoCut || seg.LastOffset < c.ToOffset) && (c.ToTime == NoCut || seg.MaxTs <= c.ToTime)
}

// keeps reports whether the cut keeps the record at offset with timestamp
// ts (given that it kept every record before it).
func (c RestoreCut) keeps(offset, ts int64) bool {
	return (c.ToOffset == NoCut || offset < c.ToOffset) && (c.ToTime == NoCut || ts <= c.ToTime)
}

// copyEpoch is the leader epoch of everything in a copy. A copy is a new
// topic, whose partitions start at leader epoch 0: its batches, segments
// and head carry that epoch, so that its first leader (epoch 0) takes the
// head over and continues the log without an epoch going back. The
// source's epochs are history of another topic.
const copyEpoch int32 = 0

// copyBuffer is the size of the buffer a segment object is copied through,
// so a copy holds at most this much of it in memory.
const copyBuffer = 1 << 20

// CopyPartition copies the cold tier of one partition, as src (its head)
// names it, into the partition dst (another topic id, usually another
// topic name), ending where cut says, and commits dst's first head. Every
// segment object is read as a stream of batches, spooled through a
// temporary file (memory stays bounded, and the store needs no
// server-side copy) and written as a new object under dst's keys with the
// tiering segment format (EncodeSegment). The batches keep their bytes
// but for the leader epoch field, which is copyEpoch; the batch the cut
// falls inside is re-encoded with its first records only, at their
// offsets and timestamps, under its producer id, epoch and sequence and
// codec (its CRC changes). Objects copied whole keep their producer
// snapshot; the one the cut falls inside has none. The head carries the
// source's settings and partition count.
//
// Nothing of src's objects changes, and dst's objects are all new, so
// retention or deletion of either topic leaves the other whole. dst must
// have no head yet (the head is written with If-None-Match). The objects
// are written before the head that names them; a failure leaves at most
// objects no head names under dst. When the cut keeps nothing, nothing is
// written and the head returned is nil.
func CopyPartition(ctx context.Context, store objstore.Bucket, src *Head, dst PartitionRef, cut RestoreCut) (*Head, error) {
	var (
		kept    []SegmentRef
		stopped bool
		err     error
	)
	walkErr := ForEachSegment(ctx, store, src, func(s SegmentRef) bool {
		whole := cut.keepsAll(s)
		var out SegmentRef
		var ok bool
		out, ok, err = copySegment(ctx, store, s, dst, cut, whole)
		if err != nil {
			return false
		}
		if ok {
			kept = append(kept, out)
		}
		stopped = !whole
		return !stopped
	})
	if err = errors.Join(walkErr, err); err != nil {
		return nil, err
	}
	if len(kept) == 0 {
		return nil, nil
	}
	h := &Head{Topic: dst.Topic, TopicID: dst.TopicID, Partition: dst.Partition, Generation: 1,
		LeaderEpoch: copyEpoch, Config: maps.Clone(src.Config), Partitions: src.Partitions}
	for len(kept) >= partSegments {
		p := &Part{Seq: h.NextSeq, Segments: kept[:partSegments]}
		key := dst.newPartKey(p.Seq)
		data, err := EncodePart(p)
		if err != nil {
			return nil, err
		}
		if _, err := store.Put(ctx, key, data, objstore.WriteOptions{IfAbsent: true}); err != nil {
			return nil, fmt.Errorf("tiering: copy to %s: write part %s: %w", dst.dir(), key, err)
		}
		h.Parts = append(h.Parts, partRef(key, p, 0))
		h.NextSeq++
		kept = kept[partSegments:]
	}
	h.Tail = kept
	data, err := EncodeHead(h)
	if err != nil {
		return nil, err
	}
	if _, err := store.Put(ctx, dst.ManifestKey(), data, objstore.WriteOptions{IfAbsent: true}); err != nil {
		return nil, fmt.Errorf("tiering: copy to %s: write the manifest: %w", dst.dir(), err)
	}
	return h, nil
}

// copySegment writes, under dst, the records of s that the cut keeps (a
// prefix of s; all of them when whole), stamped with copyEpoch and
// spooled through a temporary file so that memory stays bounded; ok is
// false when it keeps none. A whole segment keeps its producer snapshot.
func copySegment(ctx context.Context, store objstore.Bucket, s SegmentRef, dst PartitionRef, cut RestoreCut, whole bool) (out SegmentRef, ok bool, err error) {
	rd, err := store.Open(ctx, s.Key)
	if err != nil {
		return SegmentRef{}, false, fmt.Errorf("tiering: cut %s: %w", s.Key, err)
	}
	defer rd.Close()
	logLen := s.LogLen
	if logLen <= 0 {
		tail := make([]byte, min(rd.Size(), trailerSizeV2))
		if _, err := rd.ReadAt(ctx, tail, rd.Size()-int64(len(tail))); err != nil {
			return SegmentRef{}, false, fmt.Errorf("tiering: cut %s: read trailer: %w", s.Key, err)
		}
		t, err := DecodeTrailer(tail, rd.Size())
		if err != nil {
			return SegmentRef{}, false, fmt.Errorf("tiering: cut %s: %w", s.Key, err)
		}
		logLen = t.LogLen
	}
	spool, err := os.CreateTemp("", "strata-restore-cut-*.log")
	if err != nil {
		return SegmentRef{}, false, fmt.Errorf("tiering: cut %s: %w", s.Key, err)
	}
	defer func() {
		spool.Close()
		os.Remove(spool.Name())
	}()
	spooled, end, err := cutLog(bufio.NewWriterSize(spool, copyBuffer), io.NewSectionReader(readerAt{ctx, rd}, 0, logLen), s, cut)
	if err != nil || spooled == 0 {
		return SegmentRef{}, false, err
	}
	var producers []byte
	if whole {
		producers, err = ReadProducerSnapshot(ctx, store, s)
		if errors.Is(err, ErrNoProducerSnapshot) {
			producers, err = nil, nil
		}
		if err != nil {
			return SegmentRef{}, false, err
		}
	}
	key := dst.newSegmentKey(s.BaseOffset, copyEpoch)
	w, err := store.Create(ctx, key)
	if err != nil {
		return SegmentRef{}, false, fmt.Errorf("tiering: cut %s to %s: %w", s.Key, key, err)
	}
	t, err := EncodeSegment(w, spool, spooled, s.BaseOffset, s.BaseOffset, producers)
	if err != nil {
		w.Abort()
		return SegmentRef{}, false, err
	}
	if t.LastOffset != end-1 {
		w.Abort()
		return SegmentRef{}, false, fmt.Errorf("tiering: cut %s: wrote offsets up to %d, want %d", s.Key, t.LastOffset, end-1)
	}
	if err := w.Close(); err != nil {
		return SegmentRef{}, false, fmt.Errorf("tiering: cut %s to %s: %w", s.Key, key, err)
	}
	return SegmentRef{
		Key:        key,
		BaseOffset: t.BaseOffset,
		LastOffset: t.LastOffset,
		MinTs:      t.MinTs,
		MaxTs:      t.MaxTs,
		Size:       t.ObjectSize(),
		LogLen:     t.LogLen,
		Epoch:      copyEpoch,
		LogCRC:     t.LogCRC,
		Epochs:     []EpochStart{{Epoch: copyEpoch, Start: t.BaseOffset}},
	}, true, nil
}

// cutLog writes to w the batches of a segment's log bytes (from src) that
// the cut keeps, re-encoding the batch it falls inside, and returns the
// bytes written and the offset after the last record kept.
func cutLog(w *bufio.Writer, src io.Reader, s SegmentRef, cut RestoreCut) (written, end int64, err error) {
	in := bufio.NewReaderSize(src, copyBuffer)
	end = s.BaseOffset
	var buf []byte
	for {
		head, err := in.Peek(record.LengthOffset)
		if errors.Is(err, io.EOF) && len(head) == 0 {
			break
		}
		if err != nil {
			return 0, 0, fmt.Errorf("tiering: cut %s at offset %d: %w", s.Key, end, err)
		}
		n, err := record.PeekSize(head)
		if err != nil {
			return 0, 0, fmt.Errorf("tiering: cut %s at offset %d: %w", s.Key, end, err)
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(in, buf); err != nil {
			return 0, 0, fmt.Errorf("tiering: cut %s at offset %d: %w", s.Key, end, err)
		}
		b, _, err := record.Next(buf)
		if err != nil {
			return 0, 0, fmt.Errorf("tiering: cut %s at offset %d: %w", s.Key, end, err)
		}
		if b.BaseOffset() != end {
			return 0, 0, fmt.Errorf("tiering: cut %s: %w: batch at offset %d, want %d", s.Key, ErrCorrupt, b.BaseOffset(), end)
		}
		b.SetLeaderEpoch(copyEpoch)
		_, hi := batchTimes(b)
		if cut.keeps(b.LastOffset(), hi) {
			if _, err := w.Write(b); err != nil {
				return 0, 0, fmt.Errorf("tiering: cut %s: spool: %w", s.Key, err)
			}
			written += int64(len(b))
			end = b.NextOffset()
			continue
		}
		part, err := cutBatch(b, cut)
		if err != nil {
			return 0, 0, fmt.Errorf("tiering: cut %s: batch %d: %w", s.Key, b.BaseOffset(), err)
		}
		if part != nil {
			if _, err := w.Write(part); err != nil {
				return 0, 0, fmt.Errorf("tiering: cut %s: spool: %w", s.Key, err)
			}
			written += int64(len(part))
			end = part.NextOffset()
		}
		break
	}
	if err := w.Flush(); err != nil {
		return 0, 0, fmt.Errorf("tiering: cut %s: spool: %w", s.Key, err)
	}
	return written, end, nil
}

// cutBatch re-encodes the records of b that the cut keeps (its first ones)
// as one batch with b's header fields: base offset, leader epoch,
// producer, codec and timestamp type. It returns nil when it keeps none.
func cutBatch(b record.Batch, cut RestoreCut) (record.Batch, error) {
	if b.IsControl() {
		return nil, nil // a control batch is one marker: kept whole or not at all
	}
	recs, err := b.Records()
	if err != nil {
		return nil, err
	}
	n := 0
	for n < len(recs) && cut.keeps(recs[n].Offset, recs[n].Timestamp) {
		n++
	}
	if n == 0 {
		return nil, nil
	}
	opts := record.BatchOptions{
		Compression:   b.Compression(),
		BaseOffset:    b.BaseOffset(),
		LeaderEpoch:   b.LeaderEpoch(),
		ProducerID:    b.ProducerID(),
		ProducerEpoch: b.ProducerEpoch(),
		BaseSequence:  b.BaseSequence(),
		TimestampType: b.TimestampType(),
	}
	// A compacted topic's batch has gaps: each record keeps its offset
	// delta, and the batch ends at the last record kept.
	bl := record.NewBuilder(opts)
	for _, r := range recs[:n] {
		bl.AddAt(int32(r.Offset-b.BaseOffset()), r)
	}
	bl.SetLastOffsetDelta(int32(recs[n-1].Offset - b.BaseOffset()))
	out, err := bl.Build()
	if err != nil {
		return nil, err
	}
	out.SetBaseOffset(b.BaseOffset())
	if b.TimestampType() == record.LogAppendTime {
		out.SetLogAppendTime(b.MaxTimestamp())
	}
	return out, nil
}
