package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/human"
	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering"
	"github.com/strata-log/strata/tiering/objstore"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
	"github.com/strata-log/strata/tiering/objstore/s3"
)

const bucketTopicID = "0123456789abcdef0123456789abcdef"

// buildFSColdTier uploads batches of a real hotlog into an fs object store
// at dir, as a leader in epoch 3 would, for partition of topic orders, and
// returns the partition's manifest head.
func buildFSColdTier(t *testing.T, dir string, partition int32, batches int) (tiering.PartitionRef, *tiering.Head) {
	t.Helper()
	store, err := objstore.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return buildColdTier(t, store, partition, batches)
}

// buildColdTier is buildFSColdTier into any store.
func buildColdTier(t *testing.T, store objstore.Bucket, partition int32, batches int) (tiering.PartitionRef, *tiering.Head) {
	t.Helper()
	ctx := t.Context()
	opts := hotlog.DefaultOptions()
	opts.SegmentBytes = 16 << 10
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := hotlog.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range batches {
		var recs []record.Record
		for j := range 4 {
			recs = append(recs, record.Record{Timestamp: 1_767_225_600_000 + int64(i*1000+j), Value: bytes.Repeat([]byte{byte(i)}, 150)})
		}
		b, err := record.Encode(record.DefaultBatchOptions(), recs...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(b, 3); err != nil {
			t.Fatal(err)
		}
	}
	ref := tiering.PartitionRef{Topic: "orders", TopicID: bucketTopicID, Partition: partition}
	c, err := tiering.NewCommitter(ctx, store, ref, 3)
	if err != nil {
		t.Fatal(err)
	}
	for {
		ok, err := tiering.UploadNext(ctx, c, l, l.LogEndOffset(), map[string]string{"retention.ms": "-1"}, 12)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
	}
	if segs, _ := c.Head().Stats(); segs < 3 {
		t.Fatalf("only %d segments uploaded", segs)
	}
	return ref, c.Head()
}

// bucketCmd runs strata in this process and returns stdout, stderr and the
// exit status main would give.
func bucketCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	root := newRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(&errOut, "strata:", err)
		code = exitCode(err)
	}
	return out.String(), errOut.String(), code
}

// lsRow is the row strata bucket ls prints for a partition whose head is
// h, worked out from the manifest here rather than by the code under test.
func lsRow(t *testing.T, dir string, h *tiering.Head) string {
	t.Helper()
	store, err := objstore.NewDirReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	segs, size := h.Stats()
	minTs, maxTs := int64(1<<62), int64(-1)
	if err := tiering.ForEachSegment(t.Context(), store, h, func(s tiering.SegmentRef) bool {
		minTs, maxTs = min(minTs, s.MinTs), max(maxTs, s.MaxTs)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	ts := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }
	return fmt.Sprintf("orders %s %d %d %s %d %d %s %s 3 %d", h.TopicID, h.Partition, segs, human.Bytes(size),
		h.StartOffset(), h.EndOffset(), ts(minTs), ts(maxTs), h.Generation)
}

// TestBucketCommands runs strata bucket ls and verify against a real fs
// store, found by flag, by config file and by environment variable, as it
// is sound, with an orphan, and damaged.
func TestBucketCommands(t *testing.T) {
	dir := t.TempDir()
	_, h10 := buildFSColdTier(t, dir, 10, 150)
	ref2, h2 := buildFSColdTier(t, dir, 2, 100)
	where := []string{"--object-store-path", dir}
	header := "TOPIC TOPIC-ID PARTITION SEGMENTS SIZE START END MIN-TIME MAX-TIME EPOCH GENERATION"

	out, stderr, code := bucketCmd(t, append([]string{"bucket", "ls"}, where...)...)
	if code != 0 {
		t.Fatalf("ls: status %d\n%s", code, stderr)
	}
	mustRows(t, "ls", out, header, lsRow(t, dir, h2), lsRow(t, dir, h10))

	// A config file of strata serve, and the environment, find it too.
	cfg := filepath.Join(t.TempDir(), "strata.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "node_id: 7\nobject_store:\n  type: fs\n  path: %s\n", dir), 0o644); err != nil {
		t.Fatal(err)
	}
	if out2, stderr, code := bucketCmd(t, "bucket", "ls", "--config", cfg); code != 0 || out2 != out {
		t.Fatalf("ls --config: status %d\n%s%s", code, out2, stderr)
	}
	// As JSON, with the documented names.
	js, _, code := bucketCmd(t, append([]string{"bucket", "ls", "--format", "json"}, where...)...)
	var doc struct {
		Store      string `json:"store"`
		Partitions []struct {
			Topic       string `json:"topic"`
			TopicID     string `json:"topic_id"`
			Partition   int32  `json:"partition"`
			Segments    int    `json:"segments"`
			StartOffset int64  `json:"start_offset"`
			EndOffset   int64  `json:"end_offset"`
			MinTime     string `json:"min_time"`
			Generation  uint64 `json:"generation"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(js), &doc); code != 0 || err != nil {
		t.Fatalf("ls --format json: status %d, %v in:\n%s", code, err, js)
	}
	if doc.Store != dir || len(doc.Partitions) != 2 || doc.Partitions[0].Partition != 2 || doc.Partitions[1].Partition != 10 ||
		doc.Partitions[0].EndOffset != h2.EndOffset() || doc.Partitions[1].Generation != h10.Generation ||
		doc.Partitions[0].Topic != "orders" || doc.Partitions[0].MinTime == "" {
		t.Fatalf("ls --format json: %+v", doc)
	}

	// With nothing naming a store, the default ./data/objects is read,
	// and stderr says so and how to read a broker's own.
	t.Run("default", func(t *testing.T) {
		base := t.TempDir()
		if err := os.Mkdir(filepath.Join(base, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(dir, filepath.Join(base, "data", "objects")); err != nil {
			t.Fatal(err)
		}
		t.Chdir(base)
		_, stderr, code := bucketCmd(t, "bucket", "ls")
		if code != 0 || !strings.HasPrefix(stderr, "reading "+filepath.Join(base, "data", "objects")+" (the default fs store; for a broker's own store give --config") {
			t.Fatalf("ls with no store named: status %d, stderr %q", code, stderr)
		}
		os.Remove(filepath.Join(base, "data", "objects"))
		_, stderr, code = bucketCmd(t, "bucket", "verify")
		if code != exitUsage || !strings.Contains(stderr, "give --config with the broker's config file (a broker using S3 or MinIO keeps nothing there)") {
			t.Fatalf("verify with no store: status %d, stderr %q", code, stderr)
		}
	})
	t.Run("env", func(t *testing.T) {
		t.Setenv("STRATA_OBJECT_STORE_PATH", dir)
		if out2, stderr, code := bucketCmd(t, "bucket", "ls", "--topic", "orders"); code != 0 || out2 != out {
			t.Fatalf("ls with STRATA_OBJECT_STORE_PATH: status %d\n%s%s", code, out2, stderr)
		}
	})

	segs2, _ := h2.Stats()
	segs10, _ := h10.Stats()
	out, stderr, code = bucketCmd(t, append([]string{"bucket", "verify", "--records"}, where...)...)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("2 partitions, 0 closed parts, %d segments", segs2+segs10)) ||
		!strings.HasSuffix(out, "\nsound\n") || stderr != "reading "+dir+"\n" {
		t.Fatalf("verify of a sound bucket: status %d\n%s\nstderr: %s", code, out, stderr)
	}

	// An upload in flight (its temp file) is left alone and is no orphan;
	// a stray object is an orphan, which fails the check only with --strict.
	tmp := filepath.Join(dir, filepath.FromSlash(ref2.SegmentPrefix()), ".strata-tmp-inflight")
	if err := os.WriteFile(tmp, []byte("half an upload"), 0o644); err != nil {
		t.Fatal(err)
	}
	stray := ref2.SegmentPrefix() + "00000000000000000000-2-abad1dea.seg"
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(stray)), make([]byte, 500), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code = bucketCmd(t, append([]string{"bucket", "verify", "-q"}, where...)...)
	if code != 0 || !strings.Contains(out, "orphan: "+stray+" (500 B, ") || !strings.HasSuffix(out, "sound, 1 orphan (500 B) that no manifest names\n") {
		t.Fatalf("verify with an orphan: status %d\n%s", code, out)
	}
	if _, stderr, code := bucketCmd(t, append([]string{"bucket", "verify", "--strict"}, where...)...); code != exitProblems ||
		!strings.Contains(stderr, "strata: bucket verify: 1 problem in "+dir) {
		t.Fatalf("verify --strict with an orphan: status %d, stderr %s", code, stderr)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("the temp file of the upload in flight: %v", err)
	}

	// A byte flipped on disk in a segment of partition 2.
	var victim tiering.SegmentRef
	tiering.ForEachSegment(t.Context(), mustDirReader(t, dir), h2, func(s tiering.SegmentRef) bool { victim = s; return false })
	path := filepath.Join(dir, filepath.FromSlash(victim.Key))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[victim.LogLen/2] ^= 0x40
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = bucketCmd(t, append([]string{"bucket", "verify"}, where...)...)
	if code != exitProblems || !strings.Contains(out, "problem: "+victim.Key+": ") || !strings.Contains(out, "\nNOT SOUND: ") ||
		!strings.Contains(stderr, "strata: bucket verify: ") {
		t.Fatalf("verify of a damaged segment: status %d\n%s\nstderr: %s", code, out, stderr)
	}
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "problem: ") && !strings.HasPrefix(line, "problem: "+victim.Key+": ") {
			t.Errorf("a problem elsewhere: %s", line)
		}
	}
	// A topic the bucket does not hold is a usage error, not a sound one.
	if out, _, code := bucketCmd(t, "bucket", "verify", "--topic", "other", "--object-store-path", dir); code != exitUsage || out != "" {
		t.Fatalf("verify of a topic the bucket lacks: status %d\n%s", code, out)
	}
}

func mustDirReader(t *testing.T, dir string) objstore.Reader {
	t.Helper()
	r, err := objstore.NewDirReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestBucketCommandsS3: ls and verify of a cold tier in a real MinIO under
// a key prefix, reached with serve's s3 flags and the secret key from the
// environment, then with an object deleted behind the code's back.
func TestBucketCommandsS3(t *testing.T) {
	srv := miniotest.Start(t)
	bucket, err := s3.New(t.Context(), srv.S3Config())
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "prod/strata"
	ref, h := buildColdTier(t, objstore.WithPrefix(bucket, prefix), 0, 120)
	t.Setenv("STRATA_OBJECT_STORE_SECRET_KEY", srv.SecretKey)
	where := []string{"--object-store-type", "s3", "--object-store-endpoint", srv.Endpoint, "--object-store-bucket", srv.Bucket,
		"--object-store-access-key", srv.AccessKey, "--object-store-prefix", prefix}

	out, stderr, code := bucketCmd(t, append([]string{"bucket", "ls"}, where...)...)
	segs, size := h.Stats()
	if code != 0 || len(tableRows(out)) != 2 || !strings.HasPrefix(tableRows(out)[1], fmt.Sprintf("orders %s 0 %d %s 0 %d ", ref.TopicID, segs, human.Bytes(size), h.EndOffset())) {
		t.Fatalf("ls: status %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = bucketCmd(t, append([]string{"bucket", "verify"}, where...)...)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("1 partition, 0 closed parts, %d segments", segs)) || !strings.HasSuffix(out, "\nsound\n") {
		t.Fatalf("verify: status %d\n%s%s", code, out, stderr)
	}
	var gone tiering.SegmentRef
	tiering.ForEachSegment(t.Context(), objstore.WithPrefix(bucket, prefix), h, func(s tiering.SegmentRef) bool { gone = s; return false })
	if err := srv.Client.RemoveObject(t.Context(), srv.Bucket, prefix+"/"+gone.Key, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = bucketCmd(t, append([]string{"bucket", "verify"}, where...)...)
	if code != exitProblems || !strings.Contains(out, "problem: "+gone.Key+": missing") {
		t.Fatalf("verify after a delete: status %d\n%s%s", code, out, stderr)
	}
}

// TestBucketUsageErrors: mistakes in the command line, and a store that
// is not there, are status 2, each with a line that says what to change.
func TestBucketUsageErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bucket", "ls", "--object-store-path", missing}, "no fs object store at " + missing},
		{[]string{"bucket", "verify", "--object-store-type", "none"}, "object_store.type is none"},
		{[]string{"bucket", "verify", "--object-store-type", "s3"}, "object_store.bucket"},
		{[]string{"bucket", "ls", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"bucket", "verify", "extra"}, `unexpected argument "extra"`},
		{[]string{"bucket", "lss"}, `unknown command "lss"`},
		{[]string{"bucket", "verify", "--parallel", "0", "--object-store-path", missing}, "--parallel 0"},
		{[]string{"bucket", "ls", "--topic", "a/b"}, "no '/'"},
		{[]string{"bucket", "ls", "--topic", "orders", "--object-store-path", t.TempDir()}, `no manifest of topic "orders"`},
	} {
		_, stderr, code := bucketCmd(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("strata %s: status %d, stderr %q; want 2 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
}

// TestBucketProgress: on a terminal the bar is redrawn at most every tick
// (and at the end) and cleared when done; elsewhere a line comes every
// lineEvery only.
func TestBucketProgress(t *testing.T) {
	now := time.Unix(1000, 0)
	var out bytes.Buffer
	bar := &progressBar{w: &out, tty: true, now: func() time.Time { return now }, last: now}
	p := tiering.VerifyProgress{Objects: 1, ObjectsTotal: 4, Bytes: 1 << 20, BytesTotal: 4 << 20}
	bar.update(p) // within the tick: not drawn
	now = now.Add(barTick)
	bar.update(p)
	p.Objects, p.Bytes = 4, 4<<20
	bar.update(p) // the end is always drawn
	bar.done()
	want := "\r\x1b[K[#######.......................]  25% (1 of 4 objects, 1.0 MiB of 4.0 MiB)" +
		"\r\x1b[K[##############################] 100% (4 of 4 objects, 4.0 MiB of 4.0 MiB)\r\x1b[K"
	if out.String() != want {
		t.Fatalf("bar:\n%q\nwant\n%q", out.String(), want)
	}

	out.Reset()
	lines := &progressBar{w: &out, now: func() time.Time { return now }, last: now}
	lines.update(p)
	now = now.Add(lineEvery)
	lines.update(p)
	lines.done()
	if out.String() != "verify: 100% (4 of 4 objects, 4.0 MiB of 4.0 MiB)\n" {
		t.Fatalf("lines: %q", out.String())
	}
}
