package broker

// The log cleaner compacts the local logs of topics whose cleanup.policy
// includes compact, as Kafka's does:
//
//   - cleanerLoop, one goroutine per broker (goLoop, ended with the lifetime), picks
//     the replica whose log is dirtiest: the largest share of dirty bytes
//     (sealed bytes past what it last cleaned) in its cleanable prefix, if
//     that share is at least min.cleanable.dirty.ratio or its oldest dirty
//     record is older than max.compaction.lag.ms. With none, it waits
//     cleaner.backoff.
//   - The cleanable prefix is the sealed, fsynced segments wholly below the
//     high watermark, up to the first whose newest record is younger than
//     min.compaction.lag.ms: never the active segment, never an offset a
//     follower may still truncate.
//   - A cleaning runs passes (package compact): a key map over the dirty
//     range, bounded by cleaner.dedupe_buffer_size, then a rewrite of every
//     segment from the log start to where the map ends (hotlog's
//     RewriteSegments, crash-safe). The offset cleaned to is kept in a side
//     file, so a restart does not clean the same bytes again, with when
//     each pass ended where: tombstones go once delete.retention.ms has
//     passed since a cleaning first covered them (cleaner_state.go).
//   - No tombstone goes at or past the tombstone floor, the lowest log end
//     among the partition's replicas (replicaState.tombstoneFloor; a
//     follower learns it from its leader): a replica that has not copied
//     a tombstone yet must get it, or it keeps the key's older records.
//   - Reads and writes are throttled to cleaner.io_max_bytes_per_second.
//
// Replicas clean on their own, each on its own broker, and still agree on
// every offset they hold: a cleaning removes records and never changes one,
// and which it removes depends only on the records themselves, the topic's
// settings and the clock (tombstones by their age).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/compact"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/record"
)

// cleanerOffsetFile is the side file holding the offset a log is cleaned
// to (Kafka's cleaner-offset-checkpoint, per log).
const cleanerOffsetFile = "cleaner-offset.state"

// cleanerStats are the cleaner's counters, reported as strata_cleaner_*.
type cleanerStats struct {
	bytesCleaned atomic.Int64 // bytes of segments rewritten
	bytesWritten atomic.Int64
	bytesRead    atomic.Int64 // including the key map's reads
	passes       atomic.Int64
	failures     atomic.Int64
	nanos        atomic.Int64
	lastRatio    atomic.Uint64 // float64 bits of the last chosen log's dirty ratio
}

func (s *cleanerStats) write(mw *metricsWriter) {
	mw.counter("strata_cleaner_bytes_cleaned_total", "Bytes of segments the log cleaner rewrote.", s.bytesCleaned.Load())
	mw.counter("strata_cleaner_bytes_written_total", "Bytes the log cleaner wrote in place of what it rewrote.", s.bytesWritten.Load())
	mw.counter("strata_cleaner_bytes_read_total", "Bytes the log cleaner read, its key maps' reads included.", s.bytesRead.Load())
	mw.counter("strata_cleaner_passes_total", "Passes of the log cleaner: one key map and the rewrite it allows.", s.passes.Load())
	mw.counter("strata_cleaner_failures_total", "Cleanings that failed (the log was left as it was).", s.failures.Load())
	mw.family("strata_cleaner_seconds_total", "counter", "Time the log cleaner spent cleaning, throttling included.")
	mw.sample("strata_cleaner_seconds_total", "", float64(s.nanos.Load())/1e9)
	mw.family("strata_cleaner_dirty_ratio", "gauge", "Dirty ratio of the log the cleaner last chose.")
	mw.sample("strata_cleaner_dirty_ratio", "", math.Float64frombits(s.lastRatio.Load()))
}

// cleanable is what a log offers the cleaner now.
type cleanable struct {
	segs      []hotlog.SegmentInfo // the cleanable prefix
	end       int64                // offset after it
	dirty     int64                // first offset not yet cleaned
	ratio     float64              // dirty bytes / bytes of the prefix
	overdue   bool                 // a dirty record passed max.compaction.lag.ms
	eligible  bool
	dirtySize int64
}

// cleanableOf is the pure decision of what of a log may be cleaned and
// whether it should be: segs are the log's segments, hw its high watermark,
// cleanedTo the offset a previous cleaning reached.
func cleanableOf(segs []hotlog.SegmentInfo, hw, cleanedTo int64, cfg *config.Topic, nowMs int64) cleanable {
	var c cleanable
	for i, s := range segs {
		if i == len(segs)-1 || !s.Sealed || s.LastOffset >= hw || (cfg.MinCompactionLagMs > 0 && s.MaxTimestamp > nowMs-cfg.MinCompactionLagMs) {
			break
		}
		c.segs = append(c.segs, s)
	}
	if len(c.segs) == 0 {
		return c
	}
	c.end = c.segs[len(c.segs)-1].LastOffset + 1
	c.dirty = max(cleanedTo, c.segs[0].BaseOffset)
	var total int64
	for _, s := range c.segs {
		total += s.Size
		if s.LastOffset >= c.dirty {
			c.dirtySize += s.Size
			if cfg.MaxCompactionLagMs >= 0 && s.MinTimestamp >= 0 && s.MinTimestamp <= nowMs-cfg.MaxCompactionLagMs {
				c.overdue = true
			}
		}
	}
	if total > 0 {
		c.ratio = float64(c.dirtySize) / float64(total)
	}
	c.eligible = c.dirty < c.end && (c.ratio >= cfg.MinCleanableDirtyRatio || c.overdue)
	return c
}

// cleanerLoop is the broker's log cleaner (see the top of the file).
func (b *Broker) cleanerLoop(ctx context.Context) {
	throttle := newIOThrottle(int64(b.cfg.Cleaner.IOMaxBytesPerSecond), ctx.Done())
	backoff := time.Duration(b.cfg.Cleaner.Backoff)
	if backoff <= 0 { // settings built without the defaults
		backoff = time.Duration(config.DefaultBroker().Cleaner.Backoff)
	}
	for {
		p, c := b.dirtiestLog()
		if p == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			continue
		}
		b.metrics.cleaner.lastRatio.Store(math.Float64bits(c.ratio))
		start := time.Now()
		err := b.cleanLog(p, c, throttle, start.UnixMilli())
		b.metrics.cleaner.nanos.Add(int64(time.Since(start)))
		if err != nil {
			if errors.Is(err, errStopped) {
				return
			}
			b.metrics.cleaner.failures.Add(1)
			b.log.Warn("log cleaning failed; the log stays as it was", "partition", p.name(), "err", err)
			select { // not straight back to the same failure
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
		}
	}
}

// dirtiestLog returns the compacted replica most in need of cleaning, or
// nil.
func (b *Broker) dirtiestLog() (*partition, cleanable) {
	var best *partition
	var bestC cleanable
	nowMs := time.Now().UnixMilli()
	for _, p := range b.partitions() {
		c := b.cleanableAt(p, nowMs)
		if c.eligible && (best == nil || c.ratio > bestC.ratio) {
			best, bestC = p, c
		}
	}
	return best, bestC
}

// cleanableAt is what p's log offers the cleaner at nowMs (ms since the
// epoch); not eligible when the topic is not compacted, the log closed, or
// hotCleanLimit allows nothing.
func (b *Broker) cleanableAt(p *partition, nowMs int64) cleanable {
	cfg := p.cfg.Load()
	if !cfg.Compacted() || !p.log.Sealed() {
		return cleanable{}
	}
	limit, ok := p.hotCleanLimit(b)
	if !ok {
		return cleanable{}
	}
	return cleanableOf(p.log.Segments(), limit, p.cleanerState().cleanedTo, cfg, nowMs)
}

// hotCleanLimit is the offset below which the cleaner may rewrite p's
// local log: the high watermark, and for a partition with a cold tier also
// the cold tier's end as this replica last saw it, so that every segment
// it rewrites is one the cold tier holds already (the cold cleaner compacts
// those in the bucket). Batches an upload has yet to read are never
// rewritten, so an upload that starts at the cold tier's end never finds
// that offset inside a filler the cleaner joined across it. A tiered
// partition whose cold tier this replica has not seen is not cleaned.
func (p *partition) hotCleanLimit(b *Broker) (int64, bool) {
	hw := p.log.HighWatermark()
	if !p.remote(b) {
		return hw, true
	}
	st := p.tier.Load()
	if !st.loaded || st.coldEnd < 0 {
		return 0, false
	}
	return min(hw, st.coldEnd), true
}

// cleanerState reads the replica's cleaner side file; none, or one that
// cannot be read, is an empty state (see cleanerState).
func (p *partition) cleanerState() cleanerState {
	data, ok, err := p.log.ReadSideFile(cleanerOffsetFile)
	if err != nil || !ok {
		return cleanerState{}
	}
	s, err := parseCleanerState(data)
	if err != nil {
		return cleanerState{}
	}
	return s
}

// cleanLog cleans p's log over c in passes until the dirty range is
// covered; nowMs is the time the tombstone horizon counts from.
func (b *Broker) cleanLog(p *partition, c cleanable, throttle *ioThrottle, nowMs int64) error {
	cfg := p.cfg.Load()
	state := p.cleanerState()
	rules := compact.Rules{TombstoneHorizon: min(state.horizon(nowMs, cfg.DeleteRetentionMs), p.tombstoneFloor())}
	budget := int(b.cfg.Cleaner.DedupeBufferSize)
	if budget <= 0 { // settings built without the defaults
		budget = int(config.DefaultBroker().Cleaner.DedupeBufferSize)
	}
	for dirty := c.dirty; dirty < c.end; {
		// The key map reads only the dirty segments: Build skips what
		// ends below dirty, and reading it would cost I/O and throttle.
		src := b.segmentBatches(p.log, segmentsFrom(c.segs, dirty), throttle)
		m, mapEnd, err := compact.Build(src, dirty, c.end, budget, rules.MaxDecompressed)
		if err != nil {
			return err
		}
		var bases []int64
		var cleaned []hotlog.SegmentInfo
		for _, s := range c.segs {
			if s.BaseOffset < mapEnd {
				bases = append(bases, s.BaseOffset)
				cleaned = append(cleaned, s)
			}
		}
		producers, err := compact.ProducerLasts(b.segmentBatches(p.log, cleaned, throttle))
		if err != nil {
			return err
		}
		f := compact.Filter{Map: m, MapEnd: mapEnd, Rules: rules, ProducerLast: producers}
		res, err := p.log.RewriteSegments(bases, func(_ hotlog.SegmentInfo, batches hotlog.Batches, emit func(record.Batch) error) error {
			_, err := f.Rewrite(b.throttledBatches(batches, throttle), func(out record.Batch) error {
				if err := throttle.wait(int64(len(out))); err != nil {
					return err
				}
				return emit(out)
			})
			return err
		})
		if err != nil {
			return err
		}
		b.metrics.cleaner.passes.Add(1)
		b.metrics.cleaner.bytesCleaned.Add(res.BytesIn)
		b.metrics.cleaner.bytesWritten.Add(res.BytesOut)
		state.record(mapEnd, nowMs, cfg.DeleteRetentionMs)
		if err := p.log.WriteSideFile(cleanerOffsetFile, state.encode()); err != nil {
			return err
		}
		// The next pass reads the rewritten segments.
		c.segs = refreshSegments(p.log.Segments(), c.segs)
		dirty = mapEnd
	}
	return nil
}

// segmentsFrom returns the segments of segs holding offset from or later.
func segmentsFrom(segs []hotlog.SegmentInfo, from int64) []hotlog.SegmentInfo {
	for i, s := range segs {
		if s.LastOffset >= from {
			return segs[i:]
		}
	}
	return nil
}

// refreshSegments returns the log's current descriptions of the segments
// in prefix (their sizes change when they are rewritten).
func refreshSegments(now, prefix []hotlog.SegmentInfo) []hotlog.SegmentInfo {
	out := make([]hotlog.SegmentInfo, 0, len(prefix))
	for _, s := range now {
		if len(out) < len(prefix) && s.BaseOffset == prefix[len(out)].BaseOffset {
			out = append(out, s)
		}
	}
	return out
}

// segmentBatches yields the batches of segs, read whole through the log
// and throttled.
func (b *Broker) segmentBatches(l *hotlog.Log, segs []hotlog.SegmentInfo, throttle *ioThrottle) compact.Source {
	return func(yield func(record.Batch, error) bool) {
		for _, s := range segs {
			for batch, err := range l.SegmentBatches(s.BaseOffset) {
				if err == nil {
					err = throttle.wait(int64(len(batch)))
				}
				if err != nil {
					yield(nil, fmt.Errorf("segment %d: %w", s.BaseOffset, err))
					return
				}
				b.metrics.cleaner.bytesRead.Add(int64(len(batch)))
				if !yield(batch, nil) {
					return
				}
			}
		}
	}
}

// throttledBatches charges each batch of src to the throttle as it goes.
func (b *Broker) throttledBatches(src hotlog.Batches, throttle *ioThrottle) compact.Source {
	return func(yield func(record.Batch, error) bool) {
		for batch, err := range src {
			if err == nil {
				err = throttle.wait(int64(len(batch)))
				b.metrics.cleaner.bytesRead.Add(int64(len(batch)))
			}
			if !yield(batch, err) || err != nil {
				return
			}
		}
	}
}

// errStopped: the broker is closing; the cleaning was abandoned (a
// rewrite not committed changes nothing).
var errStopped = errors.New("broker: stopping")

// ioThrottle keeps the cleaner's I/O at or under a rate, as Kafka's
// Throttler does: it counts bytes since a window began and, when they run
// ahead of the rate, waits until the rate catches up. Owned by the
// cleaner's goroutine.
type ioThrottle struct {
	rate  int64 // bytes per second; 0: unlimited
	stop  <-chan struct{}
	start time.Time
	bytes int64
}

func newIOThrottle(rate int64, stop <-chan struct{}) *ioThrottle {
	return &ioThrottle{rate: rate, stop: stop, start: time.Now()}
}

// throttleWindow is how long a window counts before starting over, so an
// idle spell does not bank an unbounded burst.
const throttleWindow = time.Second

// wait charges n bytes and returns once they are within the rate, or
// errStopped when the broker stops first.
func (t *ioThrottle) wait(n int64) error {
	select {
	case <-t.stop:
		return errStopped
	default:
	}
	if t.rate <= 0 {
		return nil
	}
	if time.Since(t.start) > throttleWindow {
		t.start, t.bytes = time.Now(), 0
	}
	t.bytes += n
	due := time.Duration(float64(t.bytes) / float64(t.rate) * float64(time.Second))
	if ahead := due - time.Since(t.start); ahead > 0 {
		timer := time.NewTimer(ahead)
		defer timer.Stop()
		select {
		case <-t.stop:
			return errStopped
		case <-timer.C:
		}
	}
	return nil
}
