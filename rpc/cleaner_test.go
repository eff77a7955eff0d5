package rpc

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// cleanerPasses reads strata_cleaner_passes_total from a broker's metrics.
func cleanerPasses(b *testBroker) int {
	var buf bytes.Buffer
	b.WriteMetrics(&buf)
	m := regexp.MustCompile(`(?m)^strata_cleaner_passes_total (\d+)`).FindSubmatch(buf.Bytes())
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// localRecords reads every record of a stopped broker's partition log.
func localRecords(t *testing.T, b *testBroker, topic, id string, p int32) []record.Record {
	t.Helper()
	opts := hotlog.DefaultOptions()
	opts.Logger = quietLogger()
	l, err := hotlog.Open(filepath.Join(b.cfg.DataDir, "logs", topic+"-"+id, fmt.Sprint(p)), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out []record.Record
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		res, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		for data := res.Data; len(data) > 0; {
			bt, rest, err := record.Next(data)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := bt.Records()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, recs...)
			data = rest
		}
		off = res.NextOffset
	}
	return out
}

// startCompactedCluster starts three brokers whose cleaners look every
// 50 ms (tweak, if set, changes each broker's settings first) and creates
// topic "c": one partition, RF 3, compacted, 16 KiB segments, local only,
// with overrides on top. It returns the brokers and the partition's leader.
func startCompactedCluster(t *testing.T, overrides map[string]string, tweak func(*config.Broker)) ([]*testBroker, *testBroker) {
	t.Helper()
	dir := t.TempDir()
	cfgs := make([]config.Broker, 3)
	for i := range cfgs {
		cfgs[i] = brokerConfig(t, int32(i+1), filepath.Join(dir, fmt.Sprint("b", i+1)))
		cfgs[i].Cleaner.Backoff = config.Duration(50 * time.Millisecond)
		if tweak != nil {
			tweak(&cfgs[i])
		}
	}
	b1 := startBroker(t, cfgs[0])
	bs := []*testBroker{b1, joinSecondBroker(t, b1, cfgs[1]), joinSecondBroker(t, b1, cfgs[2])}
	ctx := testCtx(t)
	topicCfg := map[string]string{
		"replication.factor": "3", "segment.bytes": "16KiB", "cleanup.policy": "compact", "remote.storage.enable": "false",
	}
	maps.Copy(topicCfg, overrides)
	// Three brokers that just met may not have a controller yet.
	testutil.Eventually(t, 20*time.Second, "the topic to be created", func() error {
		_, err := b1.admin.CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "c", Partitions: 1, Config: topicCfg})
		if status.Code(err) == codes.AlreadyExists {
			return nil // an earlier try created it, though its answer was lost
		}
		return err
	})
	for _, b := range bs {
		testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("broker %d to know the topic", b.cfg.NodeID), func() bool {
			_, err := b.admin.DescribeTopic(ctx, &stratav1.DescribeTopicRequest{Name: "c"})
			return err == nil
		})
		if err := b.Ready(ctx); err != nil {
			t.Fatalf("broker %d: %v", b.cfg.NodeID, err)
		}
	}
	return bs, byID(bs, partitionState(t, bs[0], "c", 0).Metadata.Leader)
}

// TestReplicasCleanIndependentlyAndAgree: on a compacted topic with three
// replicas, every broker's cleaner compacts its own replica; afterwards
// each replica still holds the last value of every key, far fewer records
// than were written, and any offset two replicas both hold carries the
// same record in both.
func TestReplicasCleanIndependentlyAndAgree(t *testing.T) {
	bs, leader := startCompactedCluster(t, map[string]string{"min.insync.replicas": "2", "min.cleanable.dirty.ratio": "0.1"}, nil)
	ctx := testCtx(t)
	const keys, writes = 40, 2000
	last := map[string]string{}
	for i := 0; i < writes; i += 10 {
		bl := record.NewBuilder(record.DefaultBatchOptions())
		for j := i; j < i+10; j++ {
			k, v := fmt.Sprintf("key-%02d", (j*7)%keys), fmt.Sprintf("value-%05d-%0100d", j, j)
			bl.Add(record.Record{Timestamp: baseTime + int64(j), Key: []byte(k), Value: []byte(v)})
			last[k] = v
		}
		b, err := bl.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leader.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "c", Batch: b, Acks: stratav1.Acks_ACKS_ALL}); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	for _, b := range bs {
		testutil.WaitFor(t, 60*time.Second, fmt.Sprintf("broker %d's cleaner to clean", b.ID()), func() bool {
			return cleanerPasses(b) > 0
		})
	}
	// Through the leader: offsets rise and every key's last value is there.
	_, served := leader.readAll(t, "c", 0, 0)
	checkCompacted(t, "served by the leader", served, last, writes)

	id := partitionTopicID(t, bs[0], "c")
	for _, b := range bs {
		b.stop(t)
	}
	held := make([]map[int64]record.Record, len(bs))
	for i, b := range bs {
		recs := localRecords(t, b, "c", id, 0)
		checkCompacted(t, fmt.Sprint("broker ", b.cfg.NodeID), recs, last, writes)
		held[i] = map[int64]record.Record{}
		for _, r := range recs {
			held[i][r.Offset] = r
		}
	}
	for i := range held {
		for j := i + 1; j < len(held); j++ {
			for off, r := range held[i] {
				if o, ok := held[j][off]; ok && (!bytes.Equal(o.Key, r.Key) || !bytes.Equal(o.Value, r.Value)) {
					t.Fatalf("offset %d: broker %d holds %s=%s, broker %d %s=%s", off, i+1, r.Key, r.Value, j+1, o.Key, o.Value)
				}
			}
		}
	}
}

// checkCompacted: offsets rise, the last record of every key is the last
// value written for it, and cleaning removed most of the history.
func checkCompacted(t *testing.T, who string, recs []record.Record, last map[string]string, writes int) {
	t.Helper()
	got := map[string]string{}
	prev := int64(-1)
	for _, r := range recs {
		if r.Offset <= prev {
			t.Fatalf("%s: offset %d after %d", who, r.Offset, prev)
		}
		prev = r.Offset
		got[string(r.Key)] = string(r.Value)
	}
	for k, v := range last {
		if got[k] != v {
			t.Fatalf("%s: key %s ends with %.20q, want %.20q", who, k, got[k], v)
		}
	}
	if len(recs) > writes/2 {
		t.Fatalf("%s: %d of %d records left: the log was not compacted", who, len(recs), writes)
	}
}

// TestTombstonesWaitForEveryReplica: a tombstone is not removed while a
// replica that has not copied it is away, even from the ISR and with
// delete.retention.ms passed; it would come back on that replica with the
// key's older value. Once the replica has it again, every replica's
// cleaner removes the tombstone and the value with it (the followers' by
// the floor their leader sends them).
func TestTombstonesWaitForEveryReplica(t *testing.T) {
	bs, leader := startCompactedCluster(t,
		map[string]string{"min.insync.replicas": "1", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"},
		func(cfg *config.Broker) { cfg.Replica.LagTimeMax = config.Duration(time.Second) })
	ctx := testCtx(t)
	var away *testBroker // a follower, and not the controller, so that metadata goes on
	for _, b := range bs {
		if b != leader && b != bs[0] {
			away = b
		}
	}
	n := 0
	produce := func(key string, value []byte, count int) {
		t.Helper()
		for range count {
			bl := record.NewBuilder(record.DefaultBatchOptions())
			k := key
			if k == "" {
				k = fmt.Sprintf("other-%02d", n%20)
			}
			v := value
			if key == "" {
				v = fmt.Appendf(nil, "v%06d-%0200d", n, n)
			}
			bl.Add(record.Record{Timestamp: baseTime + int64(n), Key: []byte(k), Value: v})
			n++
			b, err := bl.Build()
			if err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, 20*time.Second, "a produce", func() error {
				_, err := leader.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "c", Batch: b, Acks: stratav1.Acks_ACKS_ALL})
				return err
			})
		}
	}
	// The deleted key's value reaches every replica, then one goes away.
	produce("deleted", []byte("old value"), 1)
	produce("", nil, 100)
	testutil.WaitFor(t, 20*time.Second, "every replica in the ISR", func() bool {
		return len(partitionState(t, leader, "c", 0).Metadata.Isr) == 3
	})
	away.stop(t)
	produce("deleted", nil, 1) // the tombstone
	produce("", nil, 300)
	passes := cleanerPasses(leader)
	produce("", nil, 100)
	testutil.WaitFor(t, 60*time.Second, "the leader's cleaner to clean past the tombstone twice", func() bool {
		return cleanerPasses(leader) >= passes+2
	})
	_, served := leader.readAll(t, "c", 0, 0)
	if !hasTombstone(served, "deleted") {
		t.Fatalf("the leader removed the tombstone while broker %d, which has not copied it, was away", away.ID())
	}

	// The replica returns and copies the tombstone; then every cleaner
	// may remove it.
	back := startBrokerAt(t, away.cfg)
	now := []*testBroker{}
	for _, b := range bs {
		if b != away {
			now = append(now, b)
		}
	}
	now = append(now, back)
	testutil.WaitFor(t, 30*time.Second, "the returned replica back in the ISR", func() bool {
		return len(partitionState(t, leader, "c", 0).Metadata.Isr) == 3
	})
	before := map[int32]int{}
	for _, b := range now {
		before[b.ID()] = cleanerPasses(b)
	}
	// Cleanings need new dirty segments: write while waiting for three
	// more passes on every broker (one may cover the tombstone, the next
	// removes it) and for the leader to serve it no longer.
	testutil.WaitFor(t, 90*time.Second, "every replica to clean three more times and the tombstone to go", func() bool {
		produce("", nil, 40)
		for _, b := range now {
			if cleanerPasses(b) < before[b.ID()]+3 {
				return false
			}
		}
		_, served := leader.readAll(t, "c", 0, 0)
		return !hasTombstone(served, "deleted")
	})
	id := partitionTopicID(t, bs[0], "c")
	for _, b := range now {
		b.stop(t)
	}
	for _, b := range now {
		recs := localRecords(t, b, "c", id, 0)
		for _, r := range recs {
			if string(r.Key) == "deleted" {
				t.Errorf("broker %d still holds key %q at %d (value %q): its cleaner kept the tombstone or the value", b.ID(), r.Key, r.Offset, r.Value)
			}
		}
	}
}

// hasTombstone reports whether recs hold a tombstone of key.
func hasTombstone(recs []record.Record, key string) bool {
	for _, r := range recs {
		if string(r.Key) == key && r.Value == nil {
			return true
		}
	}
	return false
}
