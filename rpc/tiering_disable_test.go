package rpc

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// coldHistory starts a broker on a directory store with a one-partition
// topic whose first records are in the cold tier and gone from local disk,
// and returns it with the values produced, offset by offset.
func coldHistory(t *testing.T, topic string) (*testBroker, []string) {
	t.Helper()
	dir := t.TempDir()
	cfg := brokerConfig(t, 1, filepath.Join(dir, "b1"))
	cfg.ObjectStore.Type = config.ObjectStoreFS
	cfg.ObjectStore.Path = filepath.Join(dir, "objects")
	tb := startBroker(t, cfg)
	tb.createTopic(t, topic, 1, map[string]string{"segment.bytes": "16KiB", "local.retention.bytes": "16KiB", "retention.ms": "-1"})
	ctx := testCtx(t)
	var values []string
	for i := range 200 {
		values = append(values, fmt.Sprintf("%04d-%0500d", i, i))
		if _, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: topic, Batch: batchOf(t, values[i])}); err != nil {
			t.Fatal(err)
		}
	}
	waitPartition(t, tb, topic, "history in the cold tier and gone from local disk", func(p *stratav1.PartitionDescription) bool {
		return p.LocalStartOffset > 50 && p.ColdSegments > 2 && p.LogStartOffset == 0
	})
	return tb, values
}

// waitPartition waits, at most a minute, until partition 0 of topic is
// described as ok says.
func waitPartition(t *testing.T, tb *testBroker, topic, what string, ok func(*stratav1.PartitionDescription) bool) {
	t.Helper()
	testutil.Eventually(t, time.Minute, fmt.Sprintf("%s/0: %s", topic, what), func() error {
		d, err := tb.admin.DescribeTopic(testCtx(t), &stratav1.DescribeTopicRequest{Name: topic})
		if err == nil && ok(d.Topic.Partitions[0]) {
			return nil
		}
		return fmt.Errorf("%v %v", d, err)
	})
}

// requireAll reads partition 0 of topic from offset 0 and requires every
// acknowledged value, at its offset.
func requireAll(t *testing.T, tb *testBroker, topic string, values []string) {
	t.Helper()
	_, recs := tb.readAll(t, topic, 0, 0)
	if len(recs) != len(values) {
		t.Fatalf("read %d records of %s from offset 0, want %d", len(recs), topic, len(values))
	}
	for i, r := range recs {
		if r.Offset != int64(i) || string(r.Value) != values[i] {
			t.Fatalf("%s offset %d: record at %d with %.10q, want %.10q", topic, i, r.Offset, r.Value, values[i])
		}
	}
}

// Switching remote storage off on a topic whose history is in the bucket
// is refused, naming the key, the partition and what to do, and changes
// nothing: every acknowledged offset stays readable. A topic with nothing
// in the bucket may switch it off.
func TestRemoteStorageCannotBeSwitchedOffUnderColdHistory(t *testing.T) {
	tb, values := coldHistory(t, "c2")
	ctx := testCtx(t)
	_, err := tb.admin.AlterTopicConfig(ctx, &stratav1.AlterTopicConfigRequest{Name: "c2", Set: map[string]string{"remote.storage.enable": "false"}})
	_, info, _ := errorInfo(err)
	if info == nil || info.Reason != "INVALID_CONFIG" || info.Metadata["key"] != "remote.storage.enable" || info.Metadata["value"] != "false" {
		t.Fatalf("alter remote.storage.enable=false under cold history: %v (%v); want INVALID_CONFIG naming the key", err, info)
	}
	for _, says := range []string{"partition 0 (offsets 0 to ", "retention", "delete the topic"} {
		if !strings.Contains(err.Error(), says) {
			t.Errorf("the refusal %q does not say %q", err, says)
		}
	}
	d, err := tb.admin.DescribeTopic(ctx, &stratav1.DescribeTopicRequest{Name: "c2"})
	if err != nil || d.Topic.Config["remote.storage.enable"] != "true" {
		t.Fatalf("after the refusal: %v %v", d, err)
	}
	requireAll(t, tb, "c2", values)

	tb.createTopic(t, "fresh", 1, nil)
	resp, err := tb.admin.AlterTopicConfig(ctx, &stratav1.AlterTopicConfigRequest{Name: "fresh", Set: map[string]string{"remote.storage.enable": "false"}})
	if err != nil || resp.Topic.Config["remote.storage.enable"] != "false" {
		t.Fatalf("remote.storage.enable=false on a topic with nothing in the bucket: %v %v", resp, err)
	}
}

// A broker restarted with topic defaults that switch remote storage off
// (which no alter check sees) keeps a topic's cold history: every
// acknowledged offset is read back, and the log start it reports is the
// cold tier's, not the local one.
func TestTopicDefaultsSwitchingRemoteOffKeepColdHistory(t *testing.T) {
	tb, values := coldHistory(t, "c2")
	tb.stop(t)
	cfg := tb.cfg
	cfg.TopicOverrides = map[string]string{"remote.storage.enable": "false"}
	tb = startBroker(t, cfg)
	waitPartition(t, tb, "c2", "log start at the cold tier's after the restart", func(p *stratav1.PartitionDescription) bool {
		return p.HighWatermark == 200 && p.LogStartOffset == 0 && p.LocalStartOffset > 0
	})
	d, err := tb.admin.DescribeTopic(testCtx(t), &stratav1.DescribeTopicRequest{Name: "c2"})
	if err != nil || d.Topic.Config["remote.storage.enable"] != "false" {
		t.Fatalf("the topic should take the broker's default now: %v %v", d, err)
	}
	requireAll(t, tb, "c2", values)
	ans, err := tb.fetch.ListOffsets(testCtx(t), &stratav1.ListOffsetsRequest{Topic: "c2",
		Query: &stratav1.ListOffsetsRequest_Spec{Spec: stratav1.OffsetSpec_OFFSET_SPEC_EARLIEST}})
	if err != nil || ans.Offset != 0 {
		t.Fatalf("earliest offset after the restart: %v %v", ans, err)
	}
}

// A broker restarted without an object store cannot read a topic's cold
// history; a read there is OFFSET_OUT_OF_RANGE with the range it really
// serves, and says why, naming object_store.type.
func TestOutOfRangeWithoutTheStoreSaysWhy(t *testing.T) {
	tb, _ := coldHistory(t, "c2")
	tb.stop(t)
	cfg := tb.cfg
	cfg.ObjectStore.Type = config.ObjectStoreNone
	tb = startBroker(t, cfg)
	var start int64
	waitPartition(t, tb, "c2", "high watermark 200 after the restart", func(p *stratav1.PartitionDescription) bool {
		start = p.LocalStartOffset
		return p.HighWatermark == 200
	})
	_, err := fetchOnce(t, tb, "c2", 0)
	_, info, _ := errorInfo(err)
	if info == nil || info.Reason != "OFFSET_OUT_OF_RANGE" || info.Metadata["log_start_offset"] != fmt.Sprint(start) {
		t.Fatalf("read at 0 without the store: %v (%v); want OFFSET_OUT_OF_RANGE from %d", err, info, start)
	}
	if want := fmt.Sprintf("valid offsets here are %d to 200", start); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "object_store.type none") {
		t.Fatalf("the answer %q does not say %q and why", err, want)
	}
	// The real range is the real one: its first offset reads.
	if _, err := fetchOnce(t, tb, "c2", start); err != nil {
		t.Fatalf("read at the start the error gave, %d: %v", start, err)
	}
}
