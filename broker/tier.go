package broker

// The cold tier, as the broker runs it. One loop visits every partition this
// broker holds, a few times a second:
//
//   - as leader of a topic with remote.storage.enable, it uploads the sealed
//     segments the cold tier lacks, oldest first, committing each to the
//     partition's manifest (fenced by the leader epoch); uploads of several
//     partitions run in parallel, up to tiering.upload_parallelism;
//   - it deletes local segments the cold tier holds once local.retention.ms
//     or local.retention.bytes says so (never one the manifest does not list:
//     upload before expiry);
//   - it applies total retention (retention.ms, retention.bytes) to the cold
//     tier: manifest first, then the objects, then local segments below the
//     new start;
//   - now and then it deletes objects no manifest names (orphans);
//   - for topics without a cold tier, retention applies to the local log.
//
// It also keeps the sum of sealed bytes awaiting upload: produce is
// throttled beyond tiering.max_unuploaded_bytes, so an unreachable store
// delays uploads and fills no disk.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/tiering"
	"github.com/strata-log/strata/tiering/objstore"
	"github.com/strata-log/strata/tiering/objstore/s3"
)

// tierInterval is how often the tiering loop visits the partitions.
const tierInterval = 250 * time.Millisecond

// openStore builds the object store the configuration names, or nil for
// none.
func openStore(ctx context.Context, cfg config.Broker, metrics *objstore.Metrics) (objstore.Bucket, error) {
	var store objstore.Bucket
	var err error
	switch cfg.ObjectStore.Type {
	case config.ObjectStoreNone:
		return nil, nil
	case config.ObjectStoreFS:
		path := cfg.ObjectStorePath()
		if !filepath.IsAbs(path) {
			path, _ = filepath.Abs(path)
		}
		store, err = objstore.NewDir(path)
	case config.ObjectStoreS3:
		o := cfg.ObjectStore
		store, err = s3.New(ctx, s3.Config{
			Endpoint:  o.Endpoint,
			Region:    o.Region,
			Bucket:    o.Bucket,
			PathStyle: o.PathStyle,
			AccessKey: o.AccessKey,
			SecretKey: string(o.SecretKey),
		})
		if err == nil && o.CreateBucket {
			_, err = s3.EnsureBucket(ctx, store)
		}
	default:
		return nil, fmt.Errorf("unknown object store type %q", cfg.ObjectStore.Type)
	}
	if err != nil {
		return nil, err
	}
	if cfg.ObjectStore.Prefix != "" {
		store = objstore.WithPrefix(store, cfg.ObjectStore.Prefix)
	}
	return objstore.WithMetrics(store, metrics), nil
}

// tierState is one partition's cold tier as this broker last saw it, for
// describe and for the fetch path.
type tierState struct {
	coldStart, coldEnd int64 // -1 while the cold tier is empty
	coldBytes          int64
	coldSegments       int
	err                string
}

// uploadLag is the sealed local bytes and segments holding offsets the cold
// tier (as last seen) lacks.
func (p *partition) uploadLag() (bytes int64, segments int) {
	end := p.tier.Load().coldEnd
	for _, s := range p.log.Segments() {
		if s.Sealed && s.LastOffset >= s.BaseOffset && s.LastOffset >= end {
			bytes += s.Size
			segments++
		}
	}
	return bytes, segments
}

// partitionTier is the leader's tiering work on one partition.
type partitionTier struct {
	// aligned is the leader epoch in which this replica last made sure that
	// its local log continues the cold tier and published the cold figures;
	// -1 before. Produce and reads wait for it (ensureTier).
	aligned   atomic.Int32
	alignMu   sync.Mutex
	busy      atomic.Bool // an upload pass is running
	committer *tiering.Committer
	lastSweep time.Time
	retryAt   time.Time // after a failure, the next attempt waits
	failures  int
}

func (p *partition) ref() tiering.PartitionRef {
	return tiering.PartitionRef{Topic: p.topic, TopicID: p.topicID, Partition: p.id}
}

func (p *partition) remote(b *Broker) bool {
	return b.store != nil && p.cfg.Load().RemoteStorageEnable
}

// tierLoop runs the tiering work until the broker stops.
func (b *Broker) tierLoop() {
	tick := time.NewTicker(tierInterval)
	defer tick.Stop()
	sem := make(chan struct{}, max(b.cfg.Tiering.UploadParallelism, 1))
	var work sync.WaitGroup
	defer work.Wait()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
		var lag int64
		for _, p := range b.partitions() {
			if !p.remote(b) {
				b.localRetention(p)
				continue
			}
			if !p.isLeader() {
				b.followerRetention(p)
				continue
			}
			bytes, _ := p.uploadLag()
			lag += bytes
			if !p.work.busy.CompareAndSwap(false, true) {
				continue
			}
			work.Add(1)
			go func() {
				defer work.Done()
				defer p.work.busy.Store(false)
				select {
				case sem <- struct{}{}:
				case <-b.stop:
					return
				}
				defer func() { <-sem }()
				b.tierPass(p)
			}()
		}
		b.unuploaded.Store(lag)
	}
}

// tierPass is one round of a leader's tiering work on a partition.
func (b *Broker) tierPass(p *partition) {
	w := &p.work
	now := time.Now()
	if now.Before(w.retryAt) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() {
		select {
		case <-b.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := b.tierPassErr(ctx, p, now)
	st := *p.tier.Load()
	if err != nil {
		if errors.Is(err, tiering.ErrFenced) {
			w.committer = nil // a newer leader: wait for the metadata to say so
		}
		w.failures++
		backoff := min(time.Duration(1<<min(w.failures, 6))*100*time.Millisecond, 10*time.Second)
		w.retryAt = now.Add(backoff/2 + jitter(backoff/2))
		st.err = err.Error()
		if w.failures == 1 || w.failures%20 == 0 {
			b.log.Warn("tiering failed; will retry", "partition", p.name(), "failures", w.failures, "err", err)
		}
	} else {
		w.failures, st.err = 0, ""
	}
	p.tier.Store(&st)
}

func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(time.Now().UnixNano() % int64(d))
}

func (b *Broker) tierPassErr(ctx context.Context, p *partition, now time.Time) error {
	w := &p.work
	epoch := p.state.Load().LeaderEpoch
	if w.committer == nil || w.committer.Epoch() != epoch {
		c, err := tiering.NewCommitter(ctx, b.store, p.ref(), epoch)
		if err != nil {
			return err
		}
		w.committer, w.lastSweep = c, time.Time{}
	}
	c := w.committer
	if err := b.align(p, c.Head(), epoch); err != nil {
		return err
	}
	cfg := p.cfg.Load()
	topicCfg, partitions := b.topicRecord(p)
	for {
		uploaded, err := tiering.UploadNext(ctx, c, p.uploadLog(), topicCfg, partitions)
		b.publishTier(p, c.Head())
		if err != nil {
			return err
		}
		if !uploaded {
			break
		}
		b.log.Debug("uploaded a segment", "partition", p.name(), "cold_end", c.Head().EndOffset())
		if b.cold != nil {
			b.cold.Invalidate(p.ref())
		}
	}
	// Local retention: only what the manifest lists may go.
	if err := b.trimLocal(p, c.Head(), cfg, now); err != nil {
		return err
	}
	// Total retention, cold tier first.
	localOnly := localBytesAbove(p.log, c.Head().EndOffset())
	cut, err := tiering.RetentionCut(ctx, c, tiering.Retention{Ms: cfg.RetentionMs, Bytes: cfg.RetentionBytes}, localOnly, now)
	if err != nil {
		return err
	}
	if cut >= 0 {
		removed, err := tiering.ApplyRetention(ctx, c, cut)
		if err != nil {
			return err
		}
		if len(removed) > 0 {
			b.log.Info("retention removed cold segments", "partition", p.name(), "segments", len(removed), "log_start", cut)
		}
		if b.cold != nil {
			b.cold.Invalidate(p.ref())
		}
		if _, err := p.log.DeleteSegmentsBefore(cut); err != nil {
			return err
		}
		b.publishTier(p, c.Head())
	}
	grace := time.Duration(b.cfg.Tiering.OrphanGrace)
	if now.Sub(w.lastSweep) >= grace {
		deleted, err := tiering.CollectOrphans(ctx, c, grace, now)
		if err != nil {
			return err
		}
		if len(deleted) > 0 {
			b.log.Info("deleted orphaned objects", "partition", p.name(), "objects", len(deleted))
		}
		w.lastSweep = now
	}
	return nil
}

// ensureTier makes sure, once per leader epoch, that a tiered partition's
// local log continues where the cold tier ends and that the cold tier's
// figures (its start above all) are known, before the partition serves: a
// consumer asking for the earliest offset must not miss the cold history,
// and a producer must not reuse offsets the cold tier holds.
func (b *Broker) ensureTier(ctx context.Context, p *partition) error {
	if !p.remote(b) || b.cold == nil {
		return nil
	}
	epoch := p.state.Load().LeaderEpoch
	if p.work.aligned.Load() == epoch {
		return nil
	}
	h, err := b.cold.Head(ctx, p.ref())
	if err != nil {
		return refuse(ReasonLeaderNotAvailable, err, "%s: reading its cold tier: %v", p.name(), err)
	}
	return b.align(p, h, epoch)
}

// align resets a leader's local log to the cold tier's end when it lies
// wholly below it (a restored topic, or a leader that lost its disk), and
// publishes the cold figures.
func (b *Broker) align(p *partition, h *tiering.Head, epoch int32) error {
	p.work.alignMu.Lock()
	defer p.work.alignMu.Unlock()
	if p.work.aligned.Load() == epoch {
		b.publishTier(p, h)
		return nil
	}
	if h != nil && p.isLeader() {
		if end := h.EndOffset(); end > p.log.LogEndOffset() {
			b.log.Info("local log starts where the cold tier ends", "partition", p.name(), "offset", end)
			err := p.log.ResetTo(end)
			p.producers.reset()
			if err != nil {
				return err
			}
		}
		if err := b.coldProducerState(p, h); err != nil {
			return err
		}
	}
	b.publishTier(p, h)
	p.work.aligned.Store(epoch)
	return nil
}

// topicRecord is what a manifest records of its topic, for restore.
func (b *Broker) topicRecord(p *partition) (map[string]string, int32) {
	t, ok := b.meta.Metadata().Topic(p.topic)
	if !ok || t.ID != p.topicID {
		return nil, 0
	}
	return t.Config, int32(len(t.Partitions))
}

// publishTier records a partition's cold tier figures for describe, fetch
// and the upload backlog.
func (b *Broker) publishTier(p *partition, h *tiering.Head) {
	st := *p.tier.Load()
	st.coldStart, st.coldEnd = -1, -1
	if h != nil && !h.Empty() {
		st.coldStart, st.coldEnd = h.StartOffset(), h.EndOffset()
	}
	st.coldSegments, st.coldBytes = 0, 0
	if h != nil {
		st.coldSegments, st.coldBytes = h.Stats()
	}
	p.tier.Store(&st)
}

// trimLocal deletes local segments the cold tier holds (they end below its
// end) once local retention says they may go.
func (b *Broker) trimLocal(p *partition, h *tiering.Head, cfg *config.Topic, now time.Time) error {
	if h == nil || h.Empty() {
		return nil
	}
	cut := localCut(p.log.Segments(), h.EndOffset(), cfg.LocalRetentionMs, cfg.LocalRetentionBytes, now)
	if cut <= p.log.LogStartOffset() {
		return nil
	}
	_, err := p.log.DeleteSegmentsBefore(cut)
	return err
}

// localCut picks the offset before which sealed local segments go: those
// that end below limit and are older than ms or beyond bytes, oldest first,
// stopping at the first that stays. -1 values mean unbounded.
func localCut(segs []hotlog.SegmentInfo, limit, ms, bytes int64, now time.Time) int64 {
	var total int64
	for _, s := range segs {
		total += s.Size
	}
	cut := int64(-1)
	for _, s := range segs {
		if !s.Sealed || s.LastOffset >= limit {
			break
		}
		old := ms >= 0 && s.MaxTimestamp < now.UnixMilli()-ms
		big := bytes >= 0 && total > bytes
		if !old && !big {
			break
		}
		total -= s.Size
		cut = s.LastOffset + 1
	}
	return cut
}

// localBytesAbove is the size of the local segments holding offsets at or
// past offset: what the cold tier does not hold.
func localBytesAbove(log *hotlog.Log, offset int64) int64 {
	var n int64
	for _, s := range log.Segments() {
		if s.LastOffset >= offset {
			n += s.Size
		}
	}
	return n
}

// localRetention applies total retention to a topic without a cold tier.
func (b *Broker) localRetention(p *partition) {
	cfg := p.cfg.Load()
	cut := localCut(p.log.Segments(), p.log.HighWatermark(), cfg.RetentionMs, cfg.RetentionBytes, time.Now())
	if cut > p.log.LogStartOffset() {
		if _, err := p.log.DeleteSegmentsBefore(cut); err != nil {
			b.log.Warn("retention failed", "partition", p.name(), "err", err)
		}
	}
}

// followerRetention lets a follower of a tiered topic drop local segments
// its leader has uploaded, by the same local retention rules.
func (b *Broker) followerRetention(p *partition) {
	if b.cold == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := b.cold.Head(ctx, p.ref())
	if err != nil || h == nil {
		return
	}
	b.publishTier(p, h)
	if err := b.trimLocal(p, h, p.cfg.Load(), time.Now()); err != nil {
		b.log.Warn("local retention failed", "partition", p.name(), "err", err)
	}
}

// checkBacklog throttles produce while too many sealed bytes await upload.
func (b *Broker) checkBacklog() error {
	limit := int64(b.cfg.Tiering.MaxUnuploadedBytes)
	if b.store == nil || limit < 0 {
		return nil
	}
	if lag := b.unuploaded.Load(); lag > limit {
		return &Error{
			Reason:     ReasonThrottled,
			Message:    fmt.Sprintf("%d sealed bytes await upload to the object store, over tiering.max_unuploaded_bytes (%d)", lag, limit),
			RetryAfter: time.Second,
		}
	}
	return nil
}
