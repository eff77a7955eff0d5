package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
// error and, once the replica has caught up, ends with every key's newest
// value; readers from 0 to the end, one after another all through three
// cleanings and their deletes, never meet an error and always see every
// key.
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
	// Longer than testCtx: three rounds of writes, cleanings and graces.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
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

	// The replica refreshes its catalog every 100 ms; its cold reader
	// trusts a head it loaded for a few seconds, so reads meet objects a
	// later cleaning retired, and deleted.
	r := startBroker(t, replicaConfig(t, 9, objects))
	// caughtUp waits until the replica serves everything written: a reader
	// is only compared with the writer's last values once it can see them.
	caughtUp := func() {
		t.Helper()
		testutil.WaitFor(t, time.Minute, fmt.Sprintf("the replica to serve up to %d", written), func() bool {
			return listOffset(t, r, "cc", &stratav1.ListOffsetsRequest{Query: &stratav1.ListOffsetsRequest_Spec{Spec: stratav1.OffsetSpec_OFFSET_SPEC_LATEST}}).Offset == int64(written)
		})
	}
	caughtUp()
	_, recs := r.readAll(t, "cc", 0, 0)
	checkCompacted(t, "the replica, after one cleaning", recs, last, written)

	// Readers in flight all along: one after another from offset 0 on the
	// replica while the writer cleans and deletes what it replaced, each
	// to the end without an error, in increasing offsets, with every key.
	readers := startReplayLoop(r, "cc", keys)

	// A reader in flight: its first fetch is served from the objects the
	// replica's head names; then the writer cleans again and deletes them.
	first, next := r.firstFetch(t, "cc", 0, 1)
	produce(round)
	passes = cleanedAndCollected(passes)
	caughtUp()
	_, rest := r.readAll(t, "cc", 0, next)
	checkCompacted(t, "the reader in flight across a cleaning", append(first, rest...), last, written)

	// A new reader from 0 on the replica.
	_, recs = r.readAll(t, "cc", 0, 0)
	checkCompacted(t, "the replica, after a second cleaning", recs, last, written)

	// Once more: the writer cleans a third time and deletes what the
	// replica's head named.
	produce(round)
	cleanedAndCollected(passes)
	caughtUp()
	_, recs = r.readAll(t, "cc", 0, 0)
	checkCompacted(t, "the replica, after a third cleaning", recs, last, written)
	if n, err := readers.stop(); err != nil || n < 1 {
		t.Fatalf("readers in flight across the cleanings: %d whole reads, then %v", n, err)
	} else {
		t.Logf("%d whole reads from offset 0 in flight across the cleanings", n)
	}
}

// replayLoop reads a partition from offset 0 to its end, again and
// again, until stopped or a read fails or is wrong.
type replayLoop struct {
	cancel context.CancelFunc
	done   chan struct{}
	reads  int
	err    error
}

func startReplayLoop(tb *testBroker, topic string, keys int) *replayLoop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &replayLoop{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for ctx.Err() == nil {
			seen, err := replayOnce(ctx, tb, topic)
			if ctx.Err() != nil {
				return // stopped mid-read
			}
			if err == nil && seen != keys {
				err = fmt.Errorf("read %d keys, want %d", seen, keys)
			}
			if err != nil {
				l.err = fmt.Errorf("read %d: %w", l.reads+1, err)
				return
			}
			l.reads++
			// Paced, so the writer's cleanings are not starved of CPU.
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return l
}

// stop ends the loop and returns how many whole reads it made and the
// error that ended it, if one did.
func (l *replayLoop) stop() (int, error) {
	l.cancel()
	<-l.done
	return l.reads, l.err
}

// replayOnce reads topic's partition 0 from offset 0 to its end and
// returns how many keys it saw, checking that offsets increase.
func replayOnce(ctx context.Context, tb *testBroker, topic string) (int, error) {
	stream, err := tb.fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: topic, StopAtEnd: true})
	if err != nil {
		return 0, err
	}
	keys, prev := map[string]bool{}, int64(-1)
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return len(keys), nil
		}
		if err != nil {
			return 0, err
		}
		for data := resp.Batches; len(data) > 0; {
			b, rest, err := record.Next(data)
			if err != nil {
				return 0, err
			}
			rs, err := b.Records()
			if err != nil {
				return 0, err
			}
			for _, r := range rs {
				if r.Offset <= prev {
					return 0, fmt.Errorf("offset %d after %d", r.Offset, prev)
				}
				prev = r.Offset
				keys[string(r.Key)] = true
			}
			data = rest
		}
	}
}

// bucketSegmentBytes adds up the segment objects an fs store holds under
// root, read from the directory itself rather than through Strata's code.
func bucketSegmentBytes(t *testing.T, root string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while walking
		}
		if err != nil || d.IsDir() || !strings.Contains(filepath.ToSlash(path), "/segments/") || strings.HasPrefix(d.Name(), ".strata-tmp-") {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while walking (a retired object's grace ended): not in the bucket
		}
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
