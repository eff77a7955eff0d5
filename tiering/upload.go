package tiering

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/tiering/objstore"
)

// UploadSegment writes a sealed local segment, read from src, to the store
// as a cold segment object under a fresh key, leaving out the batches below
// from, with producers (the producer snapshot as of the segment's end; nil
// for none), and returns the reference to commit. epochs is the
// leader-epoch lineage of the offsets it holds (EpochsIn). Nothing refers
// to the object until the manifest names it, so a failure here leaves at
// most an orphan that CollectOrphans removes later.
func UploadSegment(ctx context.Context, store objstore.Bucket, ref PartitionRef, epoch int32, seg hotlog.SegmentInfo, src io.ReaderAt, from int64, epochs []EpochStart, producers []byte) (SegmentRef, error) {
	if !seg.Sealed {
		return SegmentRef{}, fmt.Errorf("tiering: segment %d is not sealed", seg.BaseOffset)
	}
	key := ref.newSegmentKey(max(seg.BaseOffset, from), epoch)
	w, err := store.Create(ctx, key)
	if err != nil {
		return SegmentRef{}, fmt.Errorf("tiering: upload %s: %w", key, err)
	}
	t, err := EncodeSegment(w, src, seg.Size, seg.BaseOffset, from, producers)
	if err != nil {
		w.Abort()
		return SegmentRef{}, err
	}
	if err := w.Close(); err != nil {
		return SegmentRef{}, fmt.Errorf("tiering: upload %s: %w", key, err)
	}
	return SegmentRef{
		Key:        key,
		BaseOffset: t.BaseOffset,
		LastOffset: t.LastOffset,
		MinTs:      t.MinTs,
		MaxTs:      t.MaxTs,
		Size:       t.ObjectSize(),
		LogLen:     t.LogLen,
		Epoch:      epoch,
		LogCRC:     t.LogCRC,
		Epochs:     EpochsIn(epochs, t.BaseOffset, t.LastOffset),
	}, nil
}

// LocalLog is what the uploader needs of a partition's local log.
type LocalLog interface {
	Segments() []hotlog.SegmentInfo
	OpenSegment(base int64) (hotlog.SegmentReader, error)
	// Epochs is the log's leader-epoch history.
	Epochs() []hotlog.EpochEntry
}

// ProducerSnapshots is what a LocalLog may also offer: the producer
// snapshot as of a sealed segment's end, which the uploader stores in the
// segment's object. A LocalLog without it uploads objects without one.
type ProducerSnapshots interface {
	ProducerSnapshot(seg hotlog.SegmentInfo) ([]byte, error)
}

// PendingUploads returns the sealed local segments holding offsets the cold
// tier lacks, oldest first: those ending at or after the cold tier's end
// (all of them while it is empty). Only committed offsets may go to the
// cold tier, so a segment is offered only once it ends below committed
// (the high watermark): the cold tier is read as committed by every
// broker, and a leader's local deletes follow what it holds.
func PendingUploads(log LocalLog, h *Head, committed int64) []hotlog.SegmentInfo {
	end := h.EndOffset()
	var out []hotlog.SegmentInfo
	for _, s := range log.Segments() {
		if s.Sealed && s.LastOffset >= s.BaseOffset && s.LastOffset >= end && s.LastOffset < committed {
			out = append(out, s)
		}
	}
	return out
}

// UploadNext uploads the oldest committed segment the cold tier lacks and
// commits it; it reports false when there is nothing to upload. A segment
// that starts before the cold tier's end (a new leader's segment boundaries
// differ from the old leader's) is uploaded from that end on. A cold tier
// that ends before the local log starts would leave a gap: that is refused,
// since the manifest must stay contiguous.
func UploadNext(ctx context.Context, c *Committer, log LocalLog, committed int64, config map[string]string, partitions int32) (bool, error) {
	if err := c.settle(ctx); err != nil { // else a landed commit would look pending
		return false, err
	}
	pending := PendingUploads(log, c.Head(), committed)
	if len(pending) == 0 {
		return false, nil
	}
	seg := pending[0]
	from := c.Head().EndOffset()
	if from >= 0 && from < seg.BaseOffset {
		return false, fmt.Errorf("%w: the cold tier of %s ends at %d but the local log continues at %d",
			ErrGap, c.ref.dir(), from, seg.BaseOffset)
	}
	var producers []byte
	if ps, ok := log.(ProducerSnapshots); ok {
		var err error
		if producers, err = ps.ProducerSnapshot(seg); err != nil {
			return false, fmt.Errorf("tiering: producer snapshot for segment %d: %w", seg.BaseOffset, err)
		}
	}
	src, err := log.OpenSegment(seg.BaseOffset)
	if err != nil {
		return false, fmt.Errorf("tiering: %w", err)
	}
	ref, err := UploadSegment(ctx, c.store, c.ref, c.epoch, seg, src, from, fromEntries(log.Epochs()), producers)
	src.Close()
	if err != nil {
		return false, err
	}
	if err := c.Append(ctx, ref, config, partitions); err != nil {
		if errors.Is(err, ErrOutcomeUnknown) {
			return false, err // the head may name it: only the orphan sweep, reading the head, may delete it
		}
		// Never named by a manifest: delete now rather than wait for the
		// orphan sweep. A failed delete is left to that sweep.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
		c.store.Delete(dctx, ref.Key)
		cancel()
		return false, err
	}
	return true, nil
}

// ErrGap: the local log does not continue where the cold tier ends.
var ErrGap = errors.New("tiering: gap between the cold tier and the local log")
