package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// TestReadReplicaServesAnotherClustersBucket runs a writing broker on one
// MinIO prefix and a read-only replica broker (strata serve --read-replica)
// on the same bucket and prefix. Records acknowledged by the writer are,
// once uploaded (remote.max.lag.ms=1s uploads the tail too), readable from
// the replica exactly once, in order, byte for byte, from offset 0 and by
// time; produce to the replica is refused with READ_REPLICA; and the
// replica follows new uploads. It logs replay throughput from the replica
// and from the writer for the same data.
func TestReadReplicaServesAnotherClustersBucket(t *testing.T) {
	m := miniotest.Start(t)
	const prefix = "main/strata"
	w := newBroker(t, 1, s3Flags(m, "--object-store-prefix", prefix)...)
	w.start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	wc, err := client.New(ctx, []string{w.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	const (
		size  = 4000
		total = 15_000 // 60 MB
		more  = 2_000
	)
	if _, err := wc.CreateTopic(ctx, "mirror", 1, 1, map[string]string{
		"segment.bytes":     "1MiB",
		"retention.ms":      "-1",
		"remote.max.lag.ms": "1s",
	}); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	stamp := func(seq int64) time.Time { return base.Add(time.Duration(seq) * time.Millisecond) }
	tp := &tieredProducer{acked: map[int64]int64{}}
	produce := func(seq0, n int64) {
		p := newTieredProducer(wc)
		defer p.Close()
		tp.produce(ctx, p, "mirror", seq0, n, size, stamp)
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if len(tp.failed) > 0 || len(tp.acked) != int(seq0+n) {
			t.Fatalf("%d acknowledged, failures: %v", len(tp.acked), tp.failed)
		}
	}
	// coldEnd is where a broker's view of the cold tier of partition 0
	// ends, and its high watermark.
	coldEnd := func(c *client.Client) (end, hw int64) {
		d, err := c.DescribeTopic(ctx, "mirror")
		if err != nil {
			t.Fatal(err)
		}
		return d.Partitions[0].ColdEndOffset, d.Partitions[0].HighWatermark
	}
	produce(0, total)
	testutil.WaitFor(t, 2*time.Minute, "the writer to upload everything", func() bool {
		end, hw := coldEnd(wc)
		return end == total && hw == total
	})

	admin := freeport.Loopback(t)
	r := newBroker(t, 9, s3Flags(m, "--object-store-prefix", prefix, "--read-replica", "--read-replica-refresh", "200ms", "--admin-listen", admin)...)
	r.start()
	rc, err := client.New(ctx, []string{r.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()

	// From offset 0: every acknowledged record, once, in order, at the
	// offset the writer acknowledged.
	check := func(recs []*client.Record, first int64) {
		t.Helper()
		for i, rec := range recs {
			seq := first + int64(i)
			if seqOf(rec.Value) != seq || tp.acked[seq] != rec.Offset {
				t.Fatalf("offset %d holds record %d; want record %d at %d", rec.Offset, seqOf(rec.Value), seq, tp.acked[seq])
			}
		}
	}
	start := time.Now()
	recs := readAllRecords(ctx, t, rc, "mirror", client.Earliest(), size)
	fromReplica := time.Since(start)
	if len(recs) != total {
		t.Fatalf("the replica served %d records, want %d", len(recs), total)
	}
	check(recs, 0)
	start = time.Now()
	recs = readAllRecords(ctx, t, wc, "mirror", client.Earliest(), size)
	fromWriter := time.Since(start)
	if len(recs) != total {
		t.Fatalf("the writer served %d records, want %d", len(recs), total)
	}
	mb := float64(total*size) / 1e6
	t.Logf("replay of %.0f MB: replica (cold, first read through its cache) %v = %.0f MB/s; writer (its own hot tier) %v = %.0f MB/s",
		mb, fromReplica.Round(time.Millisecond), mb/fromReplica.Seconds(), fromWriter.Round(time.Millisecond), mb/fromWriter.Seconds())

	// By time.
	mid := int64(total / 3)
	recs = readAllRecords(ctx, t, rc, "mirror", client.AtTime(stamp(mid)), size)
	if len(recs) != total-int(mid) {
		t.Fatalf("from the time of record %d the replica served %d records, want %d", mid, len(recs), total-int(mid))
	}
	check(recs, mid)

	// Writes are refused, clearly.
	err = rc.NewProducer().ProduceSync(ctx, &client.Record{Topic: "mirror", Partition: 0, Value: []byte("x")})
	if !errors.Is(err, client.ErrReadReplica) {
		t.Fatalf("produce to the replica: %v; want ErrReadReplica", err)
	}
	if _, err := rc.CreateTopic(ctx, "other", 1, 1, nil); !errors.Is(err, client.ErrReadReplica) {
		t.Fatalf("create topic on the replica: %v; want ErrReadReplica", err)
	}

	// Staleness: describe and metrics show the head generation served.
	d, err := rc.DescribeTopic(ctx, "mirror")
	if err != nil {
		t.Fatal(err)
	}
	gen := d.Partitions[0].HeadGeneration
	if gen == 0 || d.Partitions[0].HeadAgeMs < 0 || d.Partitions[0].Metadata.Leader != 9 {
		t.Fatalf("describe on the replica: %v", d.Partitions[0])
	}
	metrics := scrape(t, admin)
	series := `strata_read_replica_head_generation{topic="mirror",partition="0"}`
	if metrics[series] < float64(gen) {
		t.Fatalf("%s = %v, want at least %d", series, metrics[series], gen)
	}
	if _, ok := metrics[`strata_read_replica_head_age_seconds{topic="mirror",partition="0"}`]; !ok {
		t.Fatalf("no head age metric: %v", metrics)
	}
	// It served everything from the bucket: its metrics count the GETs
	// and the cold reads, as a writing broker's do.
	for _, name := range []string{`strata_objstore_calls_total{op="get"}`, "strata_cold_fetched_bytes_total", "strata_cold_gets_total", "strata_objstore_read_bytes_total"} {
		if metrics[name] <= 0 {
			t.Errorf("%s = %v on a replica that served %d records from the bucket", name, metrics[name], total)
		}
	}

	// cluster status describes it as what it is: no controller, the
	// bucket as its cold tier, the cold reads it made (read-ahead may
	// have made every one a hit: the GETs show them).
	var st struct {
		ControllerID int32    `json:"controller_id"`
		ReadReplica  bool     `json:"read_replica"`
		ColdTier     bool     `json:"cold_tier"`
		ObjectStores []string `json:"object_stores"`
		Brokers      []struct {
			Controller bool `json:"controller"`
		} `json:"brokers"`
		Cache struct {
			Hits   uint64 `json:"hits"`
			Misses uint64 `json:"misses"`
			Gets   uint64 `json:"gets"`
		} `json:"cache"`
	}
	js := r.run(nil, "cluster", "status", "--format", "json")
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatalf("cluster status --format json: %v in %s", err, js)
	}
	wantStore := "s3://" + m.Bucket + "/" + prefix + " at " + m.Endpoint
	if st.ControllerID != -1 || !st.ReadReplica || !st.ColdTier || len(st.ObjectStores) != 1 || st.ObjectStores[0] != wantStore ||
		len(st.Brokers) != 1 || st.Brokers[0].Controller || st.Cache.Hits+st.Cache.Misses == 0 || st.Cache.Gets == 0 {
		t.Errorf("cluster status of the replica: %+v from:\n%s", st, js)
	}
	text := r.run(nil, "cluster", "status")
	for _, want := range []string{"Read replica 9 of " + wantStore, "Cold tier: " + wantStore} {
		if !strings.Contains(text, want) {
			t.Errorf("cluster status of the replica lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "object_store.type none") {
		t.Errorf("cluster status of the replica says it has no cold tier:\n%s", text)
	}

	// The replica follows new uploads.
	produce(total, more)
	testutil.WaitFor(t, 2*time.Minute, "the replica to serve the new uploads", func() bool {
		end, hw := coldEnd(rc)
		return end == total+more && hw == total+more
	})
	recs = readAllRecords(ctx, t, rc, "mirror", client.AtOffset(tp.acked[total]), size)
	if len(recs) != more {
		t.Fatalf("after following, the replica served %d new records, want %d", len(recs), more)
	}
	check(recs, total)
	if d, err = rc.DescribeTopic(ctx, "mirror"); err != nil || d.Partitions[0].HeadGeneration <= gen {
		t.Fatalf("the head generation served did not grow past %d: %v %v", gen, d, err)
	}
	t.Logf("replica followed to offset %d, head generation %d", total+more, d.Partitions[0].HeadGeneration)
}
