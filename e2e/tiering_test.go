package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/tiering"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// s3Flags points a broker at a MinIO server's bucket.
func s3Flags(m *miniotest.Server, extra ...string) []string {
	return append([]string{
		"--object-store-type", "s3",
		"--object-store-endpoint", m.Endpoint,
		"--object-store-bucket", m.Bucket,
		"--object-store-access-key", m.AccessKey,
		"--object-store-secret-key", m.SecretKey,
		"--object-store-path-style",
	}, extra...)
}

// payload is the known content of record seq: its sequence number, then
// bytes derived from it, so a reader can check every byte.
func payload(seq int64, size int) []byte {
	v := make([]byte, size)
	binary.BigEndian.PutUint64(v, uint64(seq))
	r := rand.New(rand.NewPCG(uint64(seq), 7))
	for i := 8; i < size; i++ {
		v[i] = byte('a' + r.IntN(26))
	}
	return v
}

func seqOf(v []byte) int64 { return int64(binary.BigEndian.Uint64(v)) }

// newTieredProducer makes a producer whose batches are far smaller than the
// test topics' segments: a log rolls its segment only between batches, and
// a producer left to fill 1 MiB batches (as it does when the broker is slow)
// could put a test's whole history in one segment that never seals.
func newTieredProducer(c *client.Client, opts ...client.ProducerOption) *client.Producer {
	return c.NewProducer(append([]client.ProducerOption{client.WithBatchBytes(16 << 10)}, opts...)...)
}

// tieredProducer produces records seq0.. to one partition and remembers
// which were acknowledged, at which offset.
type tieredProducer struct {
	mu     sync.Mutex
	acked  map[int64]int64 // seq -> offset
	failed []error
}

func (tp *tieredProducer) produce(ctx context.Context, p *client.Producer, topic string, seq0, n int64, size int, ts func(int64) time.Time) {
	for seq := seq0; seq < seq0+n; seq++ {
		r := &client.Record{Topic: topic, Partition: 0, Key: []byte("k"), Value: payload(seq, size), Timestamp: ts(seq)}
		p.Produce(ctx, r, func(r *client.Record, err error) {
			tp.mu.Lock()
			defer tp.mu.Unlock()
			if err != nil {
				tp.failed = append(tp.failed, err)
				return
			}
			tp.acked[seqOf(r.Value)] = r.Offset
		})
	}
}

// readAllRecords consumes partition 0 from a position to its end and checks
// every record: dense offsets, content that matches its sequence number.
func readAllRecords(ctx context.Context, t *testing.T, c *client.Client, topic string, from client.OffsetSpec, size int) []*client.Record {
	t.Helper()
	k := c.NewConsumer(client.WithStopAtEnd(true))
	defer k.Close()
	if err := k.Assign(topic, 0, from); err != nil {
		t.Fatal(err)
	}
	var out []*client.Record
	for {
		recs, err := k.Poll(ctx)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("consume %s: %v", topic, err)
		}
		for _, r := range recs {
			if n := len(out); n > 0 && r.Offset != out[n-1].Offset+1 {
				t.Fatalf("offset %d after %d", r.Offset, out[n-1].Offset)
			}
			if !bytes.Equal(r.Value, payload(seqOf(r.Value), size)) {
				t.Fatalf("record at offset %d differs from what was produced", r.Offset)
			}
			out = append(out, r)
		}
	}
}

// describeTier returns partition 0's tier figures.
func describeTier(ctx context.Context, t *testing.T, c *client.Client, topic string) (localBytes, coldBytes, lag int64, coldSegs int32, logStart, localStart, hw int64) {
	d, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	p := d.Partitions[0]
	return p.LocalBytes, p.ColdBytes, p.UploadLagBytes, p.ColdSegments, p.LogStartOffset, p.LocalStartOffset, p.HighWatermark
}

// scrape reads a broker's /metrics into a map of series to value.
func scrape(t testing.TB, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("bad metrics line %q", line)
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("bad metrics line %q", line)
		}
		out[name] = v
	}
	return out
}

// bucketObjects lists what MinIO really stores under prefix, read with
// minio-go, independently of Strata's code.
func bucketObjects(t *testing.T, m *miniotest.Server, prefix string) map[string]int64 {
	out := map[string]int64{}
	for o := range m.Client.ListObjects(context.Background(), m.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		out[o.Key] = o.Size
	}
	return out
}

// TestTieredHistoryReplays produces about 200 MB to a topic whose hot tier
// keeps a few 1 MiB segments, checks with minio-go that the segments and the
// manifest are in the bucket and the local disk holds only the hot tail,
// then reads everything back from offset 0 and from a time in the middle:
// every record, byte-identical, in order, across both tiers.
func TestTieredHistoryReplays(t *testing.T) {
	m := miniotest.Start(t)
	admin := freeport.Loopback(t)
	b := newBroker(t, 1, s3Flags(m, "--admin-listen", admin)...)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const (
		size  = 4000
		total = 50_000 // 200 MB
	)
	desc, err := c.CreateTopic(ctx, "history", 1, 1, map[string]string{
		"segment.bytes":         "1MiB",
		"local.retention.bytes": "4MiB",
		"local.retention.ms":    "-1",
		"retention.ms":          "-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	stamp := func(seq int64) time.Time { return base.Add(time.Duration(seq) * time.Millisecond) }
	tp := &tieredProducer{acked: map[int64]int64{}}
	p := newTieredProducer(c, client.WithAcks(stratav1.Acks_ACKS_LEADER))
	tp.produce(ctx, p, "history", 0, total, size, stamp)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if len(tp.failed) > 0 || len(tp.acked) != total {
		t.Fatalf("%d acknowledged, failures: %v", len(tp.acked), tp.failed)
	}

	// Uploads finish and local retention trims the hot tier, on disk too.
	onDisk := func() int64 {
		var n int64
		filepath.Walk(filepath.Join(b.dataDir, "logs"), func(path string, info os.FileInfo, err error) error {
			if err == nil && strings.HasSuffix(path, ".log") {
				n += info.Size()
			}
			return nil
		})
		return n
	}
	var localBytes, coldBytes, lag int64
	var coldSegs int32
	var logStart, localStart, hw int64
	testutil.WaitFor(t, 3*time.Minute, "uploads and local retention", func() bool {
		localBytes, coldBytes, lag, coldSegs, logStart, localStart, hw = describeTier(ctx, t, c, "history")
		return lag == 0 && localBytes <= 6<<20 && coldSegs > 150 && onDisk() <= 6<<20
	})
	if logStart != 0 || localStart == 0 || hw != total {
		t.Fatalf("log start %d, local start %d, high watermark %d", logStart, localStart, hw)
	}
	t.Logf("hot tier %d bytes from offset %d (%d on disk); cold tier %d segments, %d bytes", localBytes, localStart, onDisk(), coldSegs, coldBytes)

	// What the bucket really holds, read with minio-go.
	prefix := fmt.Sprintf("history/%s/0/", desc.Id)
	objects := bucketObjects(t, m, prefix)
	if _, ok := objects[prefix+"manifest"]; !ok {
		t.Fatalf("no manifest in the bucket under %s: %v", prefix, len(objects))
	}
	segs := 0
	var stored int64
	for k, size := range objects {
		if strings.HasPrefix(k, prefix+"segments/") {
			segs++
			stored += size
		}
	}
	if segs != int(coldSegs) || stored != coldBytes {
		t.Fatalf("bucket holds %d segment objects of %d bytes; describe says %d segments of %d", segs, stored, coldSegs, coldBytes)
	}

	// Replay from the start: every record, in order, byte-identical.
	start := time.Now()
	recs := readAllRecords(ctx, t, c, "history", client.Earliest(), size)
	took := time.Since(start)
	if len(recs) != total || recs[0].Offset != 0 {
		t.Fatalf("replayed %d records from offset %d, want %d from 0", len(recs), recs[0].Offset, total)
	}
	for i, r := range recs {
		if seqOf(r.Value) != int64(i) || tp.acked[int64(i)] != r.Offset {
			t.Fatalf("offset %d holds record %d", r.Offset, seqOf(r.Value))
		}
	}
	t.Logf("replayed %d records (%d MB) from both tiers in %v", len(recs), total*size/1_000_000, took)

	// The admin endpoint counts what the cold tier did: the replay read
	// every cold segment from the bucket (objects of ~1 MiB, smaller than
	// a 4 MiB chunk, so each comes whole in one GET).
	metrics := scrape(t, admin)
	if metrics["strata_cold_fetched_bytes_total"] <= 0 || metrics["strata_cold_gets_total"] < float64(coldSegs) || metrics[`strata_objstore_calls_total{op="create"}`] < float64(coldSegs) ||
		metrics["strata_upload_backlog_bytes"] != 0 {
		t.Fatalf("metrics after the replay: %v", metrics)
	}

	// From a time in the middle of the cold tier.
	mid := int64(total / 3)
	recs = readAllRecords(ctx, t, c, "history", client.AtTime(stamp(mid)), size)
	if len(recs) != total-int(mid) || seqOf(recs[0].Value) != mid {
		t.Fatalf("from the time of record %d: %d records starting with %d", mid, len(recs), seqOf(recs[0].Value))
	}
}

// TestStoreOutageThrottlesThenDrains stops MinIO while a producer writes:
// uploads stall, the sealed backlog passes tiering.max_unuploaded_bytes and
// produce is throttled; once MinIO is back the uploads drain, produce
// resumes, and every acknowledged record is readable.
func TestStoreOutageThrottlesThenDrains(t *testing.T) {
	m := miniotest.Start(t)
	b := newBroker(t, 1, s3Flags(m, "--tiering-max-unuploaded-bytes", "8MiB", "--topic-defaults", "segment.bytes=1MiB")...)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "outage", 1, 1, map[string]string{"segment.bytes": "1MiB", "local.retention.bytes": "2MiB"}); err != nil {
		t.Fatal(err)
	}
	const size = 2000
	now := func(int64) time.Time { return time.Time{} }
	tp := &tieredProducer{acked: map[int64]int64{}}
	p := newTieredProducer(c, client.WithAcks(stratav1.Acks_ACKS_LEADER), client.WithRetries(0))
	tp.produce(ctx, p, "outage", 0, 2000, size, now)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	m.Stop()
	// Keep producing until the broker says THROTTLED.
	seq := int64(2000)
	throttled := false
	deadline := time.Now().Add(2 * time.Minute)
	for !throttled && time.Now().Before(deadline) {
		tp.produce(ctx, p, "outage", seq, 500, size, now)
		seq += 500
		p.Flush(ctx)
		tp.mu.Lock()
		for _, err := range tp.failed {
			if errors.Is(err, client.ErrThrottled) {
				throttled = true
			} else {
				t.Fatalf("produce failed with %v while the store is down", err)
			}
		}
		tp.failed = nil
		tp.mu.Unlock()
	}
	if !throttled {
		t.Fatal("produce was never throttled while uploads could not drain")
	}
	_, _, lag, _, _, _, _ := describeTier(ctx, t, c, "outage")
	if lag <= 8<<20 {
		t.Fatalf("throttled with an upload lag of %d bytes", lag)
	}

	m.Restart()
	testutil.WaitFor(t, 2*time.Minute, "uploads to drain", func() bool {
		_, _, lag, _, _, _, _ := describeTier(ctx, t, c, "outage")
		return lag == 0
	})
	// Produce is accepted again (a producer that retries rides over the
	// moment the broker takes to notice the backlog is gone).
	p.Close()
	p = newTieredProducer(c, client.WithAcks(stratav1.Acks_ACKS_LEADER))
	tp.produce(ctx, p, "outage", seq, 100, size, now)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()
	tp.mu.Lock()
	if len(tp.failed) > 0 {
		t.Fatalf("produce after the store came back: %v", tp.failed)
	}
	tp.mu.Unlock()
	recs := readAllRecords(ctx, t, c, "outage", client.Earliest(), size)
	got := map[int64]int64{}
	for _, r := range recs {
		got[seqOf(r.Value)] = r.Offset
	}
	for s, off := range tp.acked {
		if got[s] != off {
			t.Fatalf("acknowledged record %d (offset %d) not read back", s, off)
		}
	}
	t.Logf("%d records acknowledged across the outage, all read back", len(tp.acked))
}

// TestKill9DuringUploadsKeepsManifestConsistent kills the broker with
// SIGKILL while it uploads, restarts it, and checks that the manifest lists
// contiguous segments with no duplicate or gap, that every record is
// readable, and that objects no manifest names are collected.
func TestKill9DuringUploadsKeepsManifestConsistent(t *testing.T) {
	m := miniotest.Start(t)
	b := newBroker(t, 1, s3Flags(m, "--tiering-orphan-grace", "1s")...)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	desc, err := c.CreateTopic(ctx, "crashy", 1, 1, map[string]string{"segment.bytes": "256KiB", "local.retention.bytes": "1MiB"})
	if err != nil {
		t.Fatal(err)
	}
	const size = 1000
	tp := &tieredProducer{acked: map[int64]int64{}}
	p := newTieredProducer(c)
	tp.produce(ctx, p, "crashy", 0, 20_000, size, func(int64) time.Time { return time.Time{} })
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()
	c.Close()
	// Kill while uploads are under way: some segments are in the bucket,
	// more are waiting.
	testutil.WaitFor(t, time.Minute, "uploads to start", func() bool {
		return len(bucketObjects(t, m, "crashy/")) > 3
	})
	b.kill9()
	// A stray object, as an upload cut short between its write and its
	// commit leaves.
	stray := fmt.Sprintf("crashy/%s/0/segments/%020d-0-deadbeefdeadbeef.seg", desc.Id, 0)
	if _, err := m.Client.PutObject(ctx, m.Bucket, stray, strings.NewReader("half an upload"), 14, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	b.start()
	c, err = client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testutil.WaitFor(t, 2*time.Minute, "uploads to finish after the restart", func() bool {
		_, _, lag, _, _, _, _ := describeTier(ctx, t, c, "crashy")
		return lag == 0
	})
	testutil.WaitFor(t, time.Minute, "the stray object to be collected", func() bool {
		_, ok := bucketObjects(t, m, "crashy/")[stray]
		return !ok
	})
	// The manifest, read independently: contiguous, no duplicates.
	obj, err := m.Client.GetObject(ctx, m.Bucket, fmt.Sprintf("crashy/%s/0/manifest", desc.Id), minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(obj)
	if err != nil {
		t.Fatal(err)
	}
	h, err := tiering.DecodeHead(data)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	next := int64(0)
	for _, s := range h.Tail {
		if seen[s.Key] || s.BaseOffset != next {
			t.Fatalf("manifest segment %s at %d, want %d (duplicate %v)", s.Key, s.BaseOffset, next, seen[s.Key])
		}
		seen[s.Key] = true
		next = s.LastOffset + 1
	}
	for k := range bucketObjects(t, m, fmt.Sprintf("crashy/%s/0/segments/", desc.Id)) {
		if !seen[k] {
			t.Fatalf("object %s is in the bucket but not in the manifest", k)
		}
	}
	recs := readAllRecords(ctx, t, c, "crashy", client.Earliest(), size)
	if len(recs) != 20_000 {
		t.Fatalf("read %d records, want 20000", len(recs))
	}
}

// TestRestoreFromBucketAlone wipes the broker's data dir (log and metadata)
// and restores the topic from the bucket: its full history replays.
func TestRestoreFromBucketAlone(t *testing.T) {
	m := miniotest.Start(t)
	b := newBroker(t, 1, s3Flags(m)...)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, "precious", 1, 1, map[string]string{"segment.bytes": "64KiB", "retention.ms": "-1", "segment.ms": "1s"}); err != nil {
		t.Fatal(err)
	}
	const size, total = 500, 3000
	tp := &tieredProducer{acked: map[int64]int64{}}
	p := newTieredProducer(c)
	tp.produce(ctx, p, "precious", 0, total, size, func(int64) time.Time { return time.Time{} })
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()
	// segment.ms seals the last segment too; wait until everything is cold.
	testutil.WaitFor(t, time.Minute, "the whole topic in the cold tier", func() bool {
		d, err := c.DescribeTopic(ctx, "precious")
		return err == nil && d.Partitions[0].ColdEndOffset == total
	})
	c.Close()
	b.stop()
	if err := os.RemoveAll(b.dataDir); err != nil {
		t.Fatal(err)
	}
	b.start()
	out := b.run(nil, "topic", "restore", "precious")
	if !strings.Contains(out, "precious") {
		t.Fatalf("restore printed %s", out)
	}
	c, err = client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := c.DescribeTopic(ctx, "precious")
	if err != nil || d.Config["segment.bytes"] != "65536" {
		t.Fatalf("restored topic: %v %v", d, err)
	}
	recs := readAllRecords(ctx, t, c, "precious", client.Earliest(), size)
	if len(recs) != total {
		t.Fatalf("restored history holds %d records, want %d", len(recs), total)
	}
	// New records continue the offsets.
	if err := c.NewProducer().ProduceSync(ctx, &client.Record{Topic: "precious", Partition: 0, Value: payload(total, size)}); err != nil {
		t.Fatal(err)
	}
	recs = readAllRecords(ctx, t, c, "precious", client.AtOffset(total), size)
	if len(recs) != 1 || recs[0].Offset != total {
		t.Fatalf("after restore a new record went to %v", recs)
	}
}

// TestCorruptObjectIsAnErrorNeverData flips one byte inside a batch of a
// segment object in the bucket: reading it gives CORRUPT_DATA, not data.
func TestCorruptObjectIsAnErrorNeverData(t *testing.T) {
	m := miniotest.Start(t)
	b := newBroker(t, 1, s3Flags(m)...)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	desc, err := c.CreateTopic(ctx, "fragile", 1, 1, map[string]string{"segment.bytes": "64KiB", "local.retention.bytes": "64KiB"})
	if err != nil {
		t.Fatal(err)
	}
	tp := &tieredProducer{acked: map[int64]int64{}}
	p := newTieredProducer(c)
	tp.produce(ctx, p, "fragile", 0, 2000, 500, func(int64) time.Time { return time.Time{} })
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()
	testutil.WaitFor(t, time.Minute, "local retention to move the start past offset 0", func() bool {
		_, _, _, _, _, localStart, _ := describeTier(ctx, t, c, "fragile")
		return localStart > 0
	})
	// Damage the first segment object, which holds offset 0.
	var first string
	for k := range bucketObjects(t, m, fmt.Sprintf("fragile/%s/0/segments/", desc.Id)) {
		if first == "" || k < first {
			first = k
		}
	}
	obj, err := m.Client.GetObject(ctx, m.Bucket, first, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(obj)
	data[200] ^= 0x5a // inside the first batch's records
	if _, err := m.Client.PutObject(ctx, m.Bucket, first, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	k := c.NewConsumer(client.WithStopAtEnd(true))
	defer k.Close()
	if err := k.Assign("fragile", 0, client.Earliest()); err != nil {
		t.Fatal(err)
	}
	recs, err := k.Poll(ctx)
	if len(recs) > 0 {
		t.Fatalf("a damaged object returned %d records", len(recs))
	}
	if !errors.Is(err, client.ErrCorruptData) || !strings.Contains(err.Error(), first) {
		t.Fatalf("reading a damaged object: %v; want CORRUPT_DATA naming %s", err, first)
	}
}
