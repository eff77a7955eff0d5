package tiering

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/compact"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering/objstore"
)

// history is what a test wrote to a compacted partition, in offset order.
type history []record.Record

// writeKeyed appends updates records of keys keys to l in batches of
// batch records, each a tombstone with probability tombstones; record at
// offset o has timestamp ts0+o.
func writeKeyed(t testing.TB, l *hotlog.Log, rng *rand.Rand, updates, keys, batch int, tombstones float64, ts0 int64) history {
	t.Helper()
	var h history
	for len(h) < updates {
		base := l.LogEndOffset()
		bl := record.NewBuilder(record.DefaultBatchOptions())
		for i := 0; i < batch && len(h) < updates; i++ {
			off := base + int64(i)
			r := record.Record{Offset: off, Timestamp: ts0 + off, Key: fmt.Appendf(nil, "key-%05d", rng.IntN(keys))}
			if rng.Float64() >= tombstones {
				r.Value = fmt.Appendf(nil, "value of %d %s", off, make([]byte, 20))
			}
			bl.Add(r)
			h = append(h, r)
		}
		b, err := bl.Build()
		if err != nil {
			t.Fatal(err)
		}
		b.SetBaseOffset(base)
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	return h
}

// compacted is what a cleaning to end leaves of h: below end the last
// record of each key (among those below end), tombstones only at or above
// horizon; from end on every record.
func (h history) compacted(end, horizon int64) history {
	last := map[string]int64{}
	for _, r := range h {
		if r.Offset < end {
			last[string(r.Key)] = r.Offset
		}
	}
	var out history
	for _, r := range h {
		switch {
		case r.Offset >= end:
			out = append(out, r)
		case last[string(r.Key)] != r.Offset:
		case r.Value == nil && r.Offset < horizon:
		default:
			out = append(out, r)
		}
	}
	return out
}

// readColdRecords reads every record of testRef's cold tier through a
// fresh ColdReader, checking that batches never go back.
func readColdRecords(t testing.TB, store objstore.Reader) history {
	t.Helper()
	ctx := testContext(t)
	r, err := NewColdReader(store, DefaultReaderConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h, err := r.Head(ctx, testRef)
	if err != nil || h == nil {
		t.Fatalf("head %v, %v", h, err)
	}
	var out history
	next := int64(-1)
	for off := h.StartOffset(); off < h.EndOffset(); {
		rd, err := r.Read(ctx, testRef, off, 1<<20)
		if err != nil {
			t.Fatalf("cold read at %d: %v", off, err)
		}
		for buf := rd.Batches; len(buf) > 0; {
			b, rest, err := record.Next(buf)
			if err != nil {
				t.Fatal(err)
			}
			if b.BaseOffset() < next {
				t.Fatalf("batch at %d after offset %d", b.BaseOffset(), next-1)
			}
			recs, err := b.Records()
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs { // they point into the reader's chunk
				r.Key, r.Value = cloneBytes(r.Key), cloneBytes(r.Value)
				out = append(out, r)
			}
			next, buf = b.NextOffset(), rest
		}
		if rd.NextOffset <= off {
			t.Fatalf("cold read at %d made no progress", off)
		}
		off = rd.NextOffset
		rd.Release()
	}
	return out
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return slices.Clone(b)
}

func sameRecords(t testing.TB, got, want history) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, the model has %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Offset != w.Offset || g.Timestamp != w.Timestamp || string(g.Key) != string(w.Key) ||
			string(g.Value) != string(w.Value) || (g.Value == nil) != (w.Value == nil) {
			t.Fatalf("record %d: got offset %d key %q value %q, the model has offset %d key %q value %q",
				i, g.Offset, g.Key, g.Value, w.Offset, w.Key, w.Value)
		}
	}
}

// cleanAll runs cleaning passes until one finds nothing to do.
func cleanAll(t testing.TB, c *Committer, opts ColdCleanOptions) (passes int, in, out int64) {
	t.Helper()
	for {
		res, err := CleanCold(testContext(t), c, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Cleaned {
			return passes, in, out
		}
		passes++
		in += res.BytesIn
		out += res.BytesOut
		if passes > 1000 {
			t.Fatal("cleaning does not end")
		}
	}
}

// uploadedKeyed builds a cold tier in store from a keyed history.
func uploadedKeyed(t *testing.T, store objstore.Bucket, seed uint64, updates, keys int, tombstones float64, ts0 int64) (*Committer, history) {
	t.Helper()
	l := localLog(t, t.TempDir())
	h := writeKeyed(t, l, rand.New(rand.NewPCG(seed, 1)), updates, keys, 25, tombstones, ts0)
	c := newTestCommitter(t, store, 1)
	uploadAll(t, c, l)
	if c.Head().EndOffset() != int64(len(h)) {
		t.Fatalf("cold tier ends at %d, want %d", c.Head().EndOffset(), len(h))
	}
	return c, h
}

func namedKeys(t testing.TB, c *Committer) []string {
	t.Helper()
	var keys []string
	for _, p := range c.Head().Parts {
		keys = append(keys, p.Key)
	}
	if err := c.Segments(testContext(t), func(s SegmentRef) bool { keys = append(keys, s.Key); return true }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

// TestColdCleanEqualsModel: random key histories with tombstones, uploaded
// and cleaned in the bucket with a key map too small for one pass: the cold
// tier read back holds exactly the model's records (the last value of each
// key, tombstones until delete.retention.ms, everything younger than
// min.compaction.lag.ms untouched), the bucket verifies sound with the
// replaced objects retired, and a second cleaning finds nothing to do.
func TestColdCleanEqualsModel(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			store := objstore.NewMemory()
			const ts0 = 1_000_000
			c, h := uploadedKeyed(t, store, seed, 3000+int(seed)*500, 50+int(seed)*40, 0.1, ts0)
			end := int64(len(h))
			opts := ColdCleanOptions{Options: compact.Options{
				NowMs:              ts0 + end + 100,
				KeyMapBytes:        40 * (compact.EntryOverhead + 9),
				MinCompactionLagMs: 300 + int64(seed)*100,
			}, DeleteRetentionMs: 0, MinDirtyRatio: 0.5, TargetObjectBytes: 20 << 10}

			passes, in, out := cleanAll(t, c, opts)
			if passes < 2 {
				t.Fatalf("%d passes: the key map was meant to be too small for one", passes)
			}
			cleaned := c.Head().CleanedTo
			// The range ends at the first segment holding a record younger
			// than the lag.
			var wantEnd int64 = -1
			c.Segments(testContext(t), func(s SegmentRef) bool {
				if s.MaxTs > opts.NowMs-opts.MinCompactionLagMs {
					wantEnd = s.BaseOffset
					return false
				}
				return true
			})
			if cleaned != wantEnd || cleaned <= 0 || cleaned >= end {
				t.Fatalf("cleaned to %d, want the range end %d (log end %d)", cleaned, wantEnd, end)
			}
			// With delete.retention.ms 0 each pass removes the tombstones
			// below the previous pass's end.
			history := c.Head().CleanPasses
			sameRecords(t, readColdRecords(t, store), h.compacted(cleaned, history[len(history)-2].End))
			t.Logf("%d passes, %d -> %d bytes, cleaned to %d of %d", passes, in, out, cleaned, end)

			rep, err := VerifyBucket(testContext(t), store, VerifyOptions{Records: true})
			if err != nil {
				t.Fatal(err)
			}
			wantSound(t, rep)
			if len(rep.Orphans) != 0 {
				t.Fatalf("orphans %+v", rep.Orphans)
			}
			res, err := CleanCold(testContext(t), c, opts)
			if err != nil || res.Cleaned {
				t.Fatalf("a clean cold tier cleaned again: %+v, %v", res, err)
			}
		})
	}
}

// TestColdCleanRetiredObjectsWaitForGrace: a reader that loaded the head
// before a cleaning reads the replaced objects to the end while the grace
// lasts; CollectRetired deletes them only after it, and the orphan sweep
// never takes them early.
func TestColdCleanRetiredObjectsWaitForGrace(t *testing.T) {
	ctx := testContext(t)
	store := objstore.NewMemory()
	c, h := uploadedKeyed(t, store, 7, 2000, 30, 0, 0)
	inFlight, err := NewColdReader(store, DefaultReaderConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer inFlight.Close()
	first, err := inFlight.Read(ctx, testRef, 0, 1024)
	if err != nil {
		t.Fatal(err)
	}
	first.Release()
	oldHead, _, err := LoadHead(ctx, store, testRef)
	if err != nil {
		t.Fatal(err)
	}

	now := time.UnixMilli(1_000_000_000)
	opts := ColdCleanOptions{Options: compact.Options{NowMs: now.UnixMilli(), KeyMapBytes: 1 << 20}, DeleteRetentionMs: -1}
	if passes, _, _ := cleanAll(t, c, opts); passes != 1 {
		t.Fatalf("%d passes", passes)
	}
	if len(c.Head().Retired) == 0 {
		t.Fatal("no object retired")
	}

	// The reader still works from the head it loaded: every old object is
	// there, and so is every record it named.
	var old []SegmentRef
	if err := ForEachSegment(ctx, store, oldHead, func(s SegmentRef) bool { old = append(old, s); return true }); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range old {
		o, err := readWholeObject(ctx, store, s)
		if err != nil {
			t.Fatalf("replaced object gone within its grace: %v", err)
		}
		for _, err := range o.batches {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("read nothing")
	}
	for off := int64(0); off < int64(len(h)); {
		rd, err := inFlight.Read(ctx, testRef, off, 1<<20)
		if err != nil {
			t.Fatalf("in-flight read at %d: %v", off, err)
		}
		off = rd.NextOffset
		rd.Release()
	}

	if got, err := CollectOrphans(ctx, c, 0, now.Add(time.Hour)); err != nil || len(got) != 0 {
		t.Fatalf("orphan sweep took %v (%v)", got, err)
	}
	if got, err := CollectRetired(ctx, c, DefaultRetiredGrace, now.Add(DefaultRetiredGrace-time.Second)); err != nil || len(got) != 0 {
		t.Fatalf("deleted %v before the grace ended (%v)", got, err)
	}
	retired := len(c.Head().Retired)
	got, err := CollectRetired(ctx, c, DefaultRetiredGrace, now.Add(DefaultRetiredGrace))
	if err != nil || len(got) != retired || len(c.Head().Retired) != 0 {
		t.Fatalf("deleted %d of %d retired (%v), %d left", len(got), retired, err, len(c.Head().Retired))
	}
	if _, err := readWholeObject(ctx, store, old[0]); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("replaced object after its grace: %v", err)
	}
	if keys := listKeys(t, store, testRef.SegmentPrefix()); !slices.Equal(keys, namedSegmentKeys(t, c)) {
		t.Fatalf("bucket holds %v, manifest names %v", keys, namedSegmentKeys(t, c))
	}
	sameRecords(t, readColdRecords(t, store), h.compacted(int64(len(h)), 0))
}

func namedSegmentKeys(t testing.TB, c *Committer) []string {
	var keys []string
	c.Segments(testContext(t), func(s SegmentRef) bool { keys = append(keys, s.Key); return true })
	slices.Sort(keys)
	return keys
}

// TestColdCleanDeposedLeaderIsRefused: a leader deposed while cleaning
// cannot commit its compaction; the successor's head is untouched and the
// deposed leader's new objects are gone.
func TestColdCleanDeposedLeaderIsRefused(t *testing.T) {
	ctx := testContext(t)
	store := objstore.NewMemory()
	old, h := uploadedKeyed(t, store, 3, 1500, 20, 0.05, 0)
	successor := newTestCommitter(t, store, 2)
	before, etag, err := LoadHead(ctx, store, testRef)
	if err != nil {
		t.Fatal(err)
	}
	opts := ColdCleanOptions{Options: compact.Options{NowMs: 1 << 40, KeyMapBytes: 1 << 20}, DeleteRetentionMs: -1}
	if _, err := CleanCold(ctx, old, opts); !errors.Is(err, ErrFenced) {
		t.Fatalf("deposed leader's cleaning: %v, want ErrFenced", err)
	}
	after, etag2, err := LoadHead(ctx, store, testRef)
	if err != nil || etag2 != etag || after.Generation != before.Generation {
		t.Fatalf("head changed: generation %d -> %d (%v)", before.Generation, after.Generation, err)
	}
	if keys := listKeys(t, store, testRef.SegmentPrefix()); !slices.Equal(keys, namedSegmentKeys(t, successor)) {
		t.Fatalf("bucket holds %d segment objects, the manifest names %d", len(keys), len(namedSegmentKeys(t, successor)))
	}
	sameRecords(t, readColdRecords(t, store), h)
	// The successor cleans.
	if passes, _, _ := cleanAll(t, successor, opts); passes == 0 {
		t.Fatal("the successor did not clean")
	}
	sameRecords(t, readColdRecords(t, store), h.compacted(int64(len(h)), 0))
}

// crashingManifest fails every write of the manifest head once armed, as
// a broker that dies after uploading its new objects and before its
// commit: the write never lands.
type crashingManifest struct {
	objstore.Bucket
	armed bool
}

var errCrashed = errors.New("broker crashed")

func (s *crashingManifest) Put(ctx context.Context, key string, data []byte, opts objstore.WriteOptions) (objstore.ObjectInfo, error) {
	if s.armed && key == testRef.ManifestKey() {
		return objstore.ObjectInfo{}, errCrashed
	}
	return s.Bucket.Put(ctx, key, data, opts)
}

func (s *crashingManifest) Delete(ctx context.Context, key string) error {
	if s.armed {
		return errCrashed // a dead broker deletes nothing either
	}
	return s.Bucket.Delete(ctx, key)
}

// TestColdCleanCrashBeforeCommit: a crash between the upload of the new
// objects and the manifest commit leaves the old manifest complete (every
// record readable as before) and the new objects as orphans, which the
// next leader's orphan sweep removes; its cleaning then succeeds.
func TestColdCleanCrashBeforeCommit(t *testing.T) {
	ctx := testContext(t)
	mem := objstore.NewMemory()
	store := &crashingManifest{Bucket: mem}
	l := localLog(t, t.TempDir())
	h := writeKeyed(t, l, rand.New(rand.NewPCG(11, 1)), 2000, 25, 25, 0.1, 0)
	c, err := NewCommitter(ctx, store, testRef, 1)
	if err != nil {
		t.Fatal(err)
	}
	uploadAll(t, c, l)
	named := namedSegmentKeys(t, c)

	store.armed = true
	opts := ColdCleanOptions{Options: compact.Options{NowMs: 1 << 40, KeyMapBytes: 1 << 20}, DeleteRetentionMs: -1}
	if _, err := CleanCold(ctx, c, opts); !errors.Is(err, errCrashed) {
		t.Fatalf("cleaning through a crash: %v", err)
	}
	// The process is gone; what is in the bucket is all there is.
	keys := listKeys(t, mem, testRef.SegmentPrefix())
	if len(keys) <= len(named) {
		t.Fatalf("no new object uploaded before the crash: %d objects, %d named", len(keys), len(named))
	}
	sameRecords(t, readColdRecords(t, mem), h)

	next := newTestCommitter(t, mem, 2)
	if got := namedSegmentKeys(t, next); !slices.Equal(got, named) {
		t.Fatal("the manifest changed")
	}
	swept, err := CollectOrphans(ctx, next, 0, time.Now().Add(time.Minute))
	if err != nil || len(swept) != len(keys)-len(named) {
		t.Fatalf("swept %d orphans of %d (%v)", len(swept), len(keys)-len(named), err)
	}
	if got := listKeys(t, mem, testRef.SegmentPrefix()); !slices.Equal(got, named) {
		t.Fatal("orphans left after the sweep")
	}
	if passes, _, _ := cleanAll(t, next, opts); passes == 0 {
		t.Fatal("no cleaning after the crash")
	}
	sameRecords(t, readColdRecords(t, mem), h.compacted(int64(len(h)), 0))
}

// TestColdCleanWaitsForDirtyRatio: the dirty ratio, from the manifest
// alone, decides: a threshold above it leaves the cold tier alone, one at
// it cleans, and a cleaned tier (ratio 0) is left alone.
func TestColdCleanWaitsForDirtyRatio(t *testing.T) {
	store := objstore.NewMemory()
	c, _ := uploadedKeyed(t, store, 5, 1000, 10, 0, 0)
	opts := ColdCleanOptions{Options: compact.Options{NowMs: 1 << 40, KeyMapBytes: 1 << 20}, MinDirtyRatio: 1.01}
	gen := c.Head().Generation
	if res, err := CleanCold(testContext(t), c, opts); err != nil || res.Cleaned || res.Ratio != 1 || c.Head().Generation != gen {
		t.Fatalf("cleaned below its ratio: %+v %v", res, err)
	}
	// A dirty record older than max.compaction.lag.ms overrides the ratio.
	opts.MaxCompactionLagMs = 1<<40 + 1 // the oldest record is at 0
	if res, err := CleanCold(testContext(t), c, opts); err != nil || res.Cleaned {
		t.Fatalf("cleaned with no record past the lag: %+v %v", res, err)
	}
	opts.MaxCompactionLagMs = 1<<40 - 1000
	if passes, _, _ := cleanAll(t, c, opts); passes != 1 {
		t.Fatalf("%d passes", passes)
	}
	gen = c.Head().Generation
	opts.MinDirtyRatio = 0
	if res, err := CleanCold(testContext(t), c, opts); err != nil || res.Cleaned || c.Head().Generation != gen {
		t.Fatalf("clean tier cleaned: %+v %v", res, err)
	}
}

// timeAfterGrace is when the default grace of objects retired at nowMs has
// passed.
func timeAfterGrace(nowMs int64) time.Time {
	return time.UnixMilli(nowMs).Add(DefaultRetiredGrace)
}

// TestRestoreOfACleanedColdTier: a cold tier cleaned in the bucket,
// restored to an offset and to a point in time that fall inside cleaned
// batches (with gaps), holds exactly the model's records before the cut,
// at their offsets.
func TestRestoreOfACleanedColdTier(t *testing.T) {
	store := objstore.NewMemory()
	c, h := uploadedKeyed(t, store, 9, 3000, 40, 0.1, 1000)
	cleanAll(t, c, ColdCleanOptions{Options: compact.Options{NowMs: 1 << 40, KeyMapBytes: 1 << 20}, DeleteRetentionMs: -1})
	model := h.compacted(int64(len(h)), 0)
	// Cut at a record's offset deep in the cleaned log, and just after it.
	at := model[len(model)-len(model)/3]
	for i, cut := range []RestoreCut{{ToOffset: at.Offset, ToTime: NoCut}, {ToOffset: at.Offset + 1, ToTime: NoCut}, {ToOffset: NoCut, ToTime: at.Timestamp}} {
		dst := copyRef
		dst.TopicID = fmt.Sprintf("%032d", i)
		head, err := CopyPartition(testContext(t), store, c.Head(), dst, cut)
		if err != nil {
			t.Fatal(err)
		}
		var want history
		for _, r := range model {
			if cut.keeps(r.Offset, r.Timestamp) {
				want = append(want, r)
			}
		}
		var got history
		ForEachSegment(testContext(t), store, head, func(s SegmentRef) bool {
			o, err := readWholeObject(testContext(t), store, s)
			if err != nil {
				t.Fatal(err)
			}
			for b, err := range o.batches {
				if err != nil {
					t.Fatal(err)
				}
				recs, err := b.Records()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, recs...)
			}
			return true
		})
		sameRecords(t, got, want)
	}
}

// TestColdCleanTombstonesWaitForDeleteRetention: a tombstone stays in the
// cold tier for delete.retention.ms after a cleaning first covered it, and
// a later cleaning past that time removes it (Kafka's rule).
func TestColdCleanTombstonesWaitForDeleteRetention(t *testing.T) {
	store := objstore.NewMemory()
	l := localLog(t, t.TempDir())
	rng := rand.New(rand.NewPCG(13, 1))
	first := writeKeyed(t, l, rng, 1500, 300, 25, 0.3, 0)
	c := newTestCommitter(t, store, 1)
	uploadAll(t, c, l)
	const retention = 60_000
	opts := ColdCleanOptions{Options: compact.Options{NowMs: 1_000_000, KeyMapBytes: 1 << 20}, DeleteRetentionMs: retention}
	if passes, _, _ := cleanAll(t, c, opts); passes != 1 {
		t.Fatalf("%d passes", passes)
	}
	kept := first.compacted(1500, 0)
	if kept.tombstones() == 0 {
		t.Fatal("the history has no tombstone left to test")
	}
	sameRecords(t, readColdRecords(t, store), kept)

	// More history, cleaned just before delete.retention.ms has passed
	// since the first cleaning: every tombstone that is still its key's
	// last stays.
	all := append(first, writeKeyed(t, l, rng, 1000, 60, 25, 0.3, 0)...)
	uploadAll(t, c, l)
	opts.NowMs += retention - 1
	cleanAll(t, c, opts)
	sameRecords(t, readColdRecords(t, store), all.compacted(int64(len(all)), 0))

	// And once it has passed: the tombstones the first cleaning covered
	// go, the younger ones stay.
	all = append(all, writeKeyed(t, l, rng, 200, 60, 25, 0.3, 0)...)
	uploadAll(t, c, l)
	opts.NowMs++
	cleanAll(t, c, opts)
	want := all.compacted(int64(len(all)), 1500)
	if want.tombstones() == all.compacted(int64(len(all)), 0).tombstones() {
		t.Fatal("no tombstone below the first cleaning's end to remove")
	}
	sameRecords(t, readColdRecords(t, store), want)
}

func (h history) tombstones() int {
	n := 0
	for _, r := range h {
		if r.Value == nil {
			n++
		}
	}
	return n
}
