package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// coldHistory is a topic's history as produced through the Kafka
// listener: old records months in the past, now only in the bucket, then
// a young tail that is also on local disk.
type coldHistory struct {
	topic  string
	old    int     // records 0..old-1 are months old
	total  int     // records old..total-1 are young
	stamps []int64 // each record's CreateTime, in ms
}

func (h *coldHistory) key(i int) string { return fmt.Sprintf("k%05d", i) }

// value is record i's value: printable, one line, and long enough that the
// history spans many 64 KiB segments.
func (h *coldHistory) value(i int) string {
	r := rand.New(rand.NewPCG(uint64(i), 11))
	v := make([]byte, 500) // random letters: the producer's compression leaves most
	for j := range v {
		v[j] = byte('a' + r.IntN(26))
	}
	return fmt.Sprintf("v%05d-%s", i, v)
}

// TestKafkaReplaysHistoryFromTheBucket: a Kafka producer (kgo) writes
// records whose CreateTime is two to four months in the past to a tiered
// topic created over the Kafka protocol, then a young tail. The old
// segments move to MinIO and leave the local disk (checked on disk, in
// the bucket with minio-go, and in describe); then, against one
// `strata serve` process:
//   - kcat -C -o s@T -e reads exactly the records from T on, in order,
//     with their keys, values and timestamps, from the bucket and on into
//     the hot tail; kcat -Q -t topic:0:T answers the offset;
//   - kadm's ListOffsetsAfterMilli answers the same offset from the cold
//     tier, and a kgo consumer started there reads the cold records;
//   - ListOffsets -5 (latest tiered) and -4 (earliest local) name where
//     the tiers split, as the bucket's manifest and the local disk show.
//
// The topic's settings are those a Kafka user backfilling months of
// history needs: retention.ms=-1 (the default 7 days would delete
// months-old segments at once, since time retention goes by a segment's
// largest record time), message.timestamp.before.max.ms=-1 (Strata's
// default too; a bound refuses the backfill, which the test also shows),
// remote.storage.enable=true, segment.bytes=64KiB, local.retention.ms=1h
// (a segment whose records are all older than that leaves local disk as
// soon as it is uploaded; the young tail stays), remote.max.lag.ms=1s
// (the last segment is sealed and uploaded without waiting for
// segment.ms).
func TestKafkaReplaysHistoryFromTheBucket(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat not found (apt-get install -y kcat; make tools does it): %v", err)
	}
	m := miniotest.Start(t)
	admin, kafkaAddr := freeport.Loopback(t), freeport.Loopback(t)
	b := newBroker(t, 1, s3Flags(m, "--admin-listen", admin, "--kafka-listen", kafkaAddr)...)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Batches far smaller than a segment: a log rolls only between batches.
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.ProducerBatchMaxBytes(8<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	h := &coldHistory{topic: "ledger", old: 2000, total: 2040}
	base := time.Now().Add(-120 * 24 * time.Hour).Truncate(time.Millisecond)
	for i := range h.total {
		ts := base.Add(time.Duration(i) * 30 * time.Minute) // record 1999 is 78 days old
		if i >= h.old {
			ts = time.Now().Truncate(time.Millisecond)
		}
		h.stamps = append(h.stamps, ts.UnixMilli())
	}
	settings := map[string]*string{}
	for k, v := range map[string]string{
		"remote.storage.enable":           "true",
		"retention.ms":                    "-1",
		"message.timestamp.before.max.ms": "-1",
		"segment.bytes":                   "65536",
		"local.retention.ms":              "3600000",
		"remote.max.lag.ms":               "1000",
	} {
		settings[k] = &v
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, settings, h.topic); err != nil {
		t.Fatal(err)
	}
	// A topic that bounds how old a record may be refuses the backfill.
	strict := "30d"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"message.timestamp.before.max.ms": &strict}, "strict"); err != nil {
		t.Fatal(err)
	}
	r := &kgo.Record{Topic: "strict", Value: []byte("old"), Timestamp: time.UnixMilli(h.stamps[0])}
	if err := cl.ProduceSync(ctx, r).FirstErr(); !errors.Is(err, kerr.InvalidTimestamp) {
		t.Fatalf("a record 120 days old to a topic with message.timestamp.before.max.ms=30d: %v, want INVALID_TIMESTAMP", err)
	}

	produce := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: h.topic, Key: []byte(h.key(i)), Value: []byte(h.value(i)), Timestamp: time.UnixMilli(h.stamps[i])})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, h.old)
	// The old history leaves local disk for the bucket, all of it.
	testutil.WaitFor(t, 2*time.Minute, "the months-old history only in the bucket", func() bool {
		_, _, lag, _, _, localStart, hw := describeTier(ctx, t, c, h.topic)
		return lag == 0 && hw == int64(h.old) && localStart == hw
	})
	produce(h.old, h.total)
	// The young tail is uploaded too (remote.max.lag.ms) and stays local.
	var coldSegs int32
	var logStart, localStart, hw int64
	testutil.WaitFor(t, 2*time.Minute, "the young tail in both tiers", func() bool {
		d, err := c.DescribeTopic(ctx, h.topic)
		if err != nil {
			return false
		}
		p := d.Partitions[0]
		coldSegs, logStart, localStart, hw = p.ColdSegments, p.LogStartOffset, p.LocalStartOffset, p.HighWatermark
		return p.UploadLagBytes == 0 && p.ColdEndOffset == int64(h.total) && hw == int64(h.total)
	})
	if logStart != 0 || localStart != int64(h.old) || coldSegs < 10 {
		t.Fatalf("log start %d, local start %d, %d cold segments; want 0, %d and many", logStart, localStart, coldSegs, h.old)
	}
	// On disk: no segment file holds an old record.
	id := topicID(ctx, t, c, h.topic)
	files, _ := filepath.Glob(filepath.Join(b.dataDir, "logs", h.topic+"-"+id, "0", "*.log"))
	if len(files) == 0 {
		t.Fatalf("no local segment files of %s", h.topic)
	}
	for _, f := range files {
		if base, _ := strconv.ParseInt(strings.TrimSuffix(filepath.Base(f), ".log"), 10, 64); base < int64(h.old) {
			t.Fatalf("local segment %s holds offsets below %d", f, h.old)
		}
	}
	// In the bucket, read with minio-go: the manifest ends at the high
	// watermark and its segments start at offset 0.
	head := bucketHead(t, m, h.topic, id, 0)
	if head.StartOffset() != 0 || head.EndOffset() != int64(h.total) {
		t.Fatalf("the bucket's manifest holds offsets %d to %d, want 0 to %d", head.StartOffset(), head.EndOffset(), h.total)
	}

	// kcat from a time between records 776 and 777: from 777 on.
	const first = 777
	at := h.stamps[first] - 1
	before := scrape(t, admin)
	out := runKcat(ctx, t, kcat, "-b", kafkaAddr, "-C", "-t", h.topic, "-p", "0", "-o", fmt.Sprintf("s@%d", at), "-e", "-q",
		"-f", `%k\t%s\t%T\t%o\n`)
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(got) != h.total-first {
		t.Fatalf("kcat -o s@%d read %d records, want %d (records %d to %d)", at, len(got), h.total-first, first, h.total-1)
	}
	for j, line := range got {
		i := first + j
		if want := fmt.Sprintf("%s\t%s\t%d\t%d", h.key(i), h.value(i), h.stamps[i], i); line != want {
			t.Fatalf("kcat record %d:\n got %.80q\nwant %.80q", j, line, want)
		}
	}
	after := scrape(t, admin)
	if d := after["strata_cold_fetched_bytes_total"] - before["strata_cold_fetched_bytes_total"]; d < 500_000 {
		t.Fatalf("kcat's replay fetched %.0f bytes from the bucket, want the cold history's", d)
	}
	for _, q := range []struct{ at, offset int64 }{{at, first}, {h.stamps[0] - 1000, 0}, {h.stamps[h.old-1], int64(h.old - 1)}, {time.Now().Add(time.Hour).UnixMilli(), -1}} {
		out := runKcat(ctx, t, kcat, "-b", kafkaAddr, "-Q", "-t", fmt.Sprintf("%s:0:%d", h.topic, q.at))
		if want := fmt.Sprintf("%s [0] offset %d", h.topic, q.offset); !strings.Contains(out, want) {
			t.Errorf("kcat -Q -t %s:0:%d: %q, want %q", h.topic, q.at, out, want)
		}
	}

	// kadm: the offset for the time, from the cold tier.
	listed, err := adm.ListOffsetsAfterMilli(ctx, at, h.topic)
	if err != nil {
		t.Fatal(err)
	}
	lo, ok := listed.Lookup(h.topic, 0)
	if !ok || lo.Err != nil || lo.Offset != first || lo.Timestamp != h.stamps[first] {
		t.Fatalf("ListOffsetsAfterMilli(%d) = %+v, want offset %d at %d", at, lo, first, h.stamps[first])
	}
	// A kgo consumer from there reads the cold records as produced.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{h.topic: {0: kgo.NewOffset().At(lo.Offset)}}))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	for next := first; next < h.old; {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("kgo read records %d to %d of the cold history, then: %v", first, next-1, ctx.Err())
		}
		if err := fs.Err(); err != nil {
			t.Fatalf("kgo fetch: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if next >= h.old {
				return
			}
			i := next
			if r.Offset != int64(i) || string(r.Key) != h.key(i) || string(r.Value) != h.value(i) || r.Timestamp.UnixMilli() != h.stamps[i] {
				t.Fatalf("kgo read offset %d key %q at %d, want offset %d key %q at %d", r.Offset, r.Key, r.Timestamp.UnixMilli(), i, h.key(i), h.stamps[i])
			}
			next++
		})
	}

	// -5 and -4: the cold tier ends at the high watermark, the hot tier
	// starts where the old history ended.
	tiered, local := listSpecial(ctx, t, cl, h.topic, -5), listSpecial(ctx, t, cl, h.topic, -4)
	if tiered != head.EndOffset()-1 || local != localStart || local != int64(h.old) {
		t.Fatalf("ListOffsets -5 = %d, -4 = %d; the manifest ends at %d, the hot tier starts at %d", tiered, local, head.EndOffset(), localStart)
	}
}

// runKcat runs kcat and returns what it printed; it fails the test on an
// error or a protocol error in the output.
func runKcat(ctx context.Context, t *testing.T, kcat string, args ...string) string {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(rctx, kcat, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || strings.Contains(stderr.String(), "ERROR") {
		t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// listSpecial asks ListOffsets for one of Kafka's special times of
// partition 0 (at the highest version both sides speak, v9 or later).
func listSpecial(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, ts int64) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil || resp.Version < 9 {
		t.Fatalf("ListOffsets v%d %d: %v", resp.Version, ts, err)
	}
	return p.Offset
}

// topicID is a topic's id, as its local directory and bucket keys name it.
func topicID(ctx context.Context, t *testing.T, c *client.Client, topic string) string {
	t.Helper()
	d, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return d.Id
}
