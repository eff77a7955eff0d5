package e2e

// What the bucket must get right for a restore from it alone to bring back
// what the user has: the settings as last altered, the acknowledged tail
// of a quiet partition, and describe figures that never understate the
// history while a broker is still reading its cold tiers.

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/tiering"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// bucketHead reads a partition's manifest head from MinIO with minio-go,
// independently of the broker: nil when there is none.
func bucketHead(t *testing.T, m *miniotest.Server, topic, id string, p int32) *tiering.Head {
	t.Helper()
	key := fmt.Sprintf("%s/%s/%d/manifest", topic, id, p)
	obj, err := m.Client.GetObject(context.Background(), m.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil
		}
		t.Fatalf("read %s: %v", key, err)
	}
	h, err := tiering.DecodeHead(data)
	if err != nil {
		t.Fatalf("decode %s: %v", key, err)
	}
	return h
}

// TestAnAlterIsInTheBucketWhenItReturns raises retention.ms of a quiet
// topic (everything uploaded, nothing more to upload): when the alter
// returns, every partition's manifest in the bucket carries the new value,
// so a restore after the broker lost its disk brings back the altered
// settings rather than those of the last upload. A restore that went back
// to the shorter retention would delete history the user meant to keep.
func TestAnAlterIsInTheBucketWhenItReturns(t *testing.T) {
	m := miniotest.Start(t)
	b := newBroker(t, 1, s3Flags(m)...)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	// Two partitions: the second never receives a record, and its
	// manifest must carry the settings all the same.
	desc, err := c.CreateTopic(ctx, "kept", 2, 1, map[string]string{"segment.bytes": "64KiB", "segment.ms": "1s", "retention.ms": "90d"})
	if err != nil {
		t.Fatal(err)
	}
	const size, total = 500, 1000
	tp := &tieredProducer{acked: map[int64]int64{}}
	p := newTieredProducer(c)
	tp.produce(ctx, p, "kept", 0, total, size, func(int64) time.Time { return time.Now() })
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()
	testutil.WaitFor(t, time.Minute, "the whole topic in the cold tier", func() bool {
		d, err := c.DescribeTopic(ctx, "kept")
		return err == nil && d.Partitions[0].ColdEndOffset == total
	})
	if h := bucketHead(t, m, "kept", desc.Id, 0); h == nil || h.Config["retention.ms"] != "7776000000" {
		t.Fatalf("manifest before the alter: %+v", h)
	}

	// The topic is quiet: no upload follows the alter.
	altering := time.Now()
	b.run(nil, "topic", "alter", "kept", "--set", "retention.ms=100d")
	t.Logf("the alter returned after %v (the CLI's start included)", time.Since(altering).Round(time.Millisecond))
	for part := range int32(2) {
		h := bucketHead(t, m, "kept", desc.Id, part)
		if h == nil || h.Config["retention.ms"] != "8640000000" || h.Partitions != 2 {
			t.Fatalf("partition %d: the manifest in the bucket after the alter returned: %+v", part, h)
		}
	}
	c.Close()

	b.stop()
	if err := os.RemoveAll(b.dataDir); err != nil {
		t.Fatal(err)
	}
	b.start()
	b.run(nil, "topic", "restore", "kept")
	c, err = client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := c.DescribeTopic(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Config["retention.ms"]; got != "8640000000" || len(d.Partitions) != 2 {
		t.Fatalf("restored topic: retention.ms %s (want 8640000000, 100d), %d partitions", got, len(d.Partitions))
	}
	if recs := readAllRecords(ctx, t, c, "kept", client.Earliest(), size); len(recs) != total {
		t.Fatalf("restored history holds %d records, want %d", len(recs), total)
	}
}

// TestAQuietTailReachesTheBucketWithinTheBound writes a few records to a
// topic whose segments would not roll for an hour and then writes nothing
// more: with remote.max.lag.ms=2s the acknowledged records are in the
// bucket within about two seconds of their acknowledgement, describe shows
// the recovery point catching up, and the leader reports how long the
// oldest record not yet in the bucket has waited.
func TestAQuietTailReachesTheBucketWithinTheBound(t *testing.T) {
	m := miniotest.Start(t)
	admin := freeport.Loopback(t)
	b := newBroker(t, 1, s3Flags(m, "--admin-listen", admin)...)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const bound = 2 * time.Second
	desc, err := c.CreateTopic(ctx, "quiet", 1, 1, map[string]string{"remote.max.lag.ms": "2s", "segment.ms": "1h"})
	if err != nil {
		t.Fatal(err)
	}
	const size, total = 200, 50
	tp := &tieredProducer{acked: map[int64]int64{}}
	p := newTieredProducer(c)
	tp.produce(ctx, p, "quiet", 0, total, size, func(int64) time.Time { return time.Now() })
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	acked := time.Now()
	p.Close()
	if len(tp.acked) != total {
		t.Fatalf("%d of %d acknowledged: %v", len(tp.acked), total, tp.failed)
	}

	// While it waits, describe says how long.
	var sawWaiting bool
	var inBucket time.Duration
	testutil.WaitFor(t, bound+time.Second, "the acknowledged tail in the bucket", func() bool {
		d, err := c.DescribeTopic(ctx, "quiet")
		if err != nil {
			t.Fatal(err)
		}
		part := d.Partitions[0]
		if part.ColdEndOffset < total && part.UploadLagMs > 0 {
			sawWaiting = true
		}
		if h := bucketHead(t, m, "quiet", desc.Id, 0); h != nil && h.EndOffset() == total {
			inBucket = time.Since(acked)
			return true
		}
		return false
	})
	t.Logf("the last acknowledged record reached the bucket %v after its acknowledgement (bound %v)", inBucket.Round(time.Millisecond), bound)
	if inBucket > bound {
		t.Errorf("the tail reached the bucket %v after its acknowledgement; remote.max.lag.ms is %v", inBucket, bound)
	}
	if !sawWaiting {
		t.Errorf("describe never showed the tail waiting for the bucket")
	}
	testutil.WaitFor(t, 5*time.Second, "describe to show the recovery point at the high watermark", func() bool {
		d, err := c.DescribeTopic(ctx, "quiet")
		part := d.Partitions[0]
		return err == nil && part.ColdEndOffset == total && part.UploadLagMs == 0 && !part.ColdLoading
	})
	out := b.run(nil, "topic", "describe", "quiet")
	if !strings.Contains(out, "RECOVERY-POINT") || !strings.Contains(squeeze(out), " 50 (current)") {
		t.Errorf("describe output:\n%s", out)
	}
	metrics := scrape(t, admin)
	if v, ok := metrics[`strata_upload_lag_seconds{topic="quiet",partition="0"}`]; !ok || v != 0 {
		t.Errorf("strata_upload_lag_seconds of quiet/0: %v (present %v)", v, ok)
	}
	// The records replay from the bucket.
	if recs := readAllRecords(ctx, t, c, "quiet", client.Earliest(), size); len(recs) != total {
		t.Fatalf("read %d records, want %d", len(recs), total)
	}
}

// TestDescribeIsLoadingOrRightAfterARestart restarts a broker whose
// partition keeps most of its history in the cold tier and describes the
// topic from the first moment the broker answers: every answer either says
// the cold figures are still loading or gives the true log start (0),
// never the local start in its place.
func TestDescribeIsLoadingOrRightAfterARestart(t *testing.T) {
	m := miniotest.Start(t)
	b := newBroker(t, 1, s3Flags(m)...)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, "deep", 1, 1, map[string]string{"segment.bytes": "16KiB", "local.retention.bytes": "32KiB", "retention.ms": "-1"}); err != nil {
		t.Fatal(err)
	}
	tp := &tieredProducer{acked: map[int64]int64{}}
	p := newTieredProducer(c)
	tp.produce(ctx, p, "deep", 0, 1000, 500, func(int64) time.Time { return time.Now() })
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()
	var coldSegs int32
	testutil.WaitFor(t, time.Minute, "history to leave the local disk", func() bool {
		_, _, _, segs, logStart, localStart, _ := describeTier(ctx, t, c, "deep")
		coldSegs = segs
		return logStart == 0 && localStart > 100
	})
	c.Close()
	b.stop()

	b.launch()
	deadline := time.Now().Add(time.Minute)
	for c = nil; c == nil; {
		if time.Now().After(deadline) {
			t.Fatal("the restarted broker did not answer within a minute")
		}
		// Until the broker serves, the client cannot load the metadata.
		c, _ = client.New(ctx, []string{b.addr}, client.WithRequestTimeout(time.Second))
	}
	defer c.Close()
	var answers, loading int
	var first time.Time
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no right answer from describe within a minute of the restart (%d answers, %d loading)", answers, loading)
		}
		d, err := c.DescribeTopic(ctx, "deep")
		if err != nil {
			continue // not serving yet
		}
		if first.IsZero() {
			first = time.Now()
		}
		answers++
		part := d.Partitions[0]
		switch {
		case part.ColdLoading:
			loading++
		case part.LogStartOffset != 0 || part.ColdSegments < coldSegs:
			t.Fatalf("answer %d, %v after the first: log start %d, %d cold segments (of %d); want 0 or loading",
				answers, time.Since(first).Round(time.Millisecond), part.LogStartOffset, part.ColdSegments, coldSegs)
		}
		if !part.ColdLoading && time.Since(first) > time.Second {
			break
		}
	}
	t.Logf("%d answers in the first second of serving, %d of them loading", answers, loading)
	out := b.run(nil, "topic", "describe", "deep")
	if strings.Contains(out, "loading") {
		t.Errorf("describe still loading once the broker has read the cold tier:\n%s", out)
	}
}

// TestRestoringALiveTopicSaysItExists: `strata topic restore` of a topic the
// cluster has refuses with TOPIC_ALREADY_EXISTS, saying so, whether or not
// the bucket holds anything of it, rather than TOPIC_NOT_FOUND.
func TestRestoringALiveTopicSaysItExists(t *testing.T) {
	b := newBroker(t, 1, "--object-store-type", "fs")
	b.start()
	mustStrata(t, b, "", "topic", "create", "live")
	wantFailure(t, strata(t, b, "", "topic", "restore", "live"),
		`topic "live" exists`, "nothing of it is in the bucket", "TOPIC_ALREADY_EXISTS")
	mustStrata(t, b, "a\nb\n", "produce", "live", "--partition", "0")
	wantFailure(t, strata(t, b, "", "topic", "restore", "live"), `topic "live" exists`, "TOPIC_ALREADY_EXISTS")
	// A topic neither in the cluster nor in the bucket is not found.
	wantFailure(t, strata(t, b, "", "topic", "restore", "gone"), "gone", "TOPIC_NOT_FOUND")
}

// TestAnAlterTheBucketCannotTakeSaysSo alters a topic while the object
// store is down: the change is in force, but the alter answers a retriable
// error naming the partition whose manifest lacks it, within the caller's
// timeout; once the store is back the same alter succeeds and the manifest
// carries it.
func TestAnAlterTheBucketCannotTakeSaysSo(t *testing.T) {
	m := miniotest.Start(t)
	b := newBroker(t, 1, s3Flags(m)...)
	b.start()
	desc := mustStrata(t, b, "", "topic", "create", "stranded", "--config", "retention.ms=90d")
	id := strings.Fields(lines(desc)[1])[1]
	testutil.WaitFor(t, 30*time.Second, "the leader to record the settings in the manifest", func() bool {
		h := bucketHead(t, m, "stranded", id, 0)
		return h != nil && h.Config["retention.ms"] == "7776000000"
	})

	m.Stop()
	start := time.Now()
	res := strata(t, b, "", "topic", "alter", "stranded", "--set", "retention.ms=100d", "--timeout", "5s")
	took := time.Since(start)
	wantFailure(t, res, "in the cluster metadata and in force, but not yet in the bucket for partition 0", "TIMEOUT")
	if took > 10*time.Second {
		t.Errorf("the alter answered after %v; --timeout was 5s", took)
	}
	t.Logf("with the store down the alter answered after %v: %s", took.Round(time.Millisecond), strings.TrimSpace(res.stderr))
	if out := mustStrata(t, b, "", "topic", "describe", "stranded"); !strings.Contains(squeeze(out), "retention.ms 8640000000 (100d) *override") {
		t.Errorf("the altered setting is not in force:\n%s", out)
	}

	m.Restart()
	mustStrata(t, b, "", "topic", "alter", "stranded", "--set", "retention.ms=100d")
	if h := bucketHead(t, m, "stranded", id, 0); h == nil || h.Config["retention.ms"] != "8640000000" {
		t.Fatalf("the manifest after the store came back and the alter was retried: %+v", h)
	}
}

// TestAnAlterReachesEveryLeadersManifest alters a topic whose partitions
// three brokers lead: when the alter returns (answered by whichever broker
// the client asked, forwarded to the controller) every manifest carries
// the new settings, written by its partition's leader in its current
// epoch; and so again after a leader was killed and another took over.
func TestAnAlterReachesEveryLeadersManifest(t *testing.T) {
	m := miniotest.Start(t)
	tc := startCluster(t, 3, m)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := client.New(ctx, tc.addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	desc, err := c.CreateTopic(ctx, "spread", 3, 3, map[string]string{"retention.ms": "90d"})
	if err != nil {
		t.Fatal(err)
	}
	check := func(want string, skip ...int32) {
		t.Helper()
		for p := range int32(3) {
			pm := tc.partition(ctx, "spread", p, skip...)
			h := bucketHead(t, m, "spread", desc.Id, p)
			if h == nil || h.Config["retention.ms"] != want || h.LeaderEpoch != pm.GetLeaderEpoch() {
				t.Fatalf("partition %d (leader %d, epoch %d): manifest after the alter returned: %+v", p, pm.GetLeader(), pm.GetLeaderEpoch(), h)
			}
		}
	}
	leaders := map[int32]bool{}
	for p := range int32(3) {
		leaders[tc.leaderOf(ctx, "spread", p)] = true
	}
	t.Logf("the three partitions are led by %d brokers", len(leaders))
	tc.brokers[0].run(nil, "topic", "alter", "spread", "--set", "retention.ms=100d")
	check("8640000000")

	victim := tc.leaderOf(ctx, "spread", 0)
	tc.byID(victim).kill9()
	testutil.WaitFor(t, time.Minute, "another leader of spread/0", func() bool {
		l := tc.agreedLeader(ctx, "spread", 0, victim)
		return l > 0 && l != victim
	})
	var survivor *brokerProc
	for _, b := range tc.brokers {
		if int32(b.id) != victim {
			survivor = b
		}
	}
	survivor.run(nil, "topic", "alter", "spread", "--set", "retention.ms=110d")
	check("9504000000", victim)
}
