package rpc

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// TestIdempotentProducersFromTheColdTier: a leader whose local log starts
// again at the cold tier's end (it lost its copy of the partition; then,
// the whole broker's data is lost and the topic restored from the bucket)
// takes the producers' state from the last cold segment: retries of the
// producer's last batches, all in the cold tier, are answered as
// duplicates with their original offsets, and its next batch follows.
func TestIdempotentProducersFromTheColdTier(t *testing.T) {
	cfg := brokerConfig(t, 1, t.TempDir())
	cfg.ObjectStore.Type = config.ObjectStoreFS
	cfg.ObjectStore.Path = t.TempDir() // outside the data dir, which the test wipes
	tb := startBroker(t, cfg)
	topic := tb.createTopic(t, "kept", 1, map[string]string{"segment.bytes": "16KiB", "retention.ms": "-1"})
	pid := initProducer(t, tb)
	var sent []record.Batch
	var answers []*stratav1.ProduceResponse
	for i := range 40 {
		b := testutil.IdemBatch(t, pid, 0, int32(i), baseTime, fmt.Sprintf("%03d-%s", i, strings.Repeat("v", 600)))
		res, err := tb.send(t, "kept", b, stratav1.Acks_ACKS_ALL)
		if err != nil {
			t.Fatal(err)
		}
		sent, answers = append(sent, b), append(answers, res)
	}
	last := answers[len(answers)-1].LastOffset
	// Plain batches after them fill the segment, which rolls and is
	// uploaded.
	for range 30 {
		if _, err := tb.send(t, "kept", batchOf(t, strings.Repeat("p", 600)), stratav1.Acks_ACKS_ALL); err != nil {
			t.Fatal(err)
		}
	}
	coldEnd := func() int64 {
		d, err := tb.admin.DescribeTopic(testCtx(t), &stratav1.DescribeTopicRequest{Name: "kept"})
		if err != nil {
			t.Fatal(err)
		}
		return d.Topic.Partitions[0].ColdEndOffset
	}
	testutil.WaitFor(t, 20*time.Second, "the producer's batches in the cold tier", func() bool { return coldEnd() > last })

	retries := func(when string) {
		t.Helper()
		for i := len(sent) - 5; i < len(sent); i++ {
			res, err := tb.send(t, "kept", sent[i], stratav1.Acks_ACKS_ALL)
			if err != nil || !res.Duplicate || res.BaseOffset != answers[i].BaseOffset || res.LastOffset != answers[i].LastOffset {
				t.Fatalf("%s: retry of sequence %d: %v %v, want the duplicate at %d", when, i, res, err, answers[i].BaseOffset)
			}
		}
	}

	// The broker loses its copy of the partition.
	tb.stop(t)
	if err := os.RemoveAll(partitionDir(cfg, topic, 0)); err != nil {
		t.Fatal(err)
	}
	tb = startBroker(t, cfg)
	retries("after the local log was lost")
	end := coldEnd()
	next := testutil.IdemBatch(t, pid, 0, 40, baseTime, "next")
	res, err := tb.send(t, "kept", next, stratav1.Acks_ACKS_ALL)
	if err != nil || res.Duplicate || res.BaseOffset != end {
		t.Fatalf("the producer's next batch: %v %v, want it written at the cold end %d", res, err, end)
	}
	// Roll and upload it, so that the cold tier is all there is.
	for range 30 {
		if _, err := tb.send(t, "kept", batchOf(t, strings.Repeat("q", 600)), stratav1.Acks_ACKS_ALL); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 20*time.Second, "the next batch in the cold tier", func() bool { return coldEnd() > res.LastOffset })
	sent, answers = append(sent, next), append(answers, res)

	// The broker loses everything; the topic is restored from the bucket.
	tb.stop(t)
	if err := os.RemoveAll(cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	tb = startBroker(t, cfg)
	if _, err := tb.admin.RestoreTopic(testCtx(t), &stratav1.RestoreTopicRequest{Name: "kept"}); err != nil {
		t.Fatal(err)
	}
	retries("after a restore")
	// The new cluster never hands out the id the restored state remembers:
	// a new producer given it would have its first batches taken for the
	// old producer's resends, and dropped.
	if fresh := initProducer(t, tb); fresh <= pid {
		t.Fatalf("a new producer after the restore got id %d; the restored state remembers %d", fresh, pid)
	}
}
