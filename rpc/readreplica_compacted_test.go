package rpc

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// metricOf reads one unlabelled series from a broker's metrics; -1 when
// it is missing.
func metricOf(b *testBroker, name string) int {
	var buf bytes.Buffer
	b.WriteMetrics(&buf)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\d+)`).FindSubmatch(buf.Bytes())
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// firstFetch is a reader's first fetch from offset: one response of the
// stream, at most maxBytes, and the offset the reader continues from.
func (tb *testBroker) firstFetch(t *testing.T, topic string, offset int64, maxBytes int32) ([]record.Record, int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	stream, err := tb.fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: topic, Offset: offset, MaxBytes: maxBytes, StopAtEnd: true})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("first fetch of %s from %d: %v", topic, offset, err)
	}
	var recs []record.Record
	next := offset
	for data := resp.Batches; len(data) > 0; {
		b, rest, err := record.Next(data)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := b.Records()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rs...)
		next = b.BaseOffset() + int64(b.LastOffsetDelta()) + 1
		data = rest
	}
	if next == offset {
		t.Fatalf("first fetch of %s from %d returned no batch", topic, offset)
	}
	return recs, next
}

// TestReadReplicaOfACompactedColdTier: a read replica of a bucket whose
// compacted topic the writer has cleaned serves every key's last value
// from offset 0. A reader that began on the replica before a later
// cleaning, and continues after the writer committed it and deleted the
// objects it replaced (tiering.retired_grace passed), reads on without an
// error and ends with every key's newest value; so does a reader from 0
// whose replica still holds the older head.
func TestReadReplicaOfACompactedColdTier(t *testing.T) {
	objects := filepath.Join(t.TempDir(), "objects")
	wcfg := brokerConfig(t, 1, t.TempDir())
	wcfg.ObjectStore.Type = config.ObjectStoreFS
	wcfg.ObjectStore.Path = objects
	wcfg.Cleaner.Backoff = config.Duration(100 * time.Millisecond)
	wcfg.Tiering.RetiredGrace = config.Duration(time.Second)
	w := startBroker(t, wcfg)
	w.createTopic(t, "cc", 1, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "16KiB", "retention.ms": "-1",
		"remote.max.lag.ms": "1s", "min.cleanable.dirty.ratio": "0.1",
	})
	ctx := testCtx(t)
	const keys, round = 50, 3000
	last := map[string]string{}
	written := 0
	produce := func(n int) {
		for i := 0; i < n; i += 10 {
			bl := record.NewBuilder(record.DefaultBatchOptions())
			for j := written + i; j < written+i+10; j++ {
				k, v := fmt.Sprintf("key-%02d", (j*7)%keys), fmt.Sprintf("value-%05d-%0100d", j, j)
				bl.Add(record.Record{Timestamp: baseTime + int64(j), Key: []byte(k), Value: []byte(v)})
				last[k] = v
			}
			b, err := bl.Build()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "cc", Batch: b}); err != nil {
				t.Fatalf("produce %d: %v", written+i, err)
			}
		}
		written += n
	}
	// cleanedAndCollected waits until the writer's cold tier holds
	// everything written, its cleaner has committed more than passes
	// cleanings, and the objects they replaced are deleted.
	cleanedAndCollected := func(passes int) int {
		t.Helper()
		waitCold(t, w, "cc", int64(written))
		n := passes
		testutil.WaitFor(t, time.Minute, fmt.Sprintf("a cold cleaning after %d, its replaced objects deleted", passes), func() bool {
			n = metricOf(w, "strata_cold_cleaner_passes_total")
			d, err := w.admin.DescribeTopic(ctx, &stratav1.DescribeTopicRequest{Name: "cc"})
			if err != nil {
				t.Fatal(err)
			}
			// Cleaned up to the end and nothing retired left: a cleaning
			// leaves the bucket's segment bytes equal to the head's only
			// once the grace has passed.
			p := d.Topic.Partitions[0]
			return n > passes && p.ColdEndOffset == int64(written) && p.ColdBytes > 0 &&
				metricOf(w, "strata_cold_cleaner_retired_deleted_total") > 0 && bucketSegmentBytes(t, objects) == p.ColdBytes
		})
		return n
	}
	produce(round)
	passes := cleanedAndCollected(0)

	rcfg := replicaConfig(t, 9, objects)
	// The replica keeps the head it loaded unless a read sends it to a
	// fresh one, so the reads below meet objects retired since.
	rcfg.ReadReplicaRefresh = config.Duration(time.Hour)
	r := startBroker(t, rcfg)
	_, recs := r.readAll(t, "cc", 0, 0)
	checkCompacted(t, "the replica, after one cleaning", recs, last, written)

	// A reader in flight: its first fetch is served from the objects the
	// replica's head names; then the writer cleans again and deletes them.
	first, next := r.firstFetch(t, "cc", 0, 1)
	produce(round)
	passes = cleanedAndCollected(passes)
	_, rest := r.readAll(t, "cc", 0, next)
	checkCompacted(t, "the reader in flight across a cleaning", append(first, rest...), last, written)

	// A new reader from 0 on the replica, which may hold the older head.
	_, recs = r.readAll(t, "cc", 0, 0)
	checkCompacted(t, "the replica, after a second cleaning", recs, last, written)

	// Once more, now that the replica holds the newest head: the writer
	// cleans a third time and deletes what that head names.
	produce(round)
	cleanedAndCollected(passes)
	_, recs = r.readAll(t, "cc", 0, 0)
	checkCompacted(t, "the replica, after a third cleaning", recs, last, written)
}

// bucketSegmentBytes adds up the segment objects an fs store holds under
// root, read from the directory itself rather than through Strata's code.
func bucketSegmentBytes(t *testing.T, root string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(filepath.ToSlash(path), "/segments/") || strings.HasPrefix(d.Name(), ".strata-tmp-") {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}
