package tiering

import (
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strata-log/strata/compact"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/tiering/objstore"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
	"github.com/strata-log/strata/tiering/objstore/s3"
)

// bucketUsage is the bytes and count of a partition's segment objects.
func bucketUsage(t *testing.T, store objstore.Reader) (bytes int64, objects int) {
	t.Helper()
	err := store.List(testContext(t), testRef.SegmentPrefix(), func(o objstore.ObjectInfo) error {
		bytes += o.Size
		objects++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bytes, objects
}

// TestColdCleanMinIO: 100,000 updates of 1,000 keys uploaded to a real
// MinIO and cleaned in the bucket leave 1,000 records, read back equal to
// the model, and bucket bytes proportional to the live keys once the
// replaced objects' grace has passed.
func TestColdCleanMinIO(t *testing.T) {
	srv := miniotest.Start(t)
	ctx := testContext(t)
	store, err := s3.New(ctx, srv.S3Config())
	if err != nil {
		t.Fatal(err)
	}
	opts := hotlog.DefaultOptions()
	opts.SegmentBytes = 32 << 10
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := hotlog.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const updates, keys = 100_000, 1_000
	h := writeKeyed(t, l, rand.New(rand.NewPCG(27, 3)), updates, keys, 100, 0, 0)
	var metrics objstore.Metrics
	c := newTestCommitter(t, objstore.WithMetrics(store, &metrics), 1)
	uploadAll(t, c, l)
	bytesBefore, objectsBefore := bucketUsage(t, store)

	clean := ColdCleanOptions{Options: compact.Options{NowMs: int64(updates) + 1, KeyMapBytes: 1 << 20}, TargetObjectBytes: 4 << 10}
	start := time.Now()
	passes, in, out := cleanAll(t, c, clean)
	took := time.Since(start)
	if _, err := CollectRetired(ctx, c, DefaultRetiredGrace, timeAfterGrace(clean.NowMs)); err != nil {
		t.Fatal(err)
	}
	bytesAfter, objectsAfter := bucketUsage(t, store)
	got := readColdRecords(t, store)
	sameRecords(t, got, h.compacted(int64(updates), 0))
	if len(got) != keys {
		t.Fatalf("%d records after cleaning, want one per key: %d", len(got), keys)
	}
	t.Logf("%d updates of %d keys: %d objects, %d bytes before; %d passes rewrote %d bytes into %d in %v (%.1f MB/s); %d objects, %d bytes after (%.1f bytes per live key)",
		updates, keys, objectsBefore, bytesBefore, passes, in, out, took, float64(in)/took.Seconds()/1e6, objectsAfter, bytesAfter, float64(bytesAfter)/keys)
	// A record here is about 70 bytes; each surviving one may sit in a
	// batch of its own (61 bytes of header) behind a filler.
	if perKey := bytesAfter / keys; perKey > 250 {
		t.Fatalf("%d bytes per live key after cleaning: not proportional to the live keys", perKey)
	}
	rep, err := VerifyBucket(ctx, store, VerifyOptions{Records: true})
	if err != nil {
		t.Fatal(err)
	}
	wantSound(t, rep)
	if len(rep.Orphans) != 0 {
		t.Fatalf("orphans %+v", rep.Orphans)
	}

	// A second pass with nothing new reads and writes nothing.
	before := metrics.Snapshot()
	clean.NowMs += 1000
	if res, err := CleanCold(ctx, c, clean); err != nil || res.Cleaned {
		t.Fatalf("second pass with nothing new: %+v %v", res, err)
	}
	gets, puts := objectOps(before, metrics.Snapshot())
	if gets != 0 || puts != 0 {
		t.Fatalf("a pass with nothing new did %d GETs and %d PUTs", gets, puts)
	}
	t.Logf("second pass, nothing new: %d GETs, %d PUTs", gets, puts)

	// A pass after a small dirty tail (100 updates of 3 keys) rewrites the
	// tail and only the cleaned objects that held those keys.
	tail := writeKeyed(t, l, rand.New(rand.NewPCG(27, 4)), 100, 3, 100, 0, 0)
	h = append(h, tail...)
	uploadAll(t, c, l)
	named := namedSegmentKeys(t, c)
	before = metrics.Snapshot()
	clean.NowMs = int64(len(h)) + 1
	start = time.Now()
	res, err := CleanCold(ctx, c, clean)
	took = time.Since(start)
	if err != nil || !res.Cleaned {
		t.Fatalf("pass after a dirty tail: %+v %v", res, err)
	}
	gets, puts = objectOps(before, metrics.Snapshot())
	sameRecords(t, readColdRecords(t, store), h.compacted(int64(len(h)), 0))
	t.Logf("pass after a dirty tail of 100 updates of 3 keys: %d of %d objects rewritten (%d bytes) into %d (%d bytes) in %v; %d GETs, %d PUTs",
		len(res.Replaced), len(named), res.BytesIn, len(res.Written), res.BytesOut, took.Round(time.Millisecond), gets, puts)
}

// objectOps is the GETs (whole and ranged) and PUTs (whole and streamed)
// done between two snapshots of a bucket's metrics.
func objectOps(before, after map[objstore.Op]objstore.OpStats) (gets, puts int64) {
	for _, op := range []objstore.Op{objstore.OpGet, objstore.OpReadAt} {
		gets += after[op].Calls - before[op].Calls
	}
	for _, op := range []objstore.Op{objstore.OpPut, objstore.OpCreate} {
		puts += after[op].Calls - before[op].Calls
	}
	return gets, puts
}
