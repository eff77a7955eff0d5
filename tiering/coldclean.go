package tiering

// The cold cleaner compacts a compacted topic's cold tier in the bucket, so
// that its bytes follow the partition's live keys, not its history. The
// partition's leader runs it through its Committer:
//
//   - The cleanable range is the cold tier's segments from its start up to
//     the first whose newest record is younger than min.compaction.lag.ms.
//     Its dirty part starts at the head's CleanedTo. A cleaning starts when
//     dirty bytes / range bytes reach min.cleanable.dirty.ratio (Kafka's
//     dirty ratio, from the manifest alone: no object is read to decide),
//     or when a dirty segment holds a record older than
//     max.compaction.lag.ms.
//   - A pass reads the dirty objects one at a time and builds a key map
//     (package compact, bounded by its budget and by MaxDirtyBytes) up to
//     mapEnd. It then reads every object of the range that starts below
//     mapEnd once, to learn which lose a record (a key the map supersedes,
//     a tombstone below the horizon) and the producers' last batches, and
//     streams only the runs of objects that lose records through
//     compact's Rewrite into new objects in the upload's format; the
//     others, already clean and losing nothing, stay as they are (Kafka's
//     cleaner rewrites its whole clean section every pass). Each new
//     object ends where an old one ended (at most TargetObjectBytes of log
//     bytes when the old boundaries allow) and carries that old object's
//     producer snapshot, so what an object promises about producers stays
//     true.
//   - Every object read and every byte written goes through the pass's
//     Throttle (the broker's tiering.cold_cleaner_io_max_bytes_per_second).
//   - One conditional write of the head (Committer.replace) swaps the old
//     segments for the new ones, records mapEnd as CleanedTo and lists the
//     replaced objects (segments, and the closed parts from the first one
//     listing a replaced segment on) as Retired. It is fenced like
//     every commit: a deposed leader's fails. Until it lands the old head is
//     complete; the new objects of a cleaning that never committed are
//     orphans, which CollectOrphans removes after its grace.
//   - Tombstones follow Kafka's rule: readable for delete.retention.ms
//     after a cleaning first covered them. The head keeps the recent
//     passes (where each ended, when), and a pass removes the tombstones
//     below the end of the latest pass at least delete.retention.ms old.
//   - Retired objects are deleted by CollectRetired once their grace has
//     passed, so a reader that loaded the older head finishes its reads.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strata-log/strata/compact"
	"github.com/strata-log/strata/record"
)

// DefaultRetiredGrace is how long a replaced object stays readable.
const DefaultRetiredGrace = 5 * time.Minute

// ColdCleanOptions are a cold cleaning's settings.
type ColdCleanOptions struct {
	// Options: the clock, the key map's budget and min.compaction.lag.ms.
	// Its TombstoneHorizon is not read: CleanCold computes it from the
	// head's passes and DeleteRetentionMs.
	compact.Options
	// DeleteRetentionMs is delete.retention.ms (< 0: keep tombstones).
	DeleteRetentionMs int64
	// MinDirtyRatio is min.cleanable.dirty.ratio.
	MinDirtyRatio float64
	// MaxCompactionLagMs is max.compaction.lag.ms (<= 0: none): a dirty
	// segment holding a record older than it is cleaned whatever the
	// ratio.
	MaxCompactionLagMs int64
	// TargetObjectBytes: new objects gather old ones until their log bytes
	// reach it. <= 0 means 64 MiB.
	TargetObjectBytes int64
	// MaxDirtyBytes bounds a pass's work: its key map covers at most this
	// many bytes of dirty objects (at least one object; <= 0: no bound
	// but the key map's). A later pass goes on where it stopped.
	MaxDirtyBytes int64
	// MaxScanBytes bounds the objects a pass filters (reads, and rewrites
	// where they lose records): at least one, at most this many bytes of
	// them (<= 0: the whole range). A pass that stops short records where
	// (Head.CleanScan) and the next, with the same key map, goes on there.
	MaxScanBytes int64
	// Throttle, when not nil, paces every object read and written.
	Throttle *Throttle
}

// ColdCleanResult says what a cleaning pass did.
type ColdCleanResult struct {
	Cleaned  bool
	Ratio    float64      // the dirty ratio that decided
	Replaced []SegmentRef // old segments, now retired
	Written  []SegmentRef // their replacements
	Stats    compact.Stats
	BytesIn  int64 // object bytes replaced
	BytesOut int64 // object bytes written
	// CleanedTo is the head's CleanedTo after the pass.
	CleanedTo int64
	// Partial: the pass filtered only part of its range (MaxScanBytes) and
	// recorded where it stopped (Head.CleanScan); the next goes on.
	Partial bool
}

// CleanCold runs one cleaning pass over the cold tier c commits to, if its
// dirty ratio calls for one. Call it again while it reports Cleaned to
// clean a dirty range larger than one key map. A pass that fails before
// its commit leaves the manifest as it was (its new objects are deleted,
// or left to CollectOrphans); ErrFenced means c's leader was deposed.
func CleanCold(ctx context.Context, c *Committer, opts ColdCleanOptions) (ColdCleanResult, error) {
	var res ColdCleanResult
	if err := c.settle(ctx); err != nil {
		return res, err
	}
	if opts.TargetObjectBytes <= 0 {
		opts.TargetObjectBytes = 64 << 20
	}
	var segs []SegmentRef
	cutoff := opts.NowMs - opts.MinCompactionLagMs
	if err := c.Segments(ctx, func(s SegmentRef) bool {
		if s.MaxTs > cutoff {
			return false // too young: the range ends here
		}
		segs = append(segs, s)
		return true
	}); err != nil {
		return res, err
	}
	res.CleanedTo = c.Head().CleanedTo
	if len(segs) == 0 {
		return res, nil
	}
	var total, dirty int64
	overdue := false
	for _, s := range segs {
		total += s.Size
		if s.LastOffset >= res.CleanedTo {
			dirty += s.Size
			overdue = overdue || opts.MaxCompactionLagMs > 0 && s.MinTs >= 0 && s.MinTs <= opts.NowMs-opts.MaxCompactionLagMs
		}
	}
	res.Ratio = float64(dirty) / float64(total)
	rangeEnd := segs[len(segs)-1].LastOffset + 1
	scan := c.Head().CleanScan
	if scan != nil && scan.End > rangeEnd {
		scan = nil // the cleanable range shrank under it (settings changed): start over
	}
	if scan == nil && (dirty == 0 || res.Ratio < opts.MinDirtyRatio && !overdue) {
		return res, nil
	}
	from := max(res.CleanedTo, segs[0].BaseOffset)
	dirtySegs := segs[slices.IndexFunc(segs, func(s SegmentRef) bool { return s.LastOffset >= from }):]
	if scan != nil {
		// Go on with the scan under way: the same key map, to its end.
		rangeEnd = scan.End
		dirtySegs = dirtySegs[:slices.IndexFunc(append(dirtySegs, SegmentRef{BaseOffset: rangeEnd}), func(s SegmentRef) bool { return s.BaseOffset >= rangeEnd })]
	} else if opts.MaxDirtyBytes > 0 {
		// Bound the pass: the key map covers at most this many dirty
		// bytes (at least one object), the next pass goes on from there.
		n, size := 1, dirtySegs[0].Size
		for n < len(dirtySegs) && size+dirtySegs[n].Size <= opts.MaxDirtyBytes {
			size += dirtySegs[n].Size
			n++
		}
		dirtySegs = dirtySegs[:n]
		rangeEnd = dirtySegs[n-1].LastOffset + 1
	}
	m, mapEnd, err := compact.Build(objectsSource(ctx, c.store, opts.Throttle, dirtySegs, nil), from, rangeEnd, opts.KeyMapBytes, opts.MaxDecompressed)
	if err != nil {
		return res, err
	}
	// Every segment holding an offset below mapEnd may lose records; the
	// filter leaves the batches at or past mapEnd as they are.
	old := segs[:slices.IndexFunc(append(segs, SegmentRef{BaseOffset: rangeEnd}), func(s SegmentRef) bool { return s.BaseOffset >= mapEnd })]
	// This round filters the window [lo, hi) of old: from where a scan
	// under way stopped, at most MaxScanBytes of objects (at least one).
	lo := 0
	if scan != nil && scan.End == mapEnd {
		lo = slices.IndexFunc(old, func(s SegmentRef) bool { return s.LastOffset >= scan.Next })
		if lo < 0 {
			lo = len(old) - 1 // defensive: Next < End holds, so some object reaches it
		}
	}
	hi := len(old)
	if opts.MaxScanBytes > 0 {
		hi = lo + 1
		for size := old[lo].Size; hi < len(old) && size+old[hi].Size <= opts.MaxScanBytes; hi++ {
			size += old[hi].Size
		}
	}
	window := old[lo:hi]
	rules := opts.Rules
	rules.TombstoneHorizon = c.Head().TombstoneHorizon(opts.NowMs, opts.DeleteRetentionMs)
	f := &compact.Filter{Map: m, MapEnd: mapEnd, Rules: rules}
	loses, producers, err := scanObjects(ctx, c, opts.Throttle, window, f)
	if err != nil {
		return res, err
	}
	// A producer's last batch in the window keeps its header even when
	// emptied (the producer may have none after it): conservative, as the
	// range past the window and the hot tier may hold later ones.
	f.ProducerLast = producers
	// Only runs of objects that lose records are rewritten; the others,
	// already clean and holding no key the map supersedes and no tombstone
	// past the horizon, stay as they are (Kafka rewrites its whole clean
	// section on every pass).
	var next, written, replaced []SegmentRef
	for i := 0; i < len(window); {
		if !loses[i] {
			next = append(next, window[i])
			i++
			continue
		}
		j := i
		for j < len(window) && loses[j] {
			j++
		}
		var w []SegmentRef
		var st compact.Stats
		w, st, err = rewriteObjects(ctx, c, opts.Throttle, window[i:j], f, opts.TargetObjectBytes)
		res.Stats.Add(st)
		if err != nil {
			break
		}
		replaced = append(replaced, window[i:j]...)
		written = append(written, w...)
		next = append(next, w...)
		i = j
	}
	done := hi == len(old)
	if err == nil {
		err = c.replace(ctx, window, next, mapEnd, done, time.UnixMilli(opts.NowMs))
	}
	if err != nil {
		if !errors.Is(err, ErrOutcomeUnknown) {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
			for _, s := range written {
				c.store.Delete(dctx, s.Key) // never named; a failure is the orphan sweep's
			}
			cancel()
		}
		return res, err
	}
	res.Cleaned, res.Replaced, res.Written, res.Partial = true, replaced, written, !done
	if done {
		res.CleanedTo = mapEnd
	}
	for _, s := range replaced {
		res.BytesIn += s.Size
	}
	for _, s := range written {
		res.BytesOut += s.Size
	}
	return res, nil
}

// scanObjects reads old once, one object at a time, and returns which of
// them lose a record under f and the last offset of each producer's last
// batch in them.
func scanObjects(ctx context.Context, c *Committer, th *Throttle, old []SegmentRef, f *compact.Filter) (loses []bool, producers map[int64]int64, err error) {
	loses = make([]bool, len(old))
	producers = map[int64]int64{}
	for i, s := range old {
		o, err := readThrottled(ctx, c.store, th, s)
		if err != nil {
			return nil, nil, err
		}
		for b, err := range o.batches {
			if err != nil {
				return nil, nil, err
			}
			if pid := b.ProducerID(); pid != record.NoProducerID {
				producers[pid] = max(producers[pid], b.LastOffset())
			}
			if !loses[i] {
				if loses[i], err = f.Loses(b); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	return loses, producers, nil
}

// rewriteObjects streams old through f into new objects, each ending
// where one of old ends, and returns their references. On error the
// objects already written are deleted.
func rewriteObjects(ctx context.Context, c *Committer, th *Throttle, old []SegmentRef, f *compact.Filter, target int64) (written []SegmentRef, st compact.Stats, err error) {
	// Producer snapshots of old objects read but not yet passed by the
	// output, by their last offset.
	snapshots := map[int64][]byte{}
	ends := map[int64]bool{}
	var history []EpochStart
	for _, s := range old {
		ends[s.LastOffset] = true
		for _, e := range s.Epochs {
			if n := len(history); n == 0 || history[n-1].Epoch != e.Epoch {
				history = append(history, e)
			}
		}
	}
	var out *objectWriter
	var w interface {
		Write([]byte) (int, error)
		Close() error
		Abort() error
	}
	var key string
	defer func() {
		if err != nil {
			if w != nil {
				w.Abort()
			}
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
			for _, s := range written {
				c.store.Delete(dctx, s.Key)
			}
			cancel()
			written = nil
		}
	}()
	emit := func(b record.Batch) error {
		if out == nil {
			key = c.ref.newSegmentKey(b.BaseOffset(), c.epoch)
			ow, err := c.store.Create(ctx, key)
			if err != nil {
				return fmt.Errorf("tiering: upload %s: %w", key, err)
			}
			w, out = ow, newObjectWriter(ow)
		}
		if err := th.Wait(ctx, int64(len(b))); err != nil {
			return err
		}
		if err := out.add(b); err != nil {
			return err
		}
		last := b.LastOffset()
		if !ends[last] || out.logLen() < target && last != old[len(old)-1].LastOffset {
			return nil
		}
		t, err := out.finish(snapshots[last])
		if err == nil {
			err = th.Wait(ctx, t.ObjectSize()-t.LogLen) // the footer
		}
		if err == nil {
			err = w.Close()
		}
		if err != nil {
			return fmt.Errorf("tiering: upload %s: %w", key, err)
		}
		written = append(written, SegmentRef{
			Key: key, BaseOffset: t.BaseOffset, LastOffset: t.LastOffset,
			MinTs: t.MinTs, MaxTs: t.MaxTs, Size: t.ObjectSize(), LogLen: t.LogLen,
			Epoch: c.epoch, LogCRC: t.LogCRC, Epochs: EpochsIn(history, t.BaseOffset, t.LastOffset),
		})
		for off := range snapshots {
			if off <= last {
				delete(snapshots, off)
			}
		}
		out, w = nil, nil
		return nil
	}
	src := objectsSource(ctx, c.store, th, old, func(o *wholeObject) {
		if o.producers != nil {
			snapshots[o.ref.LastOffset] = o.producers
		}
	})
	st, err = f.Rewrite(src, emit)
	if err == nil && out != nil {
		err = fmt.Errorf("tiering: cleaned batches end at %d, not where the cleaned range does", out.next-1)
	}
	return written, st, err
}

// replace commits next in place of old, a run of the segments the head
// lists; next covers the same offsets, keeping some of old's objects and
// naming new ones in place of the others, and old's objects that next
// drops are retired. Closed parts listing only segments before the first
// one replaced stay as they are; the later ones are written anew (parts
// are immutable, and their numbers grow in the order they list segments)
// and retired. done says the pass reached mapEnd: CleanedTo moves there
// and the pass is recorded; otherwise the scan under way records where
// it stopped.
func (c *Committer) replace(ctx context.Context, old, next []SegmentRef, mapEnd int64, done bool, now time.Time) error {
	if len(old) == 0 || len(next) == 0 || next[0].BaseOffset != old[0].BaseOffset || next[len(next)-1].LastOffset != old[len(old)-1].LastOffset {
		return fmt.Errorf("tiering: a cleaning must replace a range with objects covering the same offsets")
	}
	// first is the index in old of the first segment next changes.
	first := 0
	for first < len(old) && first < len(next) && old[first].Key == next[first].Key {
		first++
	}
	changed := first < len(old) || first < len(next)
	kept := make(map[string]bool, len(next))
	for _, s := range next {
		kept[s.Key] = true
	}
	return c.commit(ctx, func(h *Head) error {
		var all []SegmentRef
		if err := forEachSegment(ctx, h, c.part, func(s SegmentRef) bool { all = append(all, s); return true }); err != nil {
			return err
		}
		at := slices.IndexFunc(all, func(s SegmentRef) bool { return s.Key == old[0].Key })
		if at < 0 || !hasKeys(all[at:], old) {
			if changed {
				if at = slices.IndexFunc(all, func(s SegmentRef) bool { return s.Key == next[0].Key }); at >= 0 && hasKeys(all[at:], next) {
					return errAlreadyCommitted // an earlier attempt landed; its answer was lost
				}
			}
			return fmt.Errorf("tiering: the cold tier of %s changed under its cleaner", c.ref.dir())
		}
		now := now.UnixMilli()
		if changed {
			for _, s := range old {
				if !kept[s.Key] {
					h.Retired = append(h.Retired, RetiredObject{Key: s.Key, At: now})
				}
			}
			// Keep the closed parts wholly before the first change.
			keepParts, listed := 0, 0
			for _, p := range h.Parts {
				live := p.Count - p.Skip
				if listed+live > at+first {
					break
				}
				keepParts++
				listed += live
			}
			for _, p := range h.Parts[keepParts:] {
				h.Retired = append(h.Retired, RetiredObject{Key: p.Key, At: now})
			}
			after := slices.Concat(all[:at], next, all[at+len(old):])
			rest := after[listed:]
			h.Parts = h.Parts[:keepParts]
			for len(rest) >= partSegments {
				if err := c.closePart(ctx, h, rest[:partSegments]); err != nil {
					return err
				}
				rest = rest[partSegments:]
			}
			h.Tail = rest
		}
		if !done {
			h.CleanScan = &CleanScan{End: mapEnd, Next: old[len(old)-1].LastOffset + 1}
			return nil
		}
		h.CleanScan = nil
		h.CleanedTo = max(h.CleanedTo, mapEnd)
		h.CleanPasses = append(h.CleanPasses, CleanPass{End: mapEnd, At: now})
		if n := len(h.CleanPasses); n > maxCleanPasses {
			h.CleanPasses = h.CleanPasses[n-maxCleanPasses:]
		}
		return nil
	})
}

// hasKeys reports whether all begins with segments of the keys of prefix.
func hasKeys(all, prefix []SegmentRef) bool {
	if len(all) < len(prefix) {
		return false
	}
	for i, s := range prefix {
		if all[i].Key != s.Key {
			return false
		}
	}
	return true
}

// CollectRetired deletes the objects a cleaning retired once grace has
// passed since, committing first that the head no longer lists them (a
// delete that then fails leaves an orphan for CollectOrphans). It returns
// the keys it deleted.
func CollectRetired(ctx context.Context, c *Committer, grace time.Duration, now time.Time) ([]string, error) {
	var due []string
	err := c.commit(ctx, func(h *Head) error {
		due = nil
		keep := h.Retired[:0:0]
		for _, r := range h.Retired {
			if now.Sub(time.UnixMilli(r.At)) >= grace {
				due = append(due, r.Key)
			} else {
				keep = append(keep, r)
			}
		}
		if len(due) == 0 {
			return errAlreadyCommitted
		}
		h.Retired = keep
		return nil
	})
	if err != nil {
		return nil, err
	}
	var deleted []string
	for _, key := range due {
		if err := c.store.Delete(ctx, key); err == nil {
			deleted = append(deleted, key)
		}
	}
	return deleted, nil
}
