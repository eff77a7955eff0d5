package e2e

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// TestRestoreACopyToATimeOrOffset restores a live topic's history from the
// bucket into new topics cut at a time and at an offset, while the topic
// keeps running: each copy holds exactly the records up to the cut (a time
// includes the records at that millisecond), at their offsets, with their
// timestamps; the source's objects are never touched, and deleting a copy
// leaves the source whole. Then the errors.
func TestRestoreACopyToATimeOrOffset(t *testing.T) {
	m := miniotest.Start(t)
	b := newBroker(t, 1, s3Flags(m)...)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src, err := c.CreateTopic(ctx, "src", 1, 1, map[string]string{"segment.bytes": "64KiB", "retention.ms": "-1", "remote.max.lag.ms": "1s"})
	if err != nil {
		t.Fatal(err)
	}
	const size, total = 200, 1500
	base := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	tsOf := func(seq int64) time.Time { return base.Add(time.Duration(seq) * 10 * time.Millisecond) }
	tp := &tieredProducer{acked: map[int64]int64{}}
	p := newTieredProducer(c)
	tp.produce(ctx, p, "src", 0, total, size, tsOf)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if len(tp.failed) > 0 || len(tp.acked) != total {
		t.Fatalf("%d acked, failures %v", len(tp.acked), tp.failed)
	}
	for seq, off := range tp.acked {
		if seq != off {
			t.Fatalf("record %d went to offset %d", seq, off)
		}
	}
	testutil.WaitFor(t, time.Minute, "the whole topic in the cold tier", func() bool {
		d, err := c.DescribeTopic(ctx, "src")
		return err == nil && d.Partitions[0].ColdEndOffset == total
	})
	srcPrefix := "src/" + src.Id + "/"
	srcObjects := bucketObjects(t, m, srcPrefix)

	// checkCopy reads topic and wants exactly the records 0..end-1.
	checkCopy := func(topic string, end int64) {
		t.Helper()
		recs := readAllRecords(ctx, t, c, topic, client.Earliest(), size)
		if int64(len(recs)) != end {
			t.Fatalf("%s holds %d records, want %d", topic, len(recs), end)
		}
		for i, r := range recs {
			seq := seqOf(r.Value)
			if r.Offset != int64(i) || seq != int64(i) || !r.Timestamp.Equal(tsOf(seq)) {
				t.Fatalf("%s: record %d at offset %d (seq %d) has time %v, want %v", topic, i, r.Offset, seq, r.Timestamp, tsOf(seq))
			}
		}
	}

	// To a time: record 617 has exactly T, so it is in; 618 is not.
	cutTime := tsOf(617).Format(time.RFC3339Nano)
	out := mustStrata(t, b, "", "topic", "restore", "src", "--as", "before-deploy", "--to-time", cutTime)
	if !strings.Contains(out, "before-deploy") {
		t.Fatalf("restore printed %s", out)
	}
	checkCopy("before-deploy", 618)
	cp, err := c.DescribeTopic(ctx, "before-deploy")
	if err != nil || cp.Id == src.Id || cp.Config["segment.bytes"] != "65536" {
		t.Fatalf("copy %v, %v (source id %s)", cp, err, src.Id)
	}
	// Half a millisecond before 617's time: it is out (time cuts by ms),
	// given as @epoch-ms.
	mustStrata(t, b, "", "topic", "restore", "src", "--as", "ms-before", "--to-time", fmt.Sprintf("@%d", tsOf(617).UnixMilli()-1))
	checkCopy("ms-before", 617)

	// To an offset: the records below it.
	mustStrata(t, b, "", "topic", "restore", "src", "--as", "upto-433", "--to-offset", "433")
	checkCopy("upto-433", 433)

	// A copy continues its log after the cut.
	if err := c.NewProducer().ProduceSync(ctx, &client.Record{Topic: "upto-433", Partition: 0, Value: payload(total, size)}); err != nil {
		t.Fatal(err)
	}
	if recs := readAllRecords(ctx, t, c, "upto-433", client.AtOffset(433), size); len(recs) != 1 || recs[0].Offset != 433 {
		t.Fatalf("after the cut a new record went to %v", recs)
	}

	// The copies are sound in the bucket: every object the heads name
	// exists and checks out, records and epochs included.
	for _, topic := range []string{"before-deploy", "ms-before", "upto-433"} {
		args := append([]string{"bucket", "verify", "--topic", topic, "--records", "--quiet"}, s3Flags(m)...)
		if out, err := exec.Command(strataBin(t), args...).CombinedOutput(); err != nil {
			t.Fatalf("bucket verify of %s: %v\n%s", topic, err, out)
		}
	}

	// The source kept running and is whole; its objects are as they were.
	checkCopy("src", total)
	if got := bucketObjects(t, m, srcPrefix); !maps.Equal(got, srcObjects) {
		t.Fatalf("the source's objects changed: %v, were %v", got, srcObjects)
	}
	if err := c.DeleteTopic(ctx, "before-deploy"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the deleted copy's objects gone", func() bool {
		return len(bucketObjects(t, m, "before-deploy/")) == 0
	})
	checkCopy("src", total)
	if got := bucketObjects(t, m, srcPrefix); !maps.Equal(got, srcObjects) {
		t.Fatalf("deleting the copy changed the source's objects: %v, were %v", got, srcObjects)
	}

	// The errors.
	wantFailure(t, strata(t, b, "", "topic", "restore", "src", "--as", "upto-433", "--to-offset", "5"),
		`topic "upto-433" exists`, "TOPIC_ALREADY_EXISTS")
	wantFailure(t, strata(t, b, "", "topic", "restore", "src", "--as", "x", "--to-time", "@1", "--to-offset", "5"),
		"--to-time and --to-offset")
	wantFailure(t, strata(t, b, "", "topic", "restore", "src", "--as", "x", "--to-time", "yesterday-ish"),
		"--to-time", "yesterday-ish")
	wantFailure(t, strata(t, b, "", "topic", "restore", "src", "--as", "x", "--to-time", base.Add(-time.Second).Format(time.RFC3339)),
		"nothing to restore", "INVALID_REQUEST")
	wantFailure(t, strata(t, b, "", "topic", "restore", "src", "--as", "x", "--to-offset", "0"),
		"nothing to restore", "INVALID_REQUEST")
	wantFailure(t, strata(t, b, "", "topic", "restore", "nothing-here", "--as", "x", "--to-offset", "5"),
		"nothing-here", "TOPIC_NOT_FOUND")
	// Without --as the cut restore needs the name free.
	wantFailure(t, strata(t, b, "", "topic", "restore", "src", "--to-offset", "5"), `topic "src" exists`, "TOPIC_ALREADY_EXISTS")
	if len(bucketObjects(t, m, "x/")) != 0 {
		t.Fatal("a refused restore left objects in the bucket")
	}
}
