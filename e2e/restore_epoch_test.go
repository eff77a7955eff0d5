package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/tiering"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
	"github.com/strata-log/strata/tiering/objstore/s3"
)

// A topic whose leadership moved before its cluster lost every disk has
// manifests written in a later leader epoch than 0, where a new topic
// starts. The restored topic's leader must still take them over and take
// writes: a leader that counted the manifest as a successor's would stay
// fenced out of its own cold tier.
func TestRestoreAfterLeadershipMoved(t *testing.T) {
	m := miniotest.Start(t)
	b := newBroker(t, 1, s3Flags(m)...)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	desc, err := c.CreateTopic(ctx, "moved", 1, 1, map[string]string{"segment.bytes": "64KiB", "retention.ms": "-1", "remote.max.lag.ms": "1s"})
	if err != nil {
		t.Fatal(err)
	}
	const size, total = 500, 600
	tp := &tieredProducer{acked: map[int64]int64{}}
	p := newTieredProducer(c)
	tp.produce(ctx, p, "moved", 0, total, size, func(int64) time.Time { return time.Time{} })
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()
	testutil.WaitFor(t, time.Minute, "the whole topic in the cold tier", func() bool {
		d, err := c.DescribeTopic(ctx, "moved")
		return err == nil && d.Partitions[0].ColdEndOffset == total
	})
	c.Close()
	b.stop()

	// The last leader to write the manifest was in epoch 7, as after a few
	// leader changes in a cluster.
	store, err := s3.New(ctx, s3.Config{Endpoint: m.Endpoint, Region: "us-east-1", Bucket: m.Bucket, PathStyle: true, AccessKey: m.AccessKey, SecretKey: m.SecretKey})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tiering.NewCommitter(ctx, store, tiering.PartitionRef{Topic: "moved", TopicID: desc.Id, Partition: 0}, 7); err != nil {
		t.Fatal(err)
	}

	if err := os.RemoveAll(b.dataDir); err != nil {
		t.Fatal(err)
	}
	b.start()
	b.run(nil, "topic", "restore", "moved")
	c, err = client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if recs := readAllRecords(ctx, t, c, "moved", client.Earliest(), size); len(recs) != total {
		t.Fatalf("restored history holds %d records, want %d", len(recs), total)
	}
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	if err := c.NewProducer().ProduceSync(pctx, &client.Record{Topic: "moved", Partition: 0, Value: payload(total, size)}); err != nil {
		t.Fatalf("a write to the restored topic: %v", err)
	}
	if recs := readAllRecords(ctx, t, c, "moved", client.AtOffset(total), size); len(recs) != 1 || recs[0].Offset != total {
		t.Fatalf("after restore a new record went to %v", recs)
	}
}
