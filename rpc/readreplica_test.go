package rpc

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// replicaConfig is a read-only replica of the fs store at objects.
func replicaConfig(t *testing.T, id int32, objects string) config.Broker {
	cfg := brokerConfig(t, id, t.TempDir())
	cfg.ReadReplica = true
	cfg.ReadReplicaRefresh = config.Duration(100 * time.Millisecond)
	cfg.ObjectStore.Type = config.ObjectStoreFS
	cfg.ObjectStore.Path = objects
	return cfg
}

// waitCold waits until the writer's cold tier of topic/0 ends at end.
func waitCold(t *testing.T, tb *testBroker, topic string, end int64) {
	t.Helper()
	testutil.Eventually(t, time.Minute, fmt.Sprintf("the cold tier of %s to reach %d", topic, end), func() error {
		d, err := tb.admin.DescribeTopic(testCtx(t), &stratav1.DescribeTopicRequest{Name: topic})
		if err != nil {
			t.Fatal(err)
		}
		if d.Topic.Partitions[0].ColdEndOffset != end {
			return fmt.Errorf("%v", d.Topic.Partitions[0])
		}
		return nil
	})
}

func listOffset(t *testing.T, tb *testBroker, topic string, q *stratav1.ListOffsetsRequest) *stratav1.ListOffsetsResponse {
	t.Helper()
	q.Topic = topic
	resp, err := tb.fetch.ListOffsets(testCtx(t), q)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestReadReplica: a read-only replica of the bucket a broker writes
// serves that broker's uploaded history byte for byte, answers offsets,
// metadata and describe from the bucket, refuses every write with
// READ_REPLICA and follows new uploads.
func TestReadReplica(t *testing.T) {
	objects := filepath.Join(t.TempDir(), "objects")
	wcfg := brokerConfig(t, 1, t.TempDir())
	wcfg.ObjectStore.Type = config.ObjectStoreFS
	wcfg.ObjectStore.Path = objects
	w := startBroker(t, wcfg)
	w.createTopic(t, "rr", 1, map[string]string{"segment.bytes": "16KiB", "retention.ms": "-1", "remote.max.lag.ms": "1s"})
	ctx := testCtx(t)
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			batch := batchOf(t, fmt.Sprintf("%04d-%0300d", i, i))
			if _, err := w.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "rr", Batch: batch}); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 150)
	waitCold(t, w, "rr", 150)

	r := startBroker(t, replicaConfig(t, 9, objects))
	// Byte for byte what the writer serves (the writer assigned the
	// offsets, so not what was sent).
	want, _ := w.readAll(t, "rr", 0, 0)
	raw, recs := r.readAll(t, "rr", 0, 0)
	if !bytes.Equal(raw, want) || len(recs) != 150 || checkValues(t, recs, 0) {
		t.Fatalf("the replica served %d bytes, %d records; want the writer's %d bytes, 150 records", len(raw), len(recs), len(want))
	}

	earliest := listOffset(t, r, "rr", &stratav1.ListOffsetsRequest{Query: &stratav1.ListOffsetsRequest_Spec{Spec: stratav1.OffsetSpec_OFFSET_SPEC_EARLIEST}})
	latest := listOffset(t, r, "rr", &stratav1.ListOffsetsRequest{Query: &stratav1.ListOffsetsRequest_Spec{Spec: stratav1.OffsetSpec_OFFSET_SPEC_LATEST}})
	// batchOf stamps every batch's single record baseTime.
	byTime := listOffset(t, r, "rr", &stratav1.ListOffsetsRequest{Query: &stratav1.ListOffsetsRequest_TimestampMs{TimestampMs: baseTime}})
	after := listOffset(t, r, "rr", &stratav1.ListOffsetsRequest{Query: &stratav1.ListOffsetsRequest_TimestampMs{TimestampMs: baseTime + time.Hour.Milliseconds()}})
	if earliest.Offset != 0 || latest.Offset != 150 || byTime.Offset != 0 || after.Offset != 150 {
		t.Fatalf("offsets: earliest %d latest %d by time %d after all %d; want 0 150 0 150", earliest.Offset, latest.Offset, byTime.Offset, after.Offset)
	}

	md, err := r.meta.GetMetadata(ctx, &stratav1.GetMetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Topics) != 1 || md.Topics[0].Name != "rr" || md.Topics[0].Partitions[0].Leader != 9 || len(md.Brokers) != 1 || md.Brokers[0].Address != r.addr {
		t.Fatalf("metadata does not route rr to the replica: %v", md)
	}
	lt, err := r.admin.ListTopics(ctx, &stratav1.ListTopicsRequest{})
	if err != nil || len(lt.Topics) != 1 || lt.Topics[0].Name != "rr" {
		t.Fatalf("list topics: %v, %v", lt, err)
	}
	d, err := r.admin.DescribeTopic(ctx, &stratav1.DescribeTopicRequest{Name: "rr"})
	if err != nil {
		t.Fatal(err)
	}
	p := d.Topic.Partitions[0]
	if p.HighWatermark != 150 || p.ColdEndOffset != 150 || p.HeadGeneration == 0 || p.HeadAgeMs < 0 || d.Topic.Config["remote.max.lag.ms"] != "1000" {
		t.Fatalf("describe on the replica: %v (config %v)", p, d.Topic.Config)
	}

	_, err = r.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "rr", Batch: batchOf(t, "x")})
	wantRefusal(t, "produce", err, codes.FailedPrecondition, "READ_REPLICA", false, "read-only replica")
	_, err = r.produce.InitProducer(ctx, &stratav1.InitProducerRequest{})
	wantRefusal(t, "init producer", err, codes.FailedPrecondition, "READ_REPLICA", false)
	_, err = r.admin.CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "new"})
	wantRefusal(t, "create topic", err, codes.FailedPrecondition, "READ_REPLICA", false)
	_, err = r.admin.DeleteTopic(ctx, &stratav1.DeleteTopicRequest{Name: "rr"})
	wantRefusal(t, "delete topic", err, codes.FailedPrecondition, "READ_REPLICA", false)
	_, err = r.admin.AlterTopicConfig(ctx, &stratav1.AlterTopicConfigRequest{Name: "rr", Set: map[string]string{"retention.ms": "1d"}})
	wantRefusal(t, "alter topic", err, codes.FailedPrecondition, "READ_REPLICA", false)
	_, err = r.admin.AddPartitions(ctx, &stratav1.AddPartitionsRequest{Name: "rr", Count: 2})
	wantRefusal(t, "add partitions", err, codes.FailedPrecondition, "READ_REPLICA", false)
	_, err = r.offsets.CommitOffsets(ctx, &stratav1.CommitOffsetsRequest{Group: "g", Offsets: []*stratav1.CommittedOffset{{Topic: "rr", Offset: 1}}})
	wantRefusal(t, "commit offsets", err, codes.FailedPrecondition, "READ_REPLICA", false)

	// The replica follows new uploads: a fetch long-polling at its end
	// gets them once the writer has uploaded them and a refresh read the
	// new head.
	produce(150, 250)
	waitCold(t, w, "rr", 250)
	testutil.WaitFor(t, 30*time.Second, "the replica to follow the new uploads", func() bool {
		return listOffset(t, r, "rr", &stratav1.ListOffsetsRequest{Query: &stratav1.ListOffsetsRequest_Spec{Spec: stratav1.OffsetSpec_OFFSET_SPEC_LATEST}}).Offset == 250
	})
	want, _ = w.readAll(t, "rr", 0, 0)
	raw, recs = r.readAll(t, "rr", 0, 0)
	if !bytes.Equal(raw, want) || len(recs) != 250 || checkValues(t, recs, 0) {
		t.Fatalf("after following, the replica served %d bytes, %d records; want the writer's %d bytes, 250 records", len(raw), len(recs), len(want))
	}
}

// TestReadReplicaNeedsAStore: a replica opens an existing store and never
// creates one: a missing fs directory is an error naming it.
func TestReadReplicaNeedsAStore(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nothing-here")
	cfg := replicaConfig(t, 9, missing)
	_, err := startReplicaErr(t, cfg)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(missing)) {
		t.Fatalf("start on a missing store: %v; want an error naming %s", err, missing)
	}
}

func startReplicaErr(t *testing.T, cfg config.Broker) (*broker.Broker, error) {
	b, err := broker.Start(testCtx(t), cfg, quietLogger(), NewPeers(nil, ""))
	if err == nil {
		b.Close()
	}
	return b, err
}

// checkValues reports whether recs are not the records produced from
// offset first on, in order, each once.
func checkValues(t *testing.T, recs []record.Record, first int) bool {
	for i, rec := range recs {
		if want := fmt.Sprintf("%04d-%0300d", first+i, first+i); string(rec.Value) != want {
			t.Errorf("record %d is %.12q, want %.12q", first+i, rec.Value, want)
			return true
		}
	}
	return false
}
