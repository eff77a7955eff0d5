package rpc

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

func TestProduceAndFetchBothForms(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	ctx := testCtx(t)
	desc := tb.createTopic(t, "events", 3, map[string]string{"retention.ms": "90d"})
	if len(desc.Partitions) != 3 || desc.Config["retention.ms"] != "7776000000" || desc.Overrides["retention.ms"] != "7776000000" {
		t.Fatalf("created topic: %v", desc)
	}

	// An encoded batch is stored byte for byte, apart from the offsets and
	// leader epoch the broker writes into its header.
	sent := batchOf(t, "a", "b", "c")
	want := append(record.Batch(nil), sent...)
	res, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "events", Partition: 1, Batch: sent, Acks: stratav1.Acks_ACKS_ALL})
	if err != nil {
		t.Fatal(err)
	}
	if res.BaseOffset != 0 || res.LastOffset != 2 || res.LogAppendTimeMs != -1 {
		t.Fatalf("produce answered %v", res)
	}
	// Simple records, with null and empty keys and a header.
	res, err = tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "events", Partition: 1, Acks: stratav1.Acks_ACKS_LEADER, Records: []*stratav1.Record{
		{Value: []byte("d")},
		{Key: []byte{}, Value: []byte("e"), Headers: []*stratav1.Header{{Key: "h", Value: []byte("v")}}, TimestampMs: 42},
	}, Compression: stratav1.Compression_COMPRESSION_ZSTD})
	if err != nil {
		t.Fatal(err)
	}
	if res.BaseOffset != 3 || res.LastOffset != 4 {
		t.Fatalf("second produce answered %v", res)
	}

	raw, recs := tb.readAll(t, "events", 1, 0)
	first, _, err := record.Next(raw)
	if err != nil {
		t.Fatal(err)
	}
	want.SetLeaderEpoch(first.LeaderEpoch())
	if !bytes.Equal(first, want) {
		t.Fatalf("the stored batch differs from the one sent")
	}
	if len(recs) != 5 {
		t.Fatalf("read %d records, want 5", len(recs))
	}
	for i, v := range []string{"a", "b", "c", "d", "e"} {
		if recs[i].Offset != int64(i) || string(recs[i].Value) != v {
			t.Fatalf("record %d: offset %d value %q", i, recs[i].Offset, recs[i].Value)
		}
	}
	if recs[3].Key != nil || recs[4].Key == nil || len(recs[4].Key) != 0 || recs[4].Timestamp != 42 ||
		len(recs[4].Headers) != 1 || string(recs[4].Headers[0].Value) != "v" {
		t.Fatalf("null/empty keys, timestamp or headers lost: %+v %+v", recs[3], recs[4])
	}

	// Decoded fetch from the middle of a batch starts exactly there.
	stream, err := tb.fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: "events", Partition: 1, Offset: 1, Decode: true, StopAtEnd: true})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Records) == 0 || resp.Records[0].Offset != 1 || string(resp.Records[0].Value) != "b" || resp.HighWatermark != 5 {
		t.Fatalf("decoded fetch: %v", resp)
	}

	for _, c := range []struct {
		q    *stratav1.ListOffsetsRequest
		want int64
	}{
		{&stratav1.ListOffsetsRequest{Topic: "events", Partition: 1, Query: &stratav1.ListOffsetsRequest_Spec{Spec: stratav1.OffsetSpec_OFFSET_SPEC_EARLIEST}}, 0},
		{&stratav1.ListOffsetsRequest{Topic: "events", Partition: 1, Query: &stratav1.ListOffsetsRequest_Spec{Spec: stratav1.OffsetSpec_OFFSET_SPEC_LATEST}}, 5},
		{&stratav1.ListOffsetsRequest{Topic: "events", Partition: 1, Query: &stratav1.ListOffsetsRequest_TimestampMs{TimestampMs: baseTime + 1}}, 1},
		{&stratav1.ListOffsetsRequest{Topic: "events", Partition: 1, Query: &stratav1.ListOffsetsRequest_TimestampMs{TimestampMs: 1 << 60}}, 5},
	} {
		ans, err := tb.fetch.ListOffsets(ctx, c.q)
		if err != nil || ans.Offset != c.want {
			t.Fatalf("ListOffsets(%v) = %v, %v; want %d", c.q.Query, ans, err, c.want)
		}
	}
}

// A fetch stream at the end of the log sends heartbeats, then the records
// produced while it waits, as soon as they commit.
func TestFetchFollowsNewData(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	ctx := testCtx(t)
	tb.createTopic(t, "live", 1, nil)
	stream, err := tb.fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: "live", Offset: 0, MaxWaitMs: 50})
	if err != nil {
		t.Fatal(err)
	}
	heartbeat, err := stream.Recv()
	if err != nil || len(heartbeat.Batches) != 0 || heartbeat.HighWatermark != 0 {
		t.Fatalf("want an empty heartbeat first, got %v %v", heartbeat, err)
	}
	for i := range 3 {
		if _, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "live", Batch: batchOf(t, fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	next := int64(0)
	deadline := time.Now().Add(10 * time.Second)
	for next < 3 {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Batches) > 0 {
			b, _, err := record.Next(resp.Batches)
			if err != nil || b.BaseOffset() != next {
				t.Fatalf("streamed batch at %d: %v", b.BaseOffset(), err)
			}
			next = resp.NextOffset
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream reached %d of 3 within the deadline", next)
		}
	}
}

// Stopping the broker gracefully and starting it on the same data dir keeps
// topics, settings, records, offsets and committed consumer positions.
func TestRestartKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	cfg := brokerConfig(t, 1, dir)
	tb := startBroker(t, cfg)
	ctx := testCtx(t)
	tb.createTopic(t, "keep", 2, map[string]string{"segment.bytes": "16KiB"})
	var values []string
	for i := range 200 {
		values = append(values, fmt.Sprintf("value-%03d-%0200d", i, i))
		if _, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "keep", Partition: int32(i % 2), Batch: batchOf(t, values[i])}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tb.offsets.CommitOffsets(ctx, &stratav1.CommitOffsetsRequest{Group: "g", Offsets: []*stratav1.CommittedOffset{{Topic: "keep", Partition: 1, Offset: 42, Metadata: "m"}}}); err != nil {
		t.Fatal(err)
	}
	tb.stop(t)

	tb = startBroker(t, cfg)
	d, err := tb.admin.DescribeTopic(ctx, &stratav1.DescribeTopicRequest{Name: "keep"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Topic.Config["segment.bytes"] != "16384" || d.Topic.Partitions[0].LogEndOffset != 100 || d.Topic.Partitions[0].HighWatermark != 100 || d.Topic.Partitions[0].LocalSegments < 2 {
		t.Fatalf("after restart: %v", d.Topic)
	}
	for p := range int32(2) {
		_, recs := tb.readAll(t, "keep", p, 0)
		if len(recs) != 100 {
			t.Fatalf("partition %d: %d records after restart", p, len(recs))
		}
		for i, r := range recs {
			if string(r.Value) != values[i*2+int(p)] {
				t.Fatalf("partition %d offset %d: %q", p, i, r.Value)
			}
		}
	}
	got, err := tb.offsets.FetchOffsets(ctx, &stratav1.FetchOffsetsRequest{Group: "g"})
	if err != nil || len(got.Offsets) != 1 || got.Offsets[0].Offset != 42 || got.Offsets[0].Metadata != "m" {
		t.Fatalf("committed offsets after restart: %v %v", got, err)
	}
}

func TestAlterConfigTakesEffectWithoutRestart(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	ctx := testCtx(t)
	tb.createTopic(t, "alter", 1, map[string]string{"max.message.bytes": "1024"})
	big := batchOf(t, string(make([]byte, 2000)))
	if _, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "alter", Batch: big}); reasonOf(err) != "RECORD_TOO_LARGE" {
		t.Fatalf("big batch before alter: %v", err)
	}
	resp, err := tb.admin.AlterTopicConfig(ctx, &stratav1.AlterTopicConfigRequest{Name: "alter", Set: map[string]string{"max.message.bytes": "1MiB", "message.timestamp.type": "LogAppendTime"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Topic.Config["max.message.bytes"] != "1048576" {
		t.Fatalf("altered config %v", resp.Topic.Config)
	}
	before := time.Now().UnixMilli()
	res, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "alter", Batch: big})
	if err != nil {
		t.Fatalf("big batch after alter: %v", err)
	}
	if res.LogAppendTimeMs < before {
		t.Fatalf("LogAppendTime %d not stamped (before %d)", res.LogAppendTimeMs, before)
	}
	_, recs := tb.readAll(t, "alter", 0, 0)
	if len(recs) != 1 || recs[0].Timestamp != res.LogAppendTimeMs {
		t.Fatalf("stored record time %d, stamped %d", recs[0].Timestamp, res.LogAppendTimeMs)
	}
	// Back to the default: deleted overrides leave the description.
	resp, err = tb.admin.AlterTopicConfig(ctx, &stratav1.AlterTopicConfigRequest{Name: "alter", Delete: []string{"max.message.bytes"}})
	if err != nil || resp.Topic.Overrides["max.message.bytes"] != "" || resp.Topic.Config["max.message.bytes"] != "1048588" {
		t.Fatalf("after delete: %v %v", resp, err)
	}
}

func TestTopicAdmin(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	ctx := testCtx(t)
	tb.createTopic(t, "t1", 2, nil)
	tb.createTopic(t, "t2", 1, nil)
	list, err := tb.admin.ListTopics(ctx, &stratav1.ListTopicsRequest{})
	if err != nil || len(list.Topics) != 2 || list.Topics[0].Name != "t1" || list.Topics[0].Partitions != 2 || list.Topics[0].ReplicationFactor != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	md, err := tb.meta.GetMetadata(ctx, &stratav1.GetMetadataRequest{Topics: []string{"t2"}})
	if err != nil || len(md.Brokers) != 1 || md.Brokers[0].Address != tb.addr || len(md.Topics) != 1 || md.Topics[0].Partitions[0].Leader != 1 || md.ControllerId != 1 {
		t.Fatalf("metadata: %v %v", md, err)
	}
	if _, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "t1", Batch: batchOf(t, "x")}); err != nil {
		t.Fatal(err)
	}
	dir := tb.DataDir()
	if _, err := tb.admin.DeleteTopic(ctx, &stratav1.DeleteTopicRequest{Name: "t1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "t1", Batch: batchOf(t, "x")}); reasonOf(err) != "TOPIC_NOT_FOUND" {
		t.Fatalf("produce to a deleted topic: %v", err)
	}
	if dirs := topicDirs(t, dir); len(dirs) != 1 {
		t.Fatalf("topic dirs after delete: %v", dirs)
	}
	// A topic created again under the old name starts empty.
	tb.createTopic(t, "t1", 1, nil)
	if raw, _ := tb.readAll(t, "t1", 0, 0); len(raw) != 0 {
		t.Fatal("a recreated topic has its predecessor's data")
	}
}

func TestHealthAndReflection(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	ctx := testCtx(t)
	h, err := grpc_health_v1.NewHealthClient(tb.conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	if err != nil || h.Status != grpc_health_v1.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", h, err)
	}
	rc, err := grpc_reflection_v1.NewServerReflectionClient(tb.conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Send(&grpc_reflection_v1.ServerReflectionRequest{MessageRequest: &grpc_reflection_v1.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := rc.Recv()
	if err != nil {
		t.Fatal(err)
	}
	services := map[string]bool{}
	for _, s := range resp.GetListServicesResponse().Service {
		services[s.Name] = true
	}
	for _, want := range []string{"strata.v1.ProduceService", "strata.v1.FetchService", "strata.v1.AdminService", "strata.v1.MetadataService", "strata.v1.OffsetService", "grpc.health.v1.Health"} {
		if !services[want] {
			t.Fatalf("reflection does not list %s: %v", want, services)
		}
	}
}

// Under flush.policy=interval a write is committed once every in-sync
// replica has written it, not once fsynced: with flush.ms far away an
// acks=all produce is answered at once and consumers read the record.
// (Under always the high watermark waits for the fsync: broker's
// TestIntervalAcknowledgesWrittenRecords.)
func TestIntervalCommitsWrittenRecords(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	ctx := testCtx(t)
	tb.createTopic(t, "lazy", 1, map[string]string{"flush.policy": "interval", "flush.ms": "1h"})
	if _, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "lazy", Batch: batchOf(t, "a"), Acks: stratav1.Acks_ACKS_ALL, TimeoutMs: 30_000}); err != nil {
		t.Fatalf("acks=all under interval, an hour before the next fsync: %v", err)
	}
	ans, err := tb.fetch.ListOffsets(ctx, &stratav1.ListOffsetsRequest{Topic: "lazy", Query: &stratav1.ListOffsetsRequest_Spec{Spec: stratav1.OffsetSpec_OFFSET_SPEC_LATEST}})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Offset != 1 {
		t.Fatalf("high watermark %d after an acknowledged write, want 1", ans.Offset)
	}
	if _, recs := tb.readAll(t, "lazy", 0, 0); len(recs) != 1 || string(recs[0].Value) != "a" {
		t.Fatalf("consumers read %v, want the acknowledged record", recs)
	}
}

// A graceful stop ends open fetch streams with UNAVAILABLE at once instead
// of waiting for consumers to leave.
func TestGracefulStopEndsFetchStreams(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	tb.createTopic(t, "s", 1, nil)
	stream, err := tb.fetch.Fetch(testCtx(t), &stratav1.FetchRequest{Topic: "s", MaxWaitMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := stream.Recv()
		got <- err
	}()
	stopped := make(chan struct{})
	go func() { tb.srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("GracefulStop waited on an open fetch stream")
	}
	if err := <-got; reasonOf(err) != "UNAVAILABLE" {
		t.Fatalf("stream ended with %v, want UNAVAILABLE", err)
	}
}

// TestFetchStreamsLendTheirBuffers: a read of the local log fills the
// buffer the fetch lends, the stream gives it back only once the response
// is sent (buffers given back are overwritten here), and streams reading
// side by side each get their own: four streams replay their partitions at
// once, and every record comes back as produced, with its batch's CRC
// intact.
func TestFetchStreamsLendTheirBuffers(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	ctx := testCtx(t)
	const partitions, batches, perBatch = 4, 40, 50
	tb.createTopic(t, "lend", partitions, nil)
	value := func(p, i int) string { return fmt.Sprintf("p%d-r%06d-%s", p, i, strings.Repeat("x", 900)) }
	for p := range partitions {
		for b := range batches {
			vals := make([]string, perBatch)
			for r := range vals {
				vals[r] = value(p, b*perBatch+r)
			}
			if _, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "lend", Partition: int32(p), Batch: batchOf(t, vals...), Acks: stratav1.Acks_ACKS_ALL}); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The broker reads into the buffer it is lent.
	var lent []byte
	res, err := tb.Broker.Fetch(ctx, broker.FetchRequest{Topic: "lend", Partition: 0, Offset: 0, MaxBytes: 256 << 10,
		Buffer: func(n int) []byte { lent = make([]byte, n); return lent }})
	if err != nil || len(res.Batches) == 0 || &res.Batches[0] != &lent[0] {
		t.Fatalf("fetch with a lent buffer: %v; the batches are not in it", err)
	}

	// A buffer given back too soon would be sent overwritten.
	poisonFetchBuffers = true
	defer func() { poisonFetchBuffers = false }()
	var wg sync.WaitGroup
	for p := range partitions {
		wg.Go(func() {
			stream, err := tb.fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: "lend", Partition: int32(p), MaxBytes: 256 << 10, StopAtEnd: true})
			if err != nil {
				t.Error(err)
				return
			}
			next := 0
			for {
				resp, err := stream.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Error(err)
					return
				}
				for data := resp.Batches; len(data) > 0; {
					b, rest, err := record.Next(data)
					if err != nil {
						t.Errorf("partition %d near record %d: %v", p, next, err)
						return
					}
					recs, err := b.Records()
					if err != nil {
						t.Error(err)
						return
					}
					for _, r := range recs {
						if string(r.Value) != value(p, next) {
							t.Errorf("partition %d record %d: %.12q, want %.12q", p, next, r.Value, value(p, next))
							return
						}
						next++
					}
					data = rest
				}
			}
			if next != batches*perBatch {
				t.Errorf("partition %d: read %d records, want %d", p, next, batches*perBatch)
			}
		})
	}
	wg.Wait()
}
