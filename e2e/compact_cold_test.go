package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// TestCompactedTopicIsCompactedInTheBucket: a compacted topic with remote
// storage, on a broker with MinIO: 20,000 updates of 200 keys are uploaded
// and the leader compacts them in the bucket, whose segment bytes end far
// below the history's once the replaced objects' grace has passed; a
// consumer reading from offset 0 through the bucket sees the last value of
// every key, in offset order.
func TestCompactedTopicIsCompactedInTheBucket(t *testing.T) {
	m := miniotest.Start(t)
	b := newBroker(t, 1, s3Flags(m, "--cleaner-backoff", "1s", "--tiering-retired-grace", "2s")...)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	desc, err := c.CreateTopic(ctx, "state", 1, 1, map[string]string{
		"cleanup.policy":            "compact",
		"segment.bytes":             "64KiB",
		"local.retention.bytes":     "128KiB",
		"local.retention.ms":        "-1",
		"min.cleanable.dirty.ratio": "0.1",
	})
	if err != nil {
		t.Fatal(err)
	}
	const updates, keys = 20_000, 200
	last := map[string]string{}
	p := newTieredProducer(c, client.WithAcks(stratav1.Acks_ACKS_LEADER))
	for i := range updates {
		k, v := fmt.Sprintf("key-%03d", i%keys), fmt.Sprintf("value %06d %s", i, strings.Repeat("x", 80))
		last[k] = v
		p.Produce(ctx, &client.Record{Topic: "state", Partition: 0, Key: []byte(k), Value: []byte(v)}, func(_ *client.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()

	prefix := fmt.Sprintf("state/%s/0/segments/", desc.Id)
	var history, stored int64
	testutil.WaitFor(t, 3*time.Minute, "the cold tier compacted in the bucket", func() bool {
		_, coldBytes, lag, _, _, _, _ := describeTier(ctx, t, c, "state")
		stored = 0
		for _, size := range bucketObjects(t, m, prefix) {
			stored += size
		}
		history = max(history, stored)
		return lag == 0 && coldBytes > 0 && stored == coldBytes && stored < history/5
	})
	t.Logf("bucket segment bytes: %d at most during the run, %d after compaction", history, stored)

	k := c.NewConsumer(client.WithStopAtEnd(true))
	defer k.Close()
	if err := k.Assign("state", 0, client.Earliest()); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	n, prev := 0, int64(-1)
	for {
		recs, err := k.Poll(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Offset <= prev {
				t.Fatalf("offset %d after %d", r.Offset, prev)
			}
			prev = r.Offset
			seen[string(r.Key)] = string(r.Value)
			n++
		}
	}
	if len(seen) != keys {
		t.Fatalf("%d keys read back, want %d", len(seen), keys)
	}
	for key, v := range last {
		if seen[key] != v {
			t.Fatalf("key %s: read %q last, wrote %q last", key, seen[key][:13], v[:13])
		}
	}
	if n >= updates/5 {
		t.Fatalf("%d records read from offset 0 of %d updates: not compacted", n, updates)
	}
	t.Logf("%d records read from offset 0 (of %d updates of %d keys)", n, updates, keys)
}
