package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// keyedValue is one record as a reader sees it: its offset, key and value
// (nil for a tombstone).
type keyedValue struct {
	offset     int64
	key, value []byte
}

// TestCompactedTopicSurvivesLeaderKillWhileCleaning: three broker processes
// hold a compacted topic with three replicas and small segments; a producer
// writes many updates of a fixed key set, then tombstones for some keys. Once
// the leader's cleaner is reading the dirty log, the leader is killed with
// SIGKILL and restarted. Reading the partition from offset 0 to the high
// watermark, over gRPC and over the Kafka listener, gives each key's last
// value (a tombstoned key only as its tombstone, within
// delete.retention.ms), in increasing offsets, and far fewer records than
// were written; every replica's log agrees with the leader's on every
// offset both hold.
func TestCompactedTopicSurvivesLeaderKillWhileCleaning(t *testing.T) {
	const (
		topic      = "kv"
		keys       = 2000
		updates    = 200_000
		tombstones = 100 // keys 0..99 end with a tombstone
	)
	m := miniotest.Start(t)
	tc := &testCluster{t: t, m: m}
	for range 3 {
		tc.gossip = append(tc.gossip, freeport.Loopback(t))
	}
	admins := map[int32]string{}
	kafkaAddrs := []string{}
	for i := range 3 {
		admin, kafka := freeport.Loopback(t), freeport.Loopback(t)
		admins[int32(i+1)] = admin
		kafkaAddrs = append(kafkaAddrs, kafka)
		// The throttle stretches a cleaning over seconds, so the kill
		// below lands while one is in progress.
		tc.brokers = append(tc.brokers, tc.newMember(i+1, tc.gossip[i],
			"--admin-listen", admin, "--kafka-listen", kafka,
			"--cleaner-backoff", "200ms", "--cleaner-io-max-bytes-per-second", "4MiB"))
	}
	tc.start()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.New(ctx, tc.addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	desc, err := c.CreateTopic(ctx, topic, 1, 3, map[string]string{
		"cleanup.policy": "compact", "remote.storage.enable": "false",
		"segment.bytes": "256KiB", "min.insync.replicas": "2",
		"min.cleanable.dirty.ratio": "0.1",
	})
	if err != nil {
		t.Fatal(err)
	}
	tc.waitInSync(ctx, time.Minute, "the compacted topic's replicas in sync")

	// The model: each key's last acknowledged value, nil for a tombstone.
	model := map[string][]byte{}
	p := c.NewProducer(client.WithLinger(5 * time.Millisecond))
	var (
		mu     sync.Mutex
		failed error
	)
	send := func(key string, value []byte) {
		model[key] = value
		p.Produce(ctx, &client.Record{Topic: topic, Partition: 0, Key: []byte(key), Value: value}, func(_ *client.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && failed == nil {
				failed = err
			}
		})
	}
	keyOf := func(i int) string { return fmt.Sprintf("key-%04d", i) }
	for seq := range updates {
		send(keyOf(seq%keys), []byte(fmt.Sprintf("value-%07d-of-%s", seq, keyOf(seq%keys))))
	}
	for k := range tombstones {
		send(keyOf(k), nil)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()
	mu.Lock()
	defer mu.Unlock()
	if failed != nil {
		t.Fatalf("a produce failed: %v", failed)
	}
	written := updates + tombstones

	// Kill the leader while its cleaner is reading: its read counter moves
	// between two scrapes.
	leader := tc.leaderOf(ctx, topic, 0)
	var lastRead float64
	testutil.WaitFor(t, time.Minute, fmt.Sprintf("broker %d's cleaner reading", leader), func() bool {
		read := scrape(t, admins[leader])["strata_cleaner_bytes_read_total"]
		moving := lastRead > 0 && read > lastRead
		lastRead = read
		return moving
	})
	victim := tc.byID(leader)
	victim.kill9()
	t.Logf("killed leader %d after its cleaner read %.0f bytes", leader, lastRead)
	tc.leaderOf(ctx, topic, 0, leader)
	victim.start()
	tc.waitInSync(ctx, time.Minute, "the restarted broker back in sync")

	// Every broker has cleaned since: the restarted one counts from zero.
	testutil.WaitFor(t, 2*time.Minute, "a cleaning finished on every broker", func() bool {
		for id := range int32(3) {
			mm := scrape(t, admins[id+1])
			if mm["strata_cleaner_passes_total"] < 1 || mm["strata_cleaner_bytes_cleaned_total"] <= 0 {
				return false
			}
		}
		return true
	})
	hwm, err := c.ListOffsets(ctx, topic, 0, client.Latest())
	if err != nil {
		t.Fatal(err)
	}
	if hwm != int64(written) {
		t.Fatalf("high watermark %d, want %d: every update was acknowledged", hwm, written)
	}

	// The leader may still be cleaning what was dirty; wait until what a
	// reader sees is compacted, then check it exactly.
	var viaGRPC []keyedValue
	testutil.WaitFor(t, 2*time.Minute, "the leader's log compacted to under a tenth of what was written", func() bool {
		viaGRPC = readGRPC(ctx, t, c, topic)
		return len(viaGRPC) < written/10
	})
	checkCompacted(t, "gRPC", viaGRPC, model, hwm)
	viaKafka := readKafka(ctx, t, kafkaAddrs, topic, hwm)
	checkCompacted(t, "Kafka", viaKafka, model, hwm)
	t.Logf("written %d records of %d keys (%d tombstones); read back %d over gRPC, %d over Kafka, high watermark %d",
		written, keys, tombstones, len(viaGRPC), len(viaKafka), hwm)

	// Every replica agrees with the others on every offset both hold, and
	// each holds every key's last value. Replicas clean on their own
	// schedules, so how far each has compacted is only reported.
	logs := map[int][]keyedValue{}
	for _, b := range tc.brokers {
		b.stop()
		for _, r := range decodeAll(t, localLog(t, b.dataDir, topic, desc.Id, 0)) {
			logs[b.id] = append(logs[b.id], keyedValue{r.Offset, r.Key, r.Value})
		}
		checkCompacted(t, fmt.Sprintf("broker %d's log", b.id), logs[b.id], model, hwm)
		t.Logf("broker %d holds %d records", b.id, len(logs[b.id]))
	}
	for a := 1; a <= 3; a++ {
		for b := a + 1; b <= 3; b++ {
			at := map[int64]keyedValue{}
			for _, r := range logs[a] {
				at[r.offset] = r
			}
			for _, r := range logs[b] {
				if o, ok := at[r.offset]; ok && (!bytes.Equal(o.key, r.key) || !bytes.Equal(o.value, r.value)) {
					t.Fatalf("offset %d: broker %d holds %s=%q, broker %d %s=%q", r.offset, a, o.key, o.value, b, r.key, r.value)
				}
			}
		}
	}
}

// checkCompacted checks a compacted read: offsets increase and stay below
// the high watermark, no key appears after its last value, and each key's
// last record is the model's value (a tombstone for a deleted key, since
// delete.retention.ms has not passed). How few records remain is the
// caller's to check.
func checkCompacted(t *testing.T, via string, recs []keyedValue, model map[string][]byte, hwm int64) {
	t.Helper()
	last := map[string]keyedValue{}
	prev := int64(-1)
	for _, r := range recs {
		if r.offset <= prev || r.offset >= hwm {
			t.Fatalf("%s: offset %d after %d (high watermark %d)", via, r.offset, prev, hwm)
		}
		prev = r.offset
		last[string(r.key)] = r
	}
	if len(last) != len(model) {
		t.Fatalf("%s: %d keys, want %d", via, len(last), len(model))
	}
	for k, want := range model {
		got, ok := last[k]
		if !ok {
			t.Fatalf("%s: key %s missing", via, k)
		}
		if (want == nil) != (got.value == nil) || !bytes.Equal(got.value, want) {
			t.Fatalf("%s: key %s ends with %q at offset %d, want %q", via, k, got.value, got.offset, want)
		}
	}
}

// readGRPC reads partition 0 of topic from its start to its end with the
// Go client.
func readGRPC(ctx context.Context, t *testing.T, c *client.Client, topic string) []keyedValue {
	t.Helper()
	k := c.NewConsumer(client.WithStopAtEnd(true))
	defer k.Close()
	if err := k.Assign(topic, 0, client.Earliest()); err != nil {
		t.Fatal(err)
	}
	var out []keyedValue
	for {
		recs, err := k.Poll(ctx)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out = append(out, keyedValue{r.Offset, r.Key, r.Value})
		}
	}
}

// readKafka reads partition 0 of topic from offset 0 with kgo until it has
// seen the record just below the high watermark, which the cleaner never
// removes since it lies in the active segment.
func readKafka(ctx context.Context, t *testing.T, seeds []string, topic string, hwm int64) []keyedValue {
	t.Helper()
	cl := newKgo(t, kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	defer cl.Close()
	var out []keyedValue
	for len(out) == 0 || out[len(out)-1].offset < hwm-1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("Kafka: read %d records, none at %d: %v", len(out), hwm-1, ctx.Err())
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("Kafka fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { out = append(out, keyedValue{r.Offset, r.Key, r.Value}) })
	}
	return out
}
