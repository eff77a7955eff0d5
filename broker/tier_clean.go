package broker

// The cold cleaner: a compacted topic's leader compacts the partition's
// cold tier in the bucket (tiering.CleanCold) from its tiering pass, at
// most once per cleaner.backoff, with the key map budget of the hot
// cleaner (cleaner.dedupe_buffer_size). A pass reads the manifest alone to
// decide (the dirty ratio of the cold tier past its CleanedTo against
// min.cleanable.dirty.ratio, or a dirty record past max.compaction.lag.ms)
// and commits under the leader's epoch like any other change of the
// manifest, so a deposed leader's cleaning is refused. The objects it
// replaced are deleted once tiering.retired_grace has passed
// (tiering.CollectRetired), whatever the topic's policy is by then.

import (
	"context"
	"time"

	"github.com/strata-log/strata/compact"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/tiering"
)

// What the cold cleaner logs when a cleaning committed and when the objects
// earlier cleanings replaced were deleted (the simulation counts them).
const (
	msgColdCleaned    = "cleaned the cold tier"
	msgRetiredDeleted = "deleted objects a cold cleaning replaced"
)

// coldCleanEnv is the broker's settings for the cold cleaner.
type coldCleanEnv struct {
	retiredGrace time.Duration
	keyMapBytes  int
	interval     time.Duration
}

func (e coldCleanEnv) withDefaults() coldCleanEnv {
	d := config.DefaultBroker()
	if e.retiredGrace <= 0 {
		e.retiredGrace = time.Duration(d.Tiering.RetiredGrace)
	}
	if e.keyMapBytes <= 0 {
		e.keyMapBytes = int(d.Cleaner.DedupeBufferSize)
	}
	if e.interval <= 0 {
		e.interval = time.Duration(d.Cleaner.Backoff)
	}
	return e
}

// cleanColdTier is the tiering round's phase of the cold cleaner.
func (r *tierRound) cleanColdTier(ctx context.Context) error {
	return r.p.coldCleanPass(ctx, r.env, r.c, r.cfg, r.now)
}

// coldCleanPass cleans the cold tier of a compacted topic's partition when
// it is due, and deletes the objects earlier cleanings retired once their
// grace has passed.
func (p *partition) coldCleanPass(ctx context.Context, env tierEnv, c *tiering.Committer, cfg *config.Topic, now time.Time) error {
	e := env.clean.withDefaults()
	if len(c.Head().Retired) > 0 {
		deleted, err := tiering.CollectRetired(ctx, c, e.retiredGrace, now)
		if err != nil {
			return err
		}
		if len(deleted) > 0 {
			env.logger.Info(msgRetiredDeleted, "partition", p.name(), "objects", len(deleted))
		}
	}
	if !cfg.Compacted() || now.Sub(p.work.lastClean) < e.interval {
		return nil
	}
	p.work.lastClean = now
	opts := tiering.ColdCleanOptions{
		Options: compact.Options{
			NowMs:              now.UnixMilli(),
			KeyMapBytes:        e.keyMapBytes,
			MinCompactionLagMs: cfg.MinCompactionLagMs,
		},
		DeleteRetentionMs:  cfg.DeleteRetentionMs,
		MinDirtyRatio:      cfg.MinCleanableDirtyRatio,
		MaxCompactionLagMs: cfg.MaxCompactionLagMs,
		TargetObjectBytes:  cfg.SegmentBytes,
	}
	res, err := tiering.CleanCold(ctx, c, opts)
	if err != nil {
		return err
	}
	if res.Cleaned {
		env.invalidate(p)
		p.publishTier(c.Head())
		env.logger.Info(msgColdCleaned, "partition", p.name(), "objects_in", len(res.Replaced), "bytes_in", res.BytesIn,
			"objects_out", len(res.Written), "bytes_out", res.BytesOut, "cleaned_to", res.CleanedTo, "dirty_ratio", res.Ratio)
	}
	return nil
}
