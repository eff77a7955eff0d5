package tiering

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/compact"
	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering/objstore"
)

// losingObjects is the model's answer to which of the cold tier's objects
// a cleaning to the end of h must rewrite: those holding a record that a
// later record of its key supersedes, or a tombstone below horizon.
func losingObjects(t *testing.T, store objstore.Reader, c *Committer, h history, horizon int64) (losing, all []string) {
	t.Helper()
	last := map[string]int64{}
	for _, r := range h {
		last[string(r.Key)] = r.Offset
	}
	var segs []SegmentRef
	if err := c.Segments(testContext(t), func(s SegmentRef) bool { segs = append(segs, s); return true }); err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		all = append(all, s.Key)
		o, err := readWholeObject(testContext(t), store, s)
		if err != nil {
			t.Fatal(err)
		}
		loses := false
		for b, err := range o.batches {
			if err != nil {
				t.Fatal(err)
			}
			recs, err := b.Records()
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				loses = loses || last[string(r.Key)] != r.Offset || r.Value == nil && r.Offset < horizon
			}
		}
		if loses {
			losing = append(losing, s.Key)
		}
	}
	return losing, all
}

// TestColdCleanRewritesOnlyObjectsThatLoseRecords: after a cleaning, a
// pass with nothing new does no GET and no PUT; a pass after a small dirty
// tail (a few keys updated) rewrites exactly the objects the model says
// lose a record (the tail's, the cleaned ones holding those keys, and
// those holding tombstones now past delete.retention.ms), keeps every
// other object, and does one GET of each dirty object (key map), one of
// each object of the range (scan) and one of each rewritten object, and
// one PUT per new object plus the head.
func TestColdCleanRewritesOnlyObjectsThatLoseRecords(t *testing.T) {
	mem := objstore.NewMemory()
	var metrics objstore.Metrics
	store := objstore.WithMetrics(mem, &metrics)
	l := localLog(t, t.TempDir())
	rng := rand.New(rand.NewPCG(27, 3))
	h := writeKeyed(t, l, rng, 3000, 1000, 25, 0.003, 0)
	c := newTestCommitter(t, store, 1)
	uploadAll(t, c, l)
	opts := ColdCleanOptions{
		Options:           compact.Options{NowMs: 10_000, KeyMapBytes: 1 << 20},
		DeleteRetentionMs: 1000,
		TargetObjectBytes: 2 << 10,
	}
	cleanAll(t, c, opts)
	if n := len(namedSegmentKeys(t, c)); n < 5 {
		t.Fatalf("%d objects after the first cleaning: too few for the test", n)
	}

	before := metrics.Snapshot()
	opts.NowMs += 1000
	if res, err := CleanCold(testContext(t), c, opts); err != nil || res.Cleaned {
		t.Fatalf("pass with nothing new: %+v %v", res, err)
	}
	if gets, puts := objectOps(before, metrics.Snapshot()); gets != 0 || puts != 0 {
		t.Fatalf("a pass with nothing new did %d GETs and %d PUTs", gets, puts)
	}

	tail := writeKeyed(t, l, rng, 50, 4, 25, 0, 0)
	h = append(h, tail...)
	cleanedTo := c.Head().CleanedTo
	uploadAll(t, c, l)
	dirty := 0
	c.Segments(testContext(t), func(s SegmentRef) bool {
		if s.LastOffset >= cleanedTo {
			dirty++
		}
		return true
	})
	opts.NowMs = 20_000 // the first cleaning's tombstones are now past delete.retention.ms
	horizon := c.Head().TombstoneHorizon(opts.NowMs, opts.DeleteRetentionMs)
	if horizon != cleanedTo {
		t.Fatalf("tombstone horizon %d, want the first cleaning's end %d", horizon, cleanedTo)
	}
	want, all := losingObjects(t, mem, c, h, horizon)
	if len(want) == 0 || len(want) == len(all) {
		t.Fatalf("%d of %d objects lose records: the test needs some that do and some that do not", len(want), len(all))
	}
	if n := len(h.compacted(cleanedTo, 0)) - len(h.compacted(cleanedTo, horizon)); n == 0 {
		t.Fatal("no tombstone is due: the test needs some")
	}
	before = metrics.Snapshot()
	res, err := CleanCold(testContext(t), c, opts)
	if err != nil || !res.Cleaned || res.CleanedTo != int64(len(h)) {
		t.Fatalf("pass after a dirty tail: %+v %v", res, err)
	}
	var got []string
	for _, s := range res.Replaced {
		got = append(got, s.Key)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("rewrote %v, the model says %v", got, want)
	}
	kept := 0
	for _, k := range namedSegmentKeys(t, c) {
		if slices.Contains(all, k) {
			kept++
		}
	}
	if kept != len(all)-len(want) {
		t.Fatalf("%d of the %d objects that lose nothing are still named", kept, len(all)-len(want))
	}
	gets, puts := objectOps(before, metrics.Snapshot())
	if wantGets := int64(dirty + len(all) + len(want)); gets != wantGets {
		t.Fatalf("%d GETs, want %d (%d dirty, %d scanned, %d rewritten)", gets, wantGets, dirty, len(all), len(want))
	}
	if wantPuts := int64(len(res.Written) + 1); puts != wantPuts {
		t.Fatalf("%d PUTs, want %d (%d new objects and the head)", puts, wantPuts, len(res.Written))
	}
	sameRecords(t, readColdRecords(t, mem), h.compacted(int64(len(h)), horizon))
	rep, err := VerifyBucket(testContext(t), mem, VerifyOptions{Records: true})
	if err != nil {
		t.Fatal(err)
	}
	wantSound(t, rep)

	before = metrics.Snapshot()
	if res, err := CleanCold(testContext(t), c, opts); err != nil || res.Cleaned {
		t.Fatalf("third pass with nothing new: %+v %v", res, err)
	}
	if gets, puts := objectOps(before, metrics.Snapshot()); gets != 0 || puts != 0 {
		t.Fatalf("a pass with nothing new did %d GETs and %d PUTs", gets, puts)
	}
}

// fakeClock is a Throttle's clock that moves only when it sleeps.
type fakeClock struct {
	now    time.Time
	slept  time.Duration
	sleeps int
	// failAfter, when > 0, makes the sleep after that many fail as a
	// cancelled context does.
	failAfter int
}

func (f *fakeClock) throttle(rate int64) *Throttle {
	th := NewThrottle(rate)
	th.now = func() time.Time { return f.now }
	th.sleep = func(_ context.Context, d time.Duration) error {
		f.sleeps++
		if f.failAfter > 0 && f.sleeps > f.failAfter {
			return context.Canceled
		}
		f.now = f.now.Add(d)
		f.slept += d
		return nil
	}
	return th
}

// TestColdCleanThrottleHoldsRate: every byte a cleaning reads and writes
// of segment objects is charged to its Throttle, and on a clock that moves
// only while the Throttle waits, the bytes moved over the time taken are
// the rate (all but the last charge are paid for before the next starts).
func TestColdCleanThrottleHoldsRate(t *testing.T) {
	mem := objstore.NewMemory()
	var metrics objstore.Metrics
	c, h := uploadedKeyed(t, objstore.WithMetrics(mem, &metrics), 9, 3000, 100, 0, 0)
	clock := &fakeClock{now: time.Unix(1000, 0)}
	const rate = 64 << 10
	th := clock.throttle(rate)
	before := metrics.Snapshot()
	opts := ColdCleanOptions{Options: compact.Options{NowMs: 1 << 40, KeyMapBytes: 1 << 20}, Throttle: th}
	if passes, _, _ := cleanAll(t, c, opts); passes != 1 {
		t.Fatalf("%d passes", passes)
	}
	sameRecords(t, readColdRecords(t, mem), h.compacted(int64(len(h)), 0))
	after := metrics.Snapshot()
	moved := after[objstore.OpGet].BytesRead - before[objstore.OpGet].BytesRead +
		after[objstore.OpCreate].BytesWritten - before[objstore.OpCreate].BytesWritten
	if th.Charged() != moved {
		t.Fatalf("charged %d bytes, the cleaning read and wrote %d of objects", th.Charged(), moved)
	}
	// The last charge is the new object's footer or its last batch, well
	// under 4 KiB; every charge before it was waited for.
	paid := float64(clock.slept) / float64(time.Second) * rate
	if paid > float64(moved) || paid < float64(moved-4<<10) || math.IsNaN(paid) {
		t.Fatalf("%d bytes moved in %v at %d B/s: the throttle paid for %.0f", moved, clock.slept, rate, paid)
	}
	t.Logf("%d bytes in %v of throttled time (%.0f B/s, rate %d B/s), %d waits", moved, clock.slept, float64(moved)/clock.slept.Seconds(), rate, clock.sleeps)
}

// TestColdCleanStoppedWhileThrottledCommitsNothing: a cleaning whose wait
// for the throttle is cut short (the broker stopping, the leader's round
// cancelled) fails, leaves the head as it was and deletes what it wrote.
func TestColdCleanStoppedWhileThrottledCommitsNothing(t *testing.T) {
	mem := objstore.NewMemory()
	c, h := uploadedKeyed(t, mem, 11, 3000, 100, 0, 0)
	named := namedKeys(t, c)
	gen := c.Head().Generation
	var objects int
	mem.List(testContext(t), "", func(objstore.ObjectInfo) error { objects++; return nil })
	// Fail once the rewrite is under way: after the key map's and the
	// scan's reads and a few writes.
	clock := &fakeClock{now: time.Unix(1000, 0), failAfter: 2*len(named) + 3}
	opts := ColdCleanOptions{Options: compact.Options{NowMs: 1 << 40, KeyMapBytes: 1 << 20}, TargetObjectBytes: 1, Throttle: clock.throttle(1 << 20)}
	if _, err := CleanCold(testContext(t), c, opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("cleaning stopped while throttled: %v", err)
	}
	if c.Head().Generation != gen || !slices.Equal(namedKeys(t, c), named) {
		t.Fatal("a stopped cleaning changed the head")
	}
	var left int
	mem.List(testContext(t), "", func(objstore.ObjectInfo) error { left++; return nil })
	if left != objects {
		t.Fatalf("%d objects in the bucket after a stopped cleaning, %d before", left, objects)
	}
	sameRecords(t, readColdRecords(t, mem), h)
}

// commitKeys writes one object per key, each one batch of one record at
// the cold tier's end (timestamp at its offset), and commits them all in
// one change of the head, closing parts as uploads do. It returns the
// records written.
func commitKeys(t *testing.T, c *Committer, keys ...[]byte) history {
	t.Helper()
	ctx := testContext(t)
	next := max(c.Head().EndOffset(), 0)
	var h history
	var segs []SegmentRef
	for _, k := range keys {
		r := record.Record{Offset: next, Timestamp: next, Key: k, Value: fmt.Appendf(nil, "value of %d", next)}
		bl := record.NewBuilder(record.DefaultBatchOptions())
		bl.Add(r)
		b, err := bl.Build()
		if err != nil {
			t.Fatal(err)
		}
		b.SetBaseOffset(next)
		var buf bytes.Buffer
		w := newObjectWriter(&buf)
		if err := w.add(b); err != nil {
			t.Fatal(err)
		}
		tr, err := w.finish(nil)
		if err != nil {
			t.Fatal(err)
		}
		key := c.ref.newSegmentKey(next, c.epoch)
		if _, err := c.store.Put(ctx, key, buf.Bytes(), objstore.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		segs = append(segs, SegmentRef{Key: key, BaseOffset: tr.BaseOffset, LastOffset: tr.LastOffset, MinTs: tr.MinTs, MaxTs: tr.MaxTs,
			Size: tr.ObjectSize(), LogLen: tr.LogLen, Epoch: c.epoch, LogCRC: tr.LogCRC})
		h = append(h, r)
		next++
	}
	err := c.commit(ctx, func(hd *Head) error {
		all := append(hd.Tail, segs...)
		for len(all) >= partSegments {
			if err := c.closePart(ctx, hd, all[:partSegments]); err != nil {
				return err
			}
			all = all[partSegments:]
		}
		hd.Tail = all
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestColdCleanKeepsClosedPartsBeforeTheFirstChange: a cold tier of more
// segments than a closed part lists. A pass that loses nothing moves
// CleanedTo and writes no object and no part; a pass whose losses all lie
// past the first closed part keeps that part (same key, not retired); one
// that loses a record in it writes it anew and retires the old.
func TestColdCleanKeepsClosedPartsBeforeTheFirstChange(t *testing.T) {
	mem := objstore.NewMemory()
	var metrics objstore.Metrics
	c := newTestCommitter(t, objstore.WithMetrics(mem, &metrics), 1)
	var keys [][]byte
	for i := range partSegments + 100 {
		keys = append(keys, fmt.Appendf(nil, "key-%06d", i))
	}
	h := commitKeys(t, c, keys...)
	if len(c.Head().Parts) != 1 {
		t.Fatalf("%d closed parts, want 1", len(c.Head().Parts))
	}
	part := c.Head().Parts[0].Key
	clean := ColdCleanOptions{Options: compact.Options{NowMs: 1 << 40, KeyMapBytes: 1 << 20}, TargetObjectBytes: 1}

	pass := func(what string) (ColdCleanResult, int64) {
		t.Helper()
		before := metrics.Snapshot()
		res, err := CleanCold(testContext(t), c, clean)
		if err != nil || !res.Cleaned || res.CleanedTo != int64(len(h)) {
			t.Fatalf("%s: %+v %v", what, res, err)
		}
		_, puts := objectOps(before, metrics.Snapshot())
		return res, puts
	}
	if res, puts := pass("a pass that loses nothing"); len(res.Replaced) != 0 || len(res.Written) != 0 || puts != 1 || c.Head().Parts[0].Key != part {
		t.Fatalf("a pass that loses nothing replaced %d objects with %d and did %d PUTs", len(res.Replaced), len(res.Written), puts)
	}

	h = append(h, commitKeys(t, c, fmt.Appendf(nil, "key-%06d", partSegments+50))...)
	res, puts := pass("a pass losing a record past the closed part")
	if len(res.Replaced) != 1 || res.Replaced[0].BaseOffset != partSegments+50 || c.Head().Parts[0].Key != part {
		t.Fatalf("replaced %+v; closed part %s, was %s", res.Replaced, c.Head().Parts[0].Key, part)
	}
	if want := int64(len(res.Written) + 1); puts != want {
		t.Fatalf("%d PUTs, want %d: the new objects and the head, no part", puts, want)
	}
	for _, r := range c.Head().Retired {
		if r.Key == part {
			t.Fatal("the kept closed part is retired")
		}
	}

	h = append(h, commitKeys(t, c, []byte("key-000005"))...)
	res, _ = pass("a pass losing a record in the closed part")
	if len(res.Replaced) != 1 || res.Replaced[0].BaseOffset != 5 || c.Head().Parts[0].Key == part {
		t.Fatalf("replaced %+v; closed part %s, was %s", res.Replaced, c.Head().Parts[0].Key, part)
	}
	if !slices.ContainsFunc(c.Head().Retired, func(r RetiredObject) bool { return r.Key == part }) {
		t.Fatal("the rewritten closed part is not retired")
	}
	sameRecords(t, readColdRecords(t, mem), h.compacted(int64(len(h)), 0))
	rep, err := VerifyBucket(testContext(t), mem, VerifyOptions{Records: true})
	if err != nil {
		t.Fatal(err)
	}
	wantSound(t, rep)
}

// TestColdCleanResumesAScanAcrossRounds: with MaxScanBytes below one
// object, a cleaning filters one object a round, recording where it
// stopped; CleanedTo moves only when the scan reaches its key map's end;
// every head in between reads as a valid cold tier; a new leader goes on
// with the scan its predecessor left, whose commit is then refused; and the
// end is the model's.
func TestColdCleanResumesAScanAcrossRounds(t *testing.T) {
	mem := objstore.NewMemory()
	c, h := uploadedKeyed(t, mem, 13, 3000, 1000, 0, 0)
	objects := len(namedSegmentKeys(t, c))
	opts := ColdCleanOptions{Options: compact.Options{NowMs: 1 << 40, KeyMapBytes: 1 << 20}, MaxScanBytes: 1}
	res, err := CleanCold(testContext(t), c, opts)
	if err != nil || !res.Cleaned || !res.Partial || c.Head().CleanedTo != 0 || c.Head().CleanScan == nil {
		t.Fatalf("first round: %+v %v, head cleaned to %d, scan %+v", res, err, c.Head().CleanedTo, c.Head().CleanScan)
	}
	scan := *c.Head().CleanScan
	if scan.End != int64(len(h)) || scan.Next <= 0 || scan.Next >= scan.End {
		t.Fatalf("scan %+v after one object of %d, want to end at %d", scan, objects, len(h))
	}
	// Between rounds the cold tier reads whole: every offset in order,
	// the latest value of each key still there.
	got := readColdRecords(t, mem)
	last := map[string]int64{}
	for _, r := range got {
		last[string(r.Key)] = r.Offset
	}
	for _, r := range h.compacted(int64(len(h)), 0) {
		if last[string(r.Key)] != r.Offset {
			t.Fatalf("key %s: latest at %d mid-scan, the model's at %d", r.Key, last[string(r.Key)], r.Offset)
		}
	}

	// A new leader takes over and goes on from where the scan stopped.
	c2 := newTestCommitter(t, mem, 2)
	rounds := 1
	for {
		res, err := CleanCold(testContext(t), c2, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Cleaned {
			break
		}
		rounds++
		if s := c2.Head().CleanScan; res.Partial != (s != nil) || s != nil && (s.End != scan.End || s.Next <= scan.Next) {
			t.Fatalf("round %d: partial %v, scan %+v after %+v", rounds, res.Partial, s, scan)
		} else if s != nil {
			scan = *s
		}
		if rounds > 2*objects {
			t.Fatal("the scan does not end")
		}
	}
	if rounds < 3 || c2.Head().CleanedTo != int64(len(h)) || c2.Head().CleanScan != nil {
		t.Fatalf("%d rounds; cleaned to %d, scan %+v", rounds, c2.Head().CleanedTo, c2.Head().CleanScan)
	}
	sameRecords(t, readColdRecords(t, mem), h.compacted(int64(len(h)), 0))
	rep, err := VerifyBucket(testContext(t), mem, VerifyOptions{Records: true})
	if err != nil {
		t.Fatal(err)
	}
	wantSound(t, rep)
	if _, err := CleanCold(testContext(t), c, opts); !errors.Is(err, ErrFenced) {
		t.Fatalf("the deposed leader's round: %v", err)
	}
	if c2.Head().CleanedTo != int64(len(h)) {
		t.Fatal("the deposed leader changed the head")
	}
}

// TestDecodeHeadChecksCleanScan: a head whose cleaning scan does not lie
// past its CleanedTo, or stops outside its range, is corrupt; one without
// the field (written before it existed) decodes with none.
func TestDecodeHeadChecksCleanScan(t *testing.T) {
	base := Head{Topic: "t", TopicID: "x", Tail: []SegmentRef{{Key: "k", LastOffset: 9}}, CleanedTo: 4}
	for _, s := range []CleanScan{{End: 4, Next: 0}, {End: 9, Next: -1}, {End: 9, Next: 10}} {
		h := base
		h.CleanScan = &s
		data, err := EncodeHead(&h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeHead(data); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("scan %+v: %v, want ErrCorrupt", s, err)
		}
	}
	data, err := EncodeHead(&base)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("cleanScan")) {
		t.Fatal("a head without a scan names the field")
	}
	if h, err := DecodeHead(data); err != nil || h.CleanScan != nil {
		t.Fatalf("%+v %v", h, err)
	}
}
