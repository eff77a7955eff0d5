package broker

// The cold tier and idempotent producers. The uploader stores, with every
// segment it uploads, the producer snapshot as of the segment's end
// (uploadLog). A leader whose local log lies wholly below the cold tier's
// end (a topic restored from the bucket, or a replica that lost its disk)
// continues its log where the cold tier ends, with no batch of the past in
// its local log: it takes its producer state from the snapshot of the last
// cold segment instead of starting empty, so that a producer retrying a
// batch the cold tier holds is answered with the original's offsets, not
// written twice (coldProducerState, from align). The same goes for any
// leader whose local snapshots cannot give the exact state (its log starts
// past the newest of them, or they are partial: a follower that was reset
// to its leader's log start computed them without the history before it),
// as long as the cold tier has a segment ending inside its local log.

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/corrupt"
	"github.com/strata-log/strata/tiering"
	"github.com/strata-log/strata/tiering/objstore"
)

// coldProducerTimeout bounds the reads of a cold producer snapshot.
const coldProducerTimeout = 30 * time.Second

// uploadLog is a partition's local log as the uploader sees it: with the
// producer snapshot of each segment it uploads.
type uploadLog struct {
	*hotlog.Log
	p *partition
}

// uploadLog is what tiering.UploadNext reads a partition's segments from.
func (p *partition) uploadLog() tiering.LocalLog { return uploadLog{Log: p.log, p: p} }

// ProducerSnapshot returns the producer snapshot as of seg's end, writing
// it first if the broker's loop has not yet: a segment is never uploaded
// without one, and so never deleted locally before its snapshot exists.
func (u uploadLog) ProducerSnapshot(seg hotlog.SegmentInfo) ([]byte, error) {
	return u.p.producers.files(u.Log).ensureAt(seg.LastOffset + 1)
}

// coldProducerState gives a leader whose producer state the local log
// cannot rebuild exactly the snapshot of the newest cold segment that ends
// inside its local log (the last one, after a reset to the cold tier's
// end): it is written as a local snapshot, and the next check of a batch
// rebuilds the state from it. A cold object without a snapshot (uploaded
// before objects carried one) or with a damaged one leaves the state as
// the local log gives it, with a warning; producers it lacks then start
// again (UNKNOWN_PRODUCER_ID). A failed read is returned, for align to try
// again.
func (p *partition) coldProducerState(ctx context.Context, store objstore.Reader, h *tiering.Head, logger *slog.Logger) error {
	if store == nil || h == nil || h.Empty() {
		return nil
	}
	s := p.producers
	s.mu.Lock()
	exact := s.mu.built && s.mu.exact
	s.mu.Unlock()
	if exact {
		return nil // a follower that recorded every batch it appended, with the history before
	}
	ps := s.files(p.log)
	exact, err := ps.exactAt()
	if err != nil {
		return refuse(ReasonStorageError, err, "%s: %v", p.name(), err)
	}
	if exact {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, coldProducerTimeout)
	defer cancel()
	start, end := p.log.LogStartOffset(), p.log.LogEndOffset()
	seg, ok, err := tiering.SegmentEndingIn(ctx, store, h, start, end)
	if err != nil {
		return refuse(ReasonLeaderNotAvailable, err, "%s: finding its producer snapshot in the cold tier: %v", p.name(), err)
	}
	if !ok {
		return nil
	}
	data, err := tiering.ReadProducerSnapshot(ctx, store, seg)
	var snap *producerSnapshot
	if err == nil {
		if snap, err = decodeProducerSnapshot(data); err == nil && snap.offset != seg.LastOffset+1 {
			err = snapshotCorrupt("the snapshot of the cold segment ending at %d is at %d", seg.LastOffset+1, snap.offset)
		}
	}
	switch {
	case errors.Is(err, tiering.ErrNoProducerSnapshot):
		logger.Info("the cold segment has no producer snapshot; idempotent producers that wrote before it start again", "partition", p.name(), "segment", seg.Key)
		return nil
	case corrupt.Is(err):
		logger.Warn("the producer snapshot of a cold segment is damaged; idempotent producers that wrote before it start again", "partition", p.name(), "segment", seg.Key, "err", err)
		return nil
	case err != nil:
		return refuse(ReasonLeaderNotAvailable, err, "%s: reading its producer snapshot from the cold tier: %v", p.name(), err)
	}
	if err := ps.write(snap, data); err != nil {
		if errors.Is(err, errSnapshotStale) {
			logger.Warn("the local log does not continue the cold segment's history; not using its producer snapshot", "partition", p.name(), "segment", seg.Key, "err", err)
			return nil
		}
		return refuse(ReasonStorageError, err, "%s: %v", p.name(), err)
	}
	if err := ps.dropPartialAbove(snap.offset); err != nil {
		return refuse(ReasonStorageError, err, "%s: %v", p.name(), err)
	}
	s.reset() // the next check rebuilds from the snapshot just written
	logger.Info("producer state loaded from the cold tier", "partition", p.name(), "offset", snap.offset, "producers", len(snap.producers))
	return nil
}

// maxColdProducerID is the largest producer id the newest producer
// snapshot of any partition of a topic found in the bucket names, or -1.
// A restored topic's leaders load those snapshots; the cluster must then
// never hand out those ids to new producers (ReserveProducerIDs), or a new
// producer's first batch could be taken for a resend of an old one's and
// never written. Snapshots that are missing or damaged are not loaded
// either, so they are skipped here too.
func maxColdProducerID(ctx context.Context, store objstore.Reader, heads map[int32]*tiering.Head) (int64, error) {
	top := int64(-1)
	for _, h := range heads {
		seg, ok, err := tiering.SegmentEndingIn(ctx, store, h, h.EndOffset(), h.EndOffset())
		if err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		data, err := tiering.ReadProducerSnapshot(ctx, store, seg)
		switch {
		case errors.Is(err, tiering.ErrNoProducerSnapshot), corrupt.Is(err):
			continue
		case err != nil:
			return 0, err
		}
		snap, err := decodeProducerSnapshot(data)
		if err != nil {
			continue
		}
		for _, e := range snap.producers {
			// The controller's number, without the tag that binds an id
			// to its principal (producer_binding.go): the number is what
			// must not be handed out again.
			top = max(top, e.id&producerCounterMask)
		}
	}
	return top, nil
}
