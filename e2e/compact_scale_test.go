package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// compactScaleUpdates is how many updates TestCompactedTopicAtScaleThroughBothTiers
// writes: the million (1-2.5 minutes on the shared 2-core machine,
// -race included), or STRATA_COMPACT_UPDATES for a quicker run.
func compactScaleUpdates(t *testing.T) int {
	s := os.Getenv("STRATA_COMPACT_UPDATES")
	if s == "" {
		return 1_000_000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 20_000 {
		t.Fatalf("STRATA_COMPACT_UPDATES=%q: want a number of updates of at least 20000", s)
	}
	return n
}

// bucketUsage is what MinIO stores under a prefix, listed with minio-go.
type bucketUsage struct{ objects, bytes int64 }

func usageOf(t *testing.T, m *miniotest.Server, prefix string) bucketUsage {
	var u bucketUsage
	for _, size := range bucketObjects(t, m, prefix) {
		u.objects++
		u.bytes += size
	}
	return u
}

// TestCompactedTopicAtScaleThroughBothTiers: three brokers with MinIO hold
// a compacted topic with remote storage, three replicas, small segments
// and a small local retention. A million updates of 10,000 keys
// (STRATA_COMPACT_UPDATES to change) are written with
// min.compaction.lag.ms=1h, so the whole history is uploaded uncleaned;
// half-way some keys are tombstoned and never written again. The lag is then set to 0: both
// tiers clean, and the leader is killed with SIGKILL while its cleaner is
// mid-pass, then restarted. Once delete.retention.ms has passed, a last
// round of updates makes the log dirty again so a cleaning removes the
// tombstones. Then the partition, read from offset 0 over gRPC and over
// the Kafka listener, through the bucket (local segments trimmed far
// above 0, cold reads counted by the leader's metrics), gives every live
// key's last value in increasing offsets, no tombstoned key at all, and
// fewer than twice the live keys plus the last round's records; the
// bucket's bytes and objects of the partition end far below the
// history's. bucket verify passes on the compacted tier, and restores of
// it cut at an offset and at a time hold the records written below the
// cut, among them every key's last value there. It logs bucket bytes and
// objects before and after, and the cleaners' MB/s and CPU per GB.
func TestCompactedTopicAtScaleThroughBothTiers(t *testing.T) {
	began := time.Now()
	updates := compactScaleUpdates(t)
	const (
		topic      = "kv"
		keys       = 10_000
		tombstones = 500 // keys 0..499 are tombstoned half-way
		nudge      = 2_000
		retention  = 5 * time.Second // delete.retention.ms
	)
	m := miniotest.Start(t)
	tc := &testCluster{t: t, m: m}
	for range 3 {
		tc.gossip = append(tc.gossip, freeport.Loopback(t))
	}
	admins := map[int32]string{}
	var kafkaAddrs []string
	for i := range 3 {
		admin, kafka := freeport.Loopback(t), freeport.Loopback(t)
		admins[int32(i+1)] = admin
		kafkaAddrs = append(kafkaAddrs, kafka)
		// The throttle stretches the hot cleaner's pass over seconds, so
		// the kill below lands inside one.
		tc.brokers = append(tc.brokers, tc.newMember(i+1, tc.gossip[i],
			"--admin-listen", admin, "--kafka-listen", kafka,
			"--cleaner-backoff", "1s", "--cleaner-io-max-bytes-per-second", "4MiB",
			"--tiering-retired-grace", "3s"))
	}
	tc.start()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c, err := client.New(ctx, tc.addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	desc, err := c.CreateTopic(ctx, topic, 1, 3, map[string]string{
		"cleanup.policy":            "compact",
		"remote.storage.enable":     "true",
		"segment.bytes":             "256KiB",
		"local.retention.bytes":     "1MiB",
		"local.retention.ms":        "-1",
		"remote.max.lag.ms":         "1s",
		"min.insync.replicas":       "2",
		"min.cleanable.dirty.ratio": "0.1",
		"min.compaction.lag.ms":     "3600000",
		"delete.retention.ms":       strconv.Itoa(int(retention.Milliseconds())),
	})
	if err != nil {
		t.Fatal(err)
	}
	tc.waitInSync(ctx, time.Minute, "the compacted topic's replicas in sync")

	// model is each key's last acknowledged value; tombstoned keys are
	// left out once their tombstone is sent, since none may be read.
	model := map[string][]byte{}
	var (
		mu     sync.Mutex
		failed error
	)
	keyOf := func(i int) string { return fmt.Sprintf("key-%05d", i) }
	// wroteAt is the record the producer sent at each offset: one
	// idempotent producer's records take offsets in the order sent.
	wroteAt := func(offset int64) (key string, value []byte) {
		half, end := int64(updates/2), int64(updates+tombstones)
		switch {
		case offset < half:
			return keyOf(int(offset) % keys), fmt.Appendf(nil, "v%07d", offset)
		case offset < half+tombstones:
			return keyOf(int(offset - half)), nil
		case offset < end:
			seq := int(offset - tombstones)
			return keyOf(tombstones + seq%(keys-tombstones)), fmt.Appendf(nil, "v%07d", seq)
		default:
			seq := int(offset - end)
			return keyOf(tombstones + seq*7%(keys-tombstones)), fmt.Appendf(nil, "n%07d", seq)
		}
	}
	produce := func(n int, prefix string, keyAt func(seq int) int, tombstoneAt int) {
		p := c.NewProducer(client.WithBatchBytes(16<<10), client.WithLinger(5*time.Millisecond))
		defer p.Close()
		send := func(key string, value []byte) {
			p.Produce(ctx, &client.Record{Topic: topic, Partition: 0, Key: []byte(key), Value: value}, func(_ *client.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil && failed == nil {
					failed = err
				}
			})
		}
		for seq := range n {
			if seq == tombstoneAt {
				for k := range tombstones {
					send(keyOf(k), nil)
					delete(model, keyOf(k))
				}
			}
			k := keyOf(keyAt(seq))
			v := fmt.Appendf(nil, "%s%07d", prefix, seq)
			model[k] = v
			send(k, v)
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if failed != nil {
			t.Fatalf("a produce failed: %v", failed)
		}
	}
	// The first half writes every key in turn, the second only those never
	// tombstoned.
	produce(updates, "v", func(seq int) int {
		if seq < updates/2 {
			return seq % keys
		}
		return tombstones + seq%(keys-tombstones)
	}, updates/2)
	written := int64(updates + tombstones)
	produced := time.Since(began)

	// Before cleaning: the whole history uploaded, nothing cleaned.
	partPrefix := fmt.Sprintf("%s/%s/0/", topic, desc.Id)
	segPrefix := partPrefix + "segments/"
	testutil.WaitFor(t, 3*time.Minute, "the whole history uploaded", func() bool {
		d, err := c.DescribeTopic(ctx, topic)
		return err == nil && d.Partitions[0].ColdEndOffset == written && d.Partitions[0].HighWatermark == written
	})
	before, beforeAll := usageOf(t, m, segPrefix), usageOf(t, m, partPrefix)
	t.Logf("%d records of %d keys produced in %v; bucket before cleaning: %d segment objects, %d bytes (%d objects, %d bytes under the partition's prefix)",
		written, keys, produced.Round(time.Millisecond), before.objects, before.bytes, beforeAll.objects, beforeAll.bytes)

	// Clean from now on, and kill the leader while its cleaner is reading:
	// its read counter moves between two scrapes.
	leader := tc.leaderOf(ctx, topic, 0)
	cpuAtAlter := map[int]time.Duration{}
	for _, b := range tc.brokers {
		if used, err := cpuTime(b.cmd.Process.Pid); err == nil {
			cpuAtAlter[b.id] = used
		}
	}
	if _, err := c.AlterTopicConfig(ctx, topic, map[string]string{"min.compaction.lag.ms": "0"}, nil); err != nil {
		t.Fatal(err)
	}
	cleanFrom := time.Now()
	var lastRead float64
	testutil.WaitFor(t, 2*time.Minute, fmt.Sprintf("broker %d's cleaner reading", leader), func() bool {
		read := scrape(t, admins[leader])["strata_cleaner_bytes_read_total"]
		moving := lastRead > 0 && read > lastRead
		lastRead = read
		return moving
	})
	victim := tc.byID(leader)
	atKill := scrape(t, admins[leader])
	victim.kill9()
	t.Logf("killed leader %d while cleaning: its hot cleaner had read %.0f bytes in %.0f passes, its cold cleaner had made %.0f passes",
		leader, atKill["strata_cleaner_bytes_read_total"], atKill["strata_cleaner_passes_total"], atKill["strata_cold_cleaner_passes_total"])
	newLeader := tc.leaderOf(ctx, topic, 0, leader)
	victim.start()
	tc.waitInSync(ctx, 2*time.Minute, "the restarted broker back in sync")

	// The new leader compacts the bucket; the retired objects go after
	// their grace, so the bucket holds what the manifest names.
	var after, afterAll bucketUsage
	testutil.WaitFor(t, 5*time.Minute, "the cold tier compacted in the bucket", func() bool {
		_, coldBytes, lag, _, _, _, _ := describeTier(ctx, t, c, topic)
		after = usageOf(t, m, segPrefix)
		return lag == 0 && coldBytes > 0 && after.bytes == coldBytes && after.bytes < before.bytes/5
	})
	afterAll = usageOf(t, m, partPrefix)
	cleaned := time.Since(cleanFrom)
	// The CPU the brokers not killed used from the change of the lag to
	// here, per GB both their cleaners cleaned: an upper bound, since the
	// window also holds replication, the restarted broker's catch-up and
	// the uploads.
	var cpu strings.Builder
	for _, b := range tc.brokers {
		if b == victim {
			continue
		}
		used, err := cpuTime(b.cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		mm := scrape(t, admins[int32(b.id)])
		gb := (mm["strata_cleaner_bytes_cleaned_total"] + mm["strata_cold_cleaner_bytes_in_total"]) / 1e9
		used -= cpuAtAlter[b.id]
		fmt.Fprintf(&cpu, " broker %d: %.2f CPU-s for %.1f MB cleaned (%.1f CPU-s per GB);", b.id, used.Seconds(), gb*1e3, used.Seconds()/max(gb, 1e-9))
	}
	t.Logf("CPU while cleaning:%s", cpu.String())
	t.Logf("bucket after cleaning: %d segment objects, %d bytes (%d objects, %d bytes under the partition's prefix): %.4fx the bytes, %.4fx the objects, %v after cleaning was allowed",
		after.objects, after.bytes, afterAll.objects, afterAll.bytes, float64(after.bytes)/float64(before.bytes),
		float64(after.objects)/float64(before.objects), cleaned.Round(time.Millisecond))

	// Every broker's hot cleaner has cleaned, the restarted one since its
	// restart (its counters start from zero).
	testutil.WaitFor(t, 3*time.Minute, "a hot cleaning on every broker", func() bool {
		for id := range int32(3) {
			mm := scrape(t, admins[id+1])
			if mm["strata_cleaner_passes_total"] < 1 || mm["strata_cleaner_bytes_cleaned_total"] <= 0 {
				return false
			}
		}
		return true
	})

	// Tombstones go once a cleaning runs delete.retention.ms after one
	// first covered them, and the cleanings above have: wait that long,
	// then make the log dirty again so that another cleaning runs.
	<-time.After(retention + time.Second)
	produce(nudge, "n", func(seq int) int { return tombstones + seq*7%(keys-tombstones) }, -1)
	written += nudge
	testutil.WaitFor(t, 2*time.Minute, "the last round uploaded", func() bool {
		d, err := c.DescribeTopic(ctx, topic)
		return err == nil && d.Partitions[0].ColdEndOffset == written && d.Partitions[0].HighWatermark == written
	})
	live := keys - tombstones
	bound := 2*live + nudge

	// Read through the bucket: local segments start far above 0, and the
	// leader's cold reads grow while it serves the read.
	var viaGRPC []keyedValue
	var coldReads float64
	coldReadsOf := func() float64 {
		mm := scrape(t, admins[newLeader])
		return mm["strata_cold_chunk_hits_total"] + mm["strata_cold_chunk_misses_total"]
	}
	testutil.WaitFor(t, 3*time.Minute, "a read from 0 without tombstoned keys and about one record per live key", func() bool {
		if l := tc.leaderOf(ctx, topic, 0); l != newLeader {
			t.Fatalf("the leader moved from %d to %d", newLeader, l)
		}
		coldReads = coldReadsOf()
		viaGRPC = readGRPC(ctx, t, c, topic)
		if len(viaGRPC) >= bound {
			return false
		}
		for _, r := range viaGRPC {
			if _, ok := model[string(r.key)]; !ok {
				return false
			}
		}
		return true
	})
	if got := coldReadsOf(); got <= coldReads {
		t.Fatalf("leader %d's cold reads stayed at %.0f while it served a read from offset 0", newLeader, got)
	}
	_, _, _, _, logStart, localStart, hwm := describeTier(ctx, t, c, topic)
	if logStart != 0 || localStart < written/2 || hwm != written {
		t.Fatalf("log start %d, local start %d, high watermark %d: want 0, at least %d (the read went through the bucket) and %d",
			logStart, localStart, hwm, written/2, written)
	}
	checkCompacted(t, "gRPC", viaGRPC, model, hwm)
	coldReads = coldReadsOf()
	viaKafka := readKafka(ctx, t, kafkaAddrs, topic, hwm)
	checkCompacted(t, "Kafka", viaKafka, model, hwm)
	if len(viaKafka) >= bound {
		t.Fatalf("Kafka: read %d records, want fewer than %d", len(viaKafka), bound)
	}
	if got := coldReadsOf(); got <= coldReads {
		t.Fatalf("leader %d's cold reads stayed at %.0f while it served a Kafka read from offset 0", newLeader, got)
	}
	t.Logf("written %d records of %d keys (%d tombstoned); read back from offset 0 %d over gRPC and %d over Kafka (%d live keys, bound %d); local segments start at %d of %d",
		written, keys, tombstones, len(viaGRPC), len(viaKafka), live, bound, localStart, hwm)

	// bucket verify checks every object the compacted head names, records
	// and epochs included. restore copies the compacted cold tier cut at
	// an offset and at a time inside it. A copy of a compacted tier holds
	// what the tier held below the cut: only records written there (each
	// at the offset it was written at), in increasing offsets, and among
	// them every key's last value that lies below the cut; verify passes
	// on each copy too.
	verify := func(topic string) {
		t.Helper()
		args := append([]string{"bucket", "verify", "--topic", topic, "--records", "--quiet"}, s3Flags(m)...)
		if out, err := exec.Command(strataBin(t), args...).CombinedOutput(); err != nil {
			t.Fatalf("bucket verify of %s: %v\n%s", topic, err, out)
		}
	}
	verify(topic)
	source := readTimed(ctx, t, c, topic)
	lastOf := map[string]*client.Record{}
	for _, r := range source {
		checkWritten(t, topic, r, written, wroteAt)
		lastOf[string(r.Key)] = r
	}
	cutAt := source[len(source)/3]
	mustStrata(t, tc.byID(newLeader), "", "topic", "restore", topic, "--as", "kv-to-offset", "--to-offset", fmt.Sprint(cutAt.Offset))
	mustStrata(t, tc.byID(newLeader), "", "topic", "restore", topic, "--as", "kv-to-time", "--to-time", fmt.Sprintf("@%d", cutAt.Timestamp.UnixMilli()))
	checkCopy := func(copy string, in func(r *client.Record) bool) {
		t.Helper()
		got := readTimed(ctx, t, c, copy)
		held := map[int64]*client.Record{}
		for _, r := range got {
			if !in(r) {
				t.Fatalf("%s holds offset %d (time %v), past the cut", copy, r.Offset, r.Timestamp)
			}
			checkWritten(t, copy, r, written, wroteAt)
			held[r.Offset] = r
		}
		kept := 0
		for _, want := range lastOf {
			if !in(want) {
				continue
			}
			kept++
			if r, ok := held[want.Offset]; !ok || !bytes.Equal(r.Value, want.Value) || !r.Timestamp.Equal(want.Timestamp) {
				t.Fatalf("%s lacks key %s's last value %q at offset %d, below the cut", copy, want.Key, want.Value, want.Offset)
			}
		}
		if kept == 0 || len(got) >= bound {
			t.Fatalf("%s holds %d records, %d of them last values: want some and fewer than %d", copy, len(got), kept, bound)
		}
		verify(copy)
		t.Logf("%s: %d records, %d keys' last values below the cut", copy, len(got), kept)
	}
	checkCopy("kv-to-offset", func(r *client.Record) bool { return r.Offset < cutAt.Offset })
	checkCopy("kv-to-time", func(r *client.Record) bool { return !r.Timestamp.After(cutAt.Timestamp) })

	// The cleaners' figures, from each broker's metrics (the restarted
	// broker's since its restart). The hot cleaner's MB/s is bound by
	// --cleaner-io-max-bytes-per-second; the cold cleaner is not throttled.
	var cold, hot strings.Builder
	for _, b := range tc.brokers {
		mm := scrape(t, admins[int32(b.id)])
		hotBytes, hotSecs := mm["strata_cleaner_bytes_cleaned_total"], mm["strata_cleaner_seconds_total"]
		coldBytes, coldSecs := mm["strata_cold_cleaner_bytes_in_total"], mm["strata_cold_cleaner_seconds_total"]
		fmt.Fprintf(&hot, " broker %d: %.1f MB in %.1f s (%.1f MB/s);", b.id, hotBytes/1e6, hotSecs, hotBytes/1e6/max(hotSecs, 1e-9))
		fmt.Fprintf(&cold, " broker %d: %.0f passes, %.1f MB in, %.2f MB out, %.1f s (%.1f MB/s), %.0f retired objects deleted;", b.id,
			mm["strata_cold_cleaner_passes_total"], coldBytes/1e6, mm["strata_cold_cleaner_bytes_out_total"]/1e6, coldSecs,
			coldBytes/1e6/max(coldSecs, 1e-9), mm["strata_cold_cleaner_retired_deleted_total"])
	}
	t.Logf("hot cleaner:%s", hot.String())
	t.Logf("cold cleaner:%s", cold.String())
	t.Logf("wall time %v", time.Since(began).Round(time.Second))
}

// readTimed reads partition 0 of topic from its start to its end with the
// Go client, timestamps included.
func readTimed(ctx context.Context, t *testing.T, c *client.Client, topic string) []*client.Record {
	t.Helper()
	k := c.NewConsumer(client.WithStopAtEnd(true))
	defer k.Close()
	if err := k.Assign(topic, 0, client.Earliest()); err != nil {
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
		out = append(out, recs...)
	}
}

// checkWritten fails unless r is the record the producer wrote at its
// offset, below written.
func checkWritten(t *testing.T, via string, r *client.Record, written int64, wroteAt func(int64) (string, []byte)) {
	t.Helper()
	key, value := wroteAt(r.Offset)
	if r.Offset >= written || string(r.Key) != key || !bytes.Equal(r.Value, value) {
		t.Fatalf("%s: offset %d holds %s=%q, but %s=%q was written there", via, r.Offset, r.Key, r.Value, key, value)
	}
}
