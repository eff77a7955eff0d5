package broker

// The cold cleaner: a compacted topic's leader compacts the partition's
// cold tier in the bucket (tiering.CleanCold) from its tiering pass, at
// most once per cleaner.backoff, with the key map budget of the hot
// cleaner (cleaner.dedupe_buffer_size), its reads and writes of objects
// paced by tiering.cold_cleaner_io_max_bytes_per_second across the broker. A pass reads the manifest alone to
// decide (the dirty ratio of the cold tier past its CleanedTo against
// min.cleanable.dirty.ratio, or a dirty record past max.compaction.lag.ms)
// and commits under the leader's epoch like any other change of the
// manifest, so a deposed leader's cleaning is refused. The objects it
// replaced are deleted once tiering.retired_grace has passed
// (tiering.CollectRetired), whatever the topic's policy is by then.

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/compact"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/tiering"
)

// coldCleanEnv is the broker's settings for the cold cleaner.
type coldCleanEnv struct {
	retiredGrace time.Duration
	keyMapBytes  int
	interval     time.Duration
	// throttle paces the cold cleaner's reads and writes of objects at
	// rate bytes per second (nil or 0: not paced).
	throttle *tiering.Throttle
	rate     int64
}

// coldPassSeconds bounds a pass: its key map covers at most this many
// seconds' worth of dirty bytes at the cold cleaner's rate, and it filters
// at most as many bytes of objects, so that one pass holds its partition's
// tiering round (uploads, retention) for a bounded time; the next round
// goes on where it stopped (CleanedTo, or the manifest's CleanScan).
const coldPassSeconds = 10

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

// coldCleanerStats are the cold cleaner's counters, reported as
// strata_cold_cleaner_*: with the process's CPU they give its MB/s and CPU
// per GB, and a test can tell a pass has run.
type coldCleanerStats struct {
	passes   atomic.Int64 // passes that committed a cleaning
	failures atomic.Int64 // passes that failed (the manifest left as it was)
	bytesIn  atomic.Int64 // object bytes replaced
	bytesOut atomic.Int64 // object bytes written in their place
	retired  atomic.Int64 // replaced objects deleted after their grace
	nanos    atomic.Int64 // time in passes that committed or failed
}

func (s *coldCleanerStats) write(mw *metricsWriter) {
	mw.counter("strata_cold_cleaner_passes_total", "Cleanings of a compacted partition's cold tier that committed.", s.passes.Load())
	mw.counter("strata_cold_cleaner_failures_total", "Cleanings of a cold tier that failed (the manifest left as it was).", s.failures.Load())
	mw.counter("strata_cold_cleaner_bytes_in_total", "Object bytes the cold cleaner replaced.", s.bytesIn.Load())
	mw.counter("strata_cold_cleaner_bytes_out_total", "Object bytes the cold cleaner wrote in place of those it replaced.", s.bytesOut.Load())
	mw.counter("strata_cold_cleaner_retired_deleted_total", "Objects a cold cleaning replaced, deleted once tiering.retired_grace passed.", s.retired.Load())
	mw.family("strata_cold_cleaner_seconds_total", "counter", "Time the cold cleaner spent in passes that cleaned or failed.")
	mw.sample("strata_cold_cleaner_seconds_total", "", float64(s.nanos.Load())/1e9)
}

// pass counts one pass of the cold cleaner that took d: cleaned, failed,
// or neither (nothing was due).
func (s *coldCleanerStats) pass(res tiering.ColdCleanResult, err error, d time.Duration) {
	if s == nil || (err == nil && !res.Cleaned) {
		return
	}
	s.nanos.Add(int64(d))
	if err != nil {
		s.failures.Add(1)
		return
	}
	s.passes.Add(1)
	s.bytesIn.Add(res.BytesIn)
	s.bytesOut.Add(res.BytesOut)
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
		if len(deleted) > 0 && env.coldCleaner != nil {
			env.coldCleaner.retired.Add(int64(len(deleted)))
		}
		if len(deleted) > 0 {
			env.logger.Info("deleted objects a cold cleaning replaced", "partition", p.name(), "objects", len(deleted))
		}
	}
	// A scan under way (the head's CleanScan) goes on at the next round;
	// a new pass waits for the cleaner's interval.
	if !cfg.Compacted() || c.Head().CleanScan == nil && now.Sub(p.work.lastClean) < e.interval {
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
		MaxDirtyBytes:      e.rate * coldPassSeconds,
		MaxScanBytes:       e.rate * coldPassSeconds,
		Throttle:           e.throttle,
	}
	began := time.Now()
	res, err := tiering.CleanCold(ctx, c, opts)
	env.coldCleaner.pass(res, err, time.Since(began))
	if err != nil {
		return err
	}
	if res.Cleaned {
		env.invalidate(p)
		p.publishTier(c.Head())
		env.logger.Info("cleaned the cold tier", "partition", p.name(), "objects_in", len(res.Replaced), "bytes_in", res.BytesIn,
			"objects_out", len(res.Written), "bytes_out", res.BytesOut, "cleaned_to", res.CleanedTo, "dirty_ratio", res.Ratio)
	}
	return nil
}
