package broker

// The cold tier, as the broker runs it. One loop visits every partition this
// broker holds, a few times a second:
//
//   - as leader of a partition with a cold tier (its topic has
//     remote.storage.enable, or the bucket holds its history from when it
//     had: see tier_disable.go), it first takes the partition's manifest
//     over for its leader epoch (a fencing write, see tiering.NewCommitter)
//     and makes sure its local log continues the cold tier; it commits the
//     topic's settings to the manifest when they differ from what it
//     records (so an alter reaches the bucket without waiting for an
//     upload, and AlterTopicConfig can wait for it); while
//     remote.storage.enable is on, it seals the active segment when
//     acknowledged records in it have waited for the bucket nearly as long
//     as remote.max.lag.ms allows (tier_lag.go), then uploads the sealed
//     segments the cold tier lacks that hold only committed records (below
//     the high watermark), oldest first, committing each to the manifest;
//     uploads of several partitions run in parallel, up to
//     tiering.upload_parallelism;
//   - it deletes local segments the cold tier holds once local.retention.ms
//     or local.retention.bytes says so (never one the manifest does not list,
//     never one above the high watermark);
//   - it applies total retention (retention.ms, retention.bytes) to the cold
//     tier: manifest first, then the objects, then local segments below the
//     new start;
//   - now and then it deletes objects no manifest names (orphans);
//   - for topics without a cold tier, retention applies to the local log.
//
// A leader takes the manifest over before it serves, too (ensureTier): a
// deposed leader that still reaches the bucket can commit nothing from the
// moment its successor serves a produce or a fetch.
//
// It also keeps the sum of sealed bytes awaiting upload: produce is
// throttled beyond tiering.max_unuploaded_bytes, so an unreachable store
// delays uploads and fills no disk.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// s3Config is the S3 client's configuration from the broker's settings.
func s3Config(o config.ObjectStore) s3.Config {
	return s3.Config{
		Endpoint:  o.Endpoint,
		Region:    o.Region,
		Bucket:    o.Bucket,
		PathStyle: o.PathStyle,
		AccessKey: o.AccessKey,
		SecretKey: string(o.SecretKey),
	}
}

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
		store, err = s3.New(ctx, s3Config(cfg.ObjectStore))
		if err == nil && cfg.ObjectStore.CreateBucket {
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
	// loaded is false until this replica has read the partition's
	// manifest head since it opened: the figures below then say nothing
	// about the cold tier (a zero there would pass for an empty one).
	loaded             bool
	coldStart, coldEnd int64 // -1 while the cold tier is empty
	coldBytes          int64
	coldSegments       int
	err                string
}

// uploadLag is the sealed local bytes and segments holding offsets the cold
// tier (as last seen) lacks; zero until the cold tier is loaded, as the
// figure is not known then.
func (p *partition) uploadLag() (bytes int64, segments int) {
	if !p.tier.Load().loaded {
		return 0, 0
	}
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
	// aligned is the leader epoch in which this replica last took the
	// manifest over and made sure its local log continues the cold tier;
	// -1 before. Produce and reads wait for it (ensureTier).
	aligned atomic.Int32
	// mu guards committer: the tiering loop uses it, and a leader's first
	// produce or fetch in an epoch may create it.
	mu        sync.Mutex
	committer *tiering.Committer
	busy      atomic.Bool // an upload pass is running
	lastSweep time.Time
	lastClean time.Time // the cold cleaner's last look
	retryAt   time.Time // after a failure, the next attempt waits
	failures  int
}

func (p *partition) ref() tiering.PartitionRef {
	return tiering.PartitionRef{Topic: p.topic, TopicID: p.topicID, Partition: p.id}
}

// remote reports whether the partition has a cold tier to run here: its
// topic uploads to the object store, or the bucket holds records of it
// from when it did. The second keeps that history readable, aligned with
// a new leader's log and under retention whatever the setting says now (a
// broker restarted with topic defaults that switch remote storage off, an
// alter that raced an upload): a setting never makes acknowledged records
// unreadable. Only uploads follow the setting alone (uploads).
func (p *partition) remote(b *Broker) bool {
	return b.store != nil && (p.cfg.Load().RemoteStorageEnable || p.holdsCold())
}

// uploads reports whether the partition's leader uploads its sealed
// segments: remote.storage.enable, on a broker with an object store.
func (p *partition) uploads(b *Broker) bool {
	return b.store != nil && p.cfg.Load().RemoteStorageEnable
}

// holdsCold reports whether the cold tier, as this replica last saw it,
// holds records.
func (p *partition) holdsCold() bool { return p.tier.Load().coldEnd >= 0 }

// lookForCold reads, once per replica, the manifest head of a partition
// whose topic does not upload, so that history uploaded before the
// setting changed is found (remote). Nothing is uploaded while the
// setting is off, so once is enough; a failed read is tried again on the
// next round.
func (b *Broker) lookForCold(ctx context.Context, p *partition) {
	if b.cold == nil || p.tier.Load().loaded {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	h, err := b.cold.Head(ctx, p.ref())
	if err != nil {
		return
	}
	p.publishTier(h)
	if h != nil && !h.Empty() {
		b.log.Info("the topic does not upload, but the bucket holds its history: it stays readable and under retention",
			"partition", p.name(), "cold_start", h.StartOffset(), "cold_end", h.EndOffset())
	}
}

// tierEnv is what a partition's tiering work needs of its broker.
type tierEnv struct {
	store objstore.Bucket
	// cold is the broker's cold reader, whose cached heads are dropped when
	// the manifest changes; nil in a simulation.
	cold        *tiering.ColdReader
	logger      *slog.Logger
	orphanGrace time.Duration
	// clean is how the cold cleaner runs (tier_clean.go); its zero value
	// means the defaults.
	clean coldCleanEnv
	// coldCleaner counts the cold cleaner's passes; nil counts nothing
	// (the simulation).
	coldCleaner *coldCleanerStats
	// topic is what a manifest records of the partition's topic: its
	// settings and partition count.
	topic func(p *partition) (map[string]string, int32)
}

func (b *Broker) tierEnv() tierEnv {
	return tierEnv{store: b.store, cold: b.cold, logger: b.log, orphanGrace: time.Duration(b.cfg.Tiering.OrphanGrace), topic: b.topicRecord,
		coldCleaner: &b.metrics.coldCleaner,
		clean: coldCleanEnv{
			retiredGrace: time.Duration(b.cfg.Tiering.RetiredGrace),
			keyMapBytes:  int(b.cfg.Cleaner.DedupeBufferSize),
			interval:     time.Duration(b.cfg.Cleaner.Backoff),
			throttle:     b.coldCleanThrottle,
			rate:         int64(b.cfg.Tiering.ColdCleanerIOMaxBytesPerSecond),
		}}
}

func (e tierEnv) invalidate(p *partition) {
	if e.cold != nil {
		e.cold.Invalidate(p.ref())
	}
}

// tierLoop runs the tiering work until ctx ends, the passes it started
// included: it waits for them.
func (b *Broker) tierLoop(ctx context.Context) {
	tick := time.NewTicker(tierInterval)
	defer tick.Stop()
	sem := make(chan struct{}, max(b.cfg.Tiering.UploadParallelism, 1))
	var work sync.WaitGroup
	defer work.Wait()
	env := b.tierEnv()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-b.tierKick:
		}
		var lag int64
		for _, p := range b.partitions() {
			if !p.remote(b) {
				b.lookForCold(ctx, p)
			}
			if !p.remote(b) {
				p.localRetention(b.log)
				continue
			}
			if !p.isLeader() {
				b.followerRetention(ctx, p)
				continue
			}
			if p.uploads(b) {
				bytes, _ := p.uploadLag()
				lag += bytes
			}
			if !p.work.busy.CompareAndSwap(false, true) {
				continue
			}
			work.Add(1)
			go func() {
				defer work.Done()
				defer p.work.busy.Store(false)
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return
				}
				defer func() { <-sem }()
				pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				defer cancel()
				p.tierPass(pctx, env, time.Now())
			}()
		}
		b.unuploaded.Store(lag)
	}
}

// tierPass is one round of a leader's tiering work on a partition. After a
// failure the next rounds wait, longer each time up to ten seconds.
func (p *partition) tierPass(ctx context.Context, env tierEnv, now time.Time) {
	w := &p.work
	if now.Before(w.retryAt) {
		return
	}
	err := p.tierPassErr(ctx, env, now)
	st := *p.tier.Load()
	if err != nil {
		if errors.Is(err, tiering.ErrFenced) {
			w.mu.Lock()
			w.committer = nil // a newer leader: wait for the metadata to say so
			w.mu.Unlock()
		}
		w.failures++
		backoff := min(time.Duration(1<<min(w.failures, 6))*100*time.Millisecond, 10*time.Second)
		w.retryAt = now.Add(backoff/2 + jitter(now, backoff/2))
		st.err = err.Error()
		if w.failures == 1 || w.failures%20 == 0 {
			env.logger.Warn("tiering failed; will retry", "partition", p.name(), "failures", w.failures, "err", err)
		}
	} else {
		w.failures, st.err = 0, ""
	}
	p.tier.Store(&st)
}

// jitter spreads retries: a duration below d taken from the clock's
// reading, so a simulated clock gives the same one every run.
func jitter(now time.Time, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(now.UnixNano() % int64(d))
}

// tierPassErr is one round of a leader's tiering work, its phases in
// order; the first that fails ends the round.
func (p *partition) tierPassErr(ctx context.Context, env tierEnv, now time.Time) error {
	c, err := p.takeOverTier(ctx, env)
	if err != nil {
		return err
	}
	r := newTierRound(p, env, c, now)
	for _, phase := range []func(context.Context) error{
		r.commitSettings,
		r.sealForLag,
		r.upload,
		r.trimLocal,
		r.totalRetention,
		r.cleanColdTier,
		r.collectOrphans,
	} {
		if err := phase(ctx); err != nil {
			return err
		}
	}
	return nil
}

// tierRound is what one round of a leader's tiering work on a partition
// reads once and its phases share: the committer the leader took the
// manifest over with, the settings in force, the topic's record and the
// clock's reading.
type tierRound struct {
	p   *partition
	env tierEnv
	c   *tiering.Committer
	cfg *config.Topic
	// topicCfg and partitions are what the manifest records of the topic
	// (tierEnv.topic); partitions is 0 for a topic this broker's metadata
	// no longer has.
	topicCfg   map[string]string
	partitions int32
	now        time.Time
}

func newTierRound(p *partition, env tierEnv, c *tiering.Committer, now time.Time) *tierRound {
	r := &tierRound{p: p, env: env, c: c, cfg: p.cfg.Load(), now: now}
	r.topicCfg, r.partitions = env.topic(p)
	return r
}

// commitSettings writes the topic's settings as the metadata holds them
// now to the manifest when it records others: an alter on a quiet
// partition must not wait for an upload, and retention below must not
// write the old ones back. A topic this broker's metadata no longer has
// leaves them as they are.
func (r *tierRound) commitSettings(ctx context.Context) error {
	if r.partitions == 0 {
		return nil
	}
	return r.c.SetConfig(ctx, r.topicCfg, r.partitions)
}

// sealForLag notes how long acknowledged records have waited for the
// bucket, and seals the active segment if the oldest of them must go now
// to be in the bucket within remote.max.lag.ms (tier_lag.go). A topic
// whose remote.storage.enable is off uploads nothing: its rounds only
// keep the history the bucket already holds (remote).
func (r *tierRound) sealForLag(context.Context) error {
	if !r.cfg.RemoteStorageEnable {
		return nil
	}
	p := r.p
	p.commits.observe(p.log.HighWatermark(), r.now)
	p.commits.forget(r.c.Head().EndOffset())
	sealed, err := p.sealForLag(r.cfg, r.c.Head().EndOffset(), r.now)
	if sealed && err == nil {
		r.env.logger.Debug(msgLagSeal, "partition", p.name(), "high_watermark", p.log.HighWatermark())
	}
	return err
}

// upload moves the sealed segments the cold tier lacks into it, oldest
// first, each committed to the manifest; only those holding committed
// records (below the high watermark), which every broker reads as
// committed. Nothing while remote.storage.enable is off.
func (r *tierRound) upload(ctx context.Context) error {
	if !r.cfg.RemoteStorageEnable {
		return nil
	}
	p, c := r.p, r.c
	for {
		uploaded, err := tiering.UploadNext(ctx, c, p.uploadLog(), p.log.HighWatermark(), r.topicCfg, r.partitions)
		p.publishTier(c.Head())
		if err != nil {
			return err
		}
		if !uploaded {
			break
		}
		r.env.logger.Debug("uploaded a segment", "partition", p.name(), "cold_end", c.Head().EndOffset())
		r.env.invalidate(p)
	}
	p.commits.forget(c.Head().EndOffset())
	return nil
}

// trimLocal applies local retention: only what the manifest lists may go.
func (r *tierRound) trimLocal(context.Context) error {
	return r.p.trimLocal(r.c.Head(), r.cfg, r.now)
}

// totalRetention applies retention.ms and retention.bytes to the whole
// log, cold tier first: the manifest's new start, then its objects, then
// the local segments below that start.
func (r *tierRound) totalRetention(ctx context.Context) error {
	p, c := r.p, r.c
	localOnly := localBytesAbove(p.log, c.Head().EndOffset())
	cut, err := tiering.RetentionCut(ctx, c, tiering.Retention{Ms: r.cfg.RetentionMs, Bytes: r.cfg.RetentionBytes}, localOnly, r.now)
	if err != nil || cut < 0 {
		return err
	}
	removed, err := tiering.ApplyRetention(ctx, c, cut)
	if err != nil {
		return err
	}
	if len(removed) > 0 {
		r.env.logger.Info("retention removed cold segments", "partition", p.name(), "segments", len(removed), "log_start", cut)
	}
	r.env.invalidate(p)
	if _, err := p.log.DeleteSegmentsBefore(min(cut, p.log.HighWatermark())); err != nil {
		return err
	}
	p.publishTier(c.Head())
	return nil
}

// collectOrphans deletes, once every orphan grace, the partition's
// objects no manifest names.
func (r *tierRound) collectOrphans(ctx context.Context) error {
	p := r.p
	if r.now.Sub(p.work.lastSweep) < r.env.orphanGrace {
		return nil
	}
	deleted, err := tiering.CollectOrphans(ctx, r.c, r.env.orphanGrace, r.now)
	if err != nil {
		return err
	}
	if len(deleted) > 0 {
		r.env.logger.Info("deleted orphaned objects", "partition", p.name(), "objects", len(deleted))
	}
	p.work.lastSweep = r.now
	return nil
}

// ensureTier makes sure, once per leader epoch, that a tiered partition's
// leader has taken the manifest over and that its local log continues
// where the cold tier ends, before the partition serves: a deposed leader
// must not commit to the cold tier once this one serves, a consumer asking
// for the earliest offset must not miss the cold history, and a producer
// must not reuse offsets the cold tier holds.
func (b *Broker) ensureTier(ctx context.Context, p *partition) error {
	if !p.remote(b) || b.cold == nil {
		return nil
	}
	return p.alignTier(ctx, b.tierEnv())
}

// alignTier is ensureTier's work on a tiered partition: the takeover of
// the cold tier, once per leader epoch.
func (p *partition) alignTier(ctx context.Context, env tierEnv) error {
	if p.work.aligned.Load() == p.view.Load().LeaderEpoch {
		return nil
	}
	if _, err := p.takeOverTier(ctx, env); err != nil {
		return refuse(ReasonLeaderNotAvailable, err, "%s: taking over its cold tier: %v", p.name(), err)
	}
	return nil
}

// takeOverTier returns the leader's committer for its current epoch,
// creating it the first time in an epoch: a fencing write of the manifest
// from a fresh read (tiering.NewCommitter), then alignment of the local
// log with what the cold tier holds.
func (p *partition) takeOverTier(ctx context.Context, env tierEnv) (*tiering.Committer, error) {
	w := &p.work
	w.mu.Lock()
	defer w.mu.Unlock()
	epoch, ok := p.leading()
	if !ok {
		return nil, fmt.Errorf("%w: %s: this replica does not lead it (yet)", tiering.ErrFenced, p.name())
	}
	if w.committer != nil && w.committer.Epoch() == epoch && w.aligned.Load() == epoch {
		return w.committer, nil
	}
	c, err := tiering.NewCommitter(ctx, env.store, p.ref(), epoch)
	if err != nil {
		return nil, err
	}
	// This leader starts looking at what is acknowledged now: what its
	// predecessors acknowledged counts from here.
	p.commits.reset()
	p.commits.observe(p.log.HighWatermark(), p.now())
	env.invalidate(p)
	if err := p.align(ctx, c, env.logger); err != nil {
		return nil, err
	}
	w.committer, w.lastSweep = c, time.Time{}
	p.publishTier(c.Head())
	w.aligned.Store(epoch)
	return c, nil
}

// align makes a new leader's local log continue the cold tier it just took
// over. Where the two hold the same offsets, their leader-epoch lineages
// must agree: the cold tier holds only committed records, so a local
// suffix that parts from it was never committed (it can only come from an
// unclean election) and is cut. When the local log then lies wholly below
// the cold tier's end (a restored topic, a leader that lost its disk, or
// that cut), it starts again there.
func (p *partition) align(ctx context.Context, c *tiering.Committer, logger *slog.Logger) error {
	h := c.Head()
	if h.Empty() {
		return nil
	}
	diverged, err := c.FirstDivergence(ctx, p.log.Epochs(), p.log.LogStartOffset(), p.log.LogEndOffset())
	if err != nil {
		return err
	}
	if err := p.alignLog(c.Epoch(), h, diverged, logger); err != nil {
		return err
	}
	// Producer state the local log cannot give (it was reset, or its
	// snapshots are partial) comes from the cold tier, outside the replica
	// lock as it reads the bucket. Nothing is served before this returns:
	// the partition is not aligned yet.
	return p.coldProducerState(ctx, c.Store(), h, logger)
}

// alignLog is align's change of the local log, under the replica lock so
// that it happens in the leader epoch it was decided for: it cuts the
// local log where it parts from the cold tier (diverged, -1 where it does
// not) and starts it again at the cold tier's end when it lies wholly
// below it.
func (p *partition) alignLog(epoch int32, h *tiering.Head, diverged int64, logger *slog.Logger) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.mu.rs.leading() || p.mu.rs.info.LeaderEpoch != epoch {
		return fmt.Errorf("%w: %s: leadership moved while taking over the cold tier", tiering.ErrFenced, p.name())
	}
	if diverged >= 0 {
		logger.Error("the local log parts from the cold tier's committed history; cutting it there",
			"partition", p.name(), "offset", diverged, "log_end", p.log.LogEndOffset(), "cold_end", h.EndOffset())
		if _, err := p.log.TruncateTo(max(diverged, p.log.LogStartOffset())); err != nil {
			return err
		}
		p.producers.reset()
	}
	if end := h.EndOffset(); end > p.log.LogEndOffset() {
		logger.Info("local log starts where the cold tier ends", "partition", p.name(), "offset", end)
		err := p.log.ResetTo(end)
		p.producers.reset()
		if err != nil {
			return err
		}
		// A leader's epoch is in its log's history from the start.
		if err := p.log.BeginEpoch(epoch); err != nil {
			return err
		}
	}
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
func (p *partition) publishTier(h *tiering.Head) {
	st := *p.tier.Load()
	st.loaded = true
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
// end) once local retention says they may go; never above the high
// watermark, which local retention does not move.
func (p *partition) trimLocal(h *tiering.Head, cfg *config.Topic, now time.Time) error {
	if h == nil || h.Empty() {
		return nil
	}
	limit := min(h.EndOffset(), p.log.HighWatermark())
	cut := localCut(p.log.Segments(), limit, cfg.LocalRetentionMs, cfg.LocalRetentionBytes, now)
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
func (p *partition) localRetention(logger *slog.Logger) {
	if !p.log.Sealed() {
		return // only sealed segments go, and most idle logs have none
	}
	cfg := p.cfg.Load()
	if !cfg.Deletes() {
		return // cleanup.policy compact: every key's last record stays, however old
	}
	cut := localCut(p.log.Segments(), p.log.HighWatermark(), cfg.RetentionMs, cfg.RetentionBytes, p.now())
	if cut > p.log.LogStartOffset() {
		// The producer snapshot at the new start first: rebuilt without it,
		// the state would miss the producers that last wrote below it.
		// (Uploads write a tiered topic's snapshots before its segments can
		// go.)
		if _, err := p.producers.files(p.log).ensureAt(cut); err != nil {
			logger.Warn("retention waits for the producer snapshot at the new log start", "partition", p.name(), "offset", cut, "err", err)
			return
		}
		if _, err := p.log.DeleteSegmentsBefore(cut); err != nil {
			logger.Warn("retention failed", "partition", p.name(), "err", err)
		}
	}
}

// followerRetention lets a follower of a tiered topic drop local segments
// its leader has uploaded, by the same local retention rules.
func (b *Broker) followerRetention(ctx context.Context, p *partition) {
	if b.cold == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	h, err := b.cold.Head(ctx, p.ref())
	if err != nil {
		return // describe keeps saying loading (or the figures last read)
	}
	p.publishTier(h) // nil: the bucket holds no cold tier for it (yet)
	if h == nil {
		return
	}
	if err := p.trimLocal(h, p.cfg.Load(), time.Now()); err != nil {
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
