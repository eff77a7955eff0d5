package rpc

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// errorInfo returns the code and ErrorInfo of a call's error.
func errorInfo(err error) (codes.Code, *errdetails.ErrorInfo, *errdetails.RetryInfo) {
	st, _ := status.FromError(err)
	var info *errdetails.ErrorInfo
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			info = d
		case *errdetails.RetryInfo:
			retry = d
		}
	}
	return st.Code(), info, retry
}

func reasonOf(err error) string {
	_, info, _ := errorInfo(err)
	if info == nil {
		return ""
	}
	return info.Reason
}

func topicDirs(t testing.TB, dataDir string) []string {
	entries, err := os.ReadDir(filepath.Join(dataDir, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// badInput is a call the matrix makes and how it must fail.
type badInput struct {
	name      string
	call      func() error
	code      codes.Code
	reason    string
	retriable bool
	meta      map[string]string
}

// TestBadInputMatrix sends a real request for every error reason through
// the gRPC server, checks its code, reason, retriable flag and detail, and
// then that the log holds exactly what it held before.
func TestBadInputMatrix(t *testing.T) {
	dir := t.TempDir()
	b1 := startBroker(t, brokerConfig(t, 1, filepath.Join(dir, "b1")))
	ctx := testCtx(t)
	b1.createTopic(t, "good", 2, map[string]string{"max.message.bytes": "4096"})
	for i := range 3 {
		if _, err := b1.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "good", Batch: batchOf(t, fmt.Sprint(i), "x")}); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := b1.readAll(t, "good", 0, 0)

	// A second broker in the same metadata group, for the reasons that need
	// two: NOT_LEADER and NOT_ENOUGH_REPLICAS.
	b2 := joinSecondBroker(t, b1, brokerConfig(t, 2, filepath.Join(dir, "b2")))
	b3 := joinSecondBroker(t, b1, brokerConfig(t, 3, filepath.Join(dir, "b3")))
	b1.createTopic(t, "trio", 3, map[string]string{"replication.factor": "3", "min.insync.replicas": "3"})

	corrupt := batchOf(t, "corrupt")
	corrupt[len(corrupt)-2] ^= 0xff
	produce := func(req *stratav1.ProduceRequest) func() error {
		return func() error { _, err := b1.produce.Produce(ctx, req); return err }
	}
	cases := []badInput{
		{"unknown topic", produce(&stratav1.ProduceRequest{Topic: "nope", Batch: batchOf(t, "x")}), codes.NotFound, "TOPIC_NOT_FOUND", false, nil},
		{"unknown partition", produce(&stratav1.ProduceRequest{Topic: "good", Partition: 7, Batch: batchOf(t, "x")}), codes.NotFound, "PARTITION_NOT_FOUND", false, nil},
		{"batch over max.message.bytes", produce(&stratav1.ProduceRequest{Topic: "good", Batch: batchOf(t, string(make([]byte, 5000)))}), codes.InvalidArgument, "RECORD_TOO_LARGE", false, map[string]string{"max": "4096"}},
		{"batch with a bad CRC", produce(&stratav1.ProduceRequest{Topic: "good", Batch: corrupt}), codes.InvalidArgument, "CORRUPT_BATCH", false, nil},
		{"batch cut short", produce(&stratav1.ProduceRequest{Topic: "good", Batch: batchOf(t, "short")[:40]}), codes.InvalidArgument, "CORRUPT_BATCH", false, nil},
		{"records and batch", produce(&stratav1.ProduceRequest{Topic: "good", Batch: batchOf(t, "x"), Records: []*stratav1.Record{{Value: []byte("y")}}}), codes.InvalidArgument, "INVALID_REQUEST", false, nil},
		{"empty produce", produce(&stratav1.ProduceRequest{Topic: "good"}), codes.InvalidArgument, "INVALID_REQUEST", false, nil},
		{"fetch past the end", func() error {
			stream, err := b1.fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: "good", Offset: 100})
			if err == nil {
				_, err = stream.Recv()
			}
			return err
		}, codes.OutOfRange, "OFFSET_OUT_OF_RANGE", false, map[string]string{"log_start_offset": "0", "high_watermark": "6"}},
		{"bad config value", func() error {
			_, err := b1.admin.CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "cfg", Config: map[string]string{"retention.ms": "soon"}})
			return err
		}, codes.InvalidArgument, "INVALID_CONFIG", false, map[string]string{"key": "retention.ms", "value": "soon"}},
		{"unknown config key", func() error {
			_, err := b1.admin.AlterTopicConfig(ctx, &stratav1.AlterTopicConfigRequest{Name: "good", Set: map[string]string{"retention.msec": "1"}})
			return err
		}, codes.InvalidArgument, "INVALID_CONFIG", false, map[string]string{"key": "retention.msec"}},
		{"duplicate topic", func() error {
			_, err := b1.admin.CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "good"})
			return err
		}, codes.AlreadyExists, "TOPIC_ALREADY_EXISTS", false, nil},
		{"delete of a missing topic", func() error {
			_, err := b1.admin.DeleteTopic(ctx, &stratav1.DeleteTopicRequest{Name: "missing"})
			return err
		}, codes.NotFound, "TOPIC_NOT_FOUND", false, nil},
		{"bad topic name", func() error {
			_, err := b1.admin.CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "no spaces"})
			return err
		}, codes.InvalidArgument, "INVALID_TOPIC_NAME", false, nil},
		{"produce to a follower", func() error {
			_, err := b2.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "good", Batch: batchOf(t, "x")})
			return err
		}, codes.FailedPrecondition, "NOT_LEADER", true, map[string]string{"leader_id": "1", "leader_address": b1.addr}},
		{"fetch from a follower", func() error {
			stream, err := b2.fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: "good"})
			if err == nil {
				_, err = stream.Recv()
			}
			return err
		}, codes.FailedPrecondition, "NOT_LEADER", true, map[string]string{"leader_address": b1.addr}},
		{"epoch query at a follower", func() error {
			_, err := stratav1.NewReplicationServiceClient(b2.conn).EndOffsetForEpoch(ctx, &stratav1.EndOffsetForEpochRequest{Topic: "good", TopicId: partitionTopicID(t, b1, "good")})
			return err
		}, codes.FailedPrecondition, "NOT_LEADER", true, map[string]string{"leader_id": "1", "leader_address": b1.addr}},
		{"acks=all below min.insync.replicas", func() error {
			// Broker 3 stops: the controller takes it out of the ISRs, and
			// the partitions broker 1 leads are left with two in-sync
			// replicas of the three min.insync.replicas asks for.
			p := ledBy(t, b1, "trio", 1)
			b3.stop(t)
			waitForISR(t, b1, "trio", p, 2)
			_, err := b1.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "trio", Partition: p, Batch: batchOf(t, "x"), Acks: stratav1.Acks_ACKS_ALL})
			return err
		}, codes.Unavailable, "NOT_ENOUGH_REPLICAS", true, nil},
	}
	for _, c := range badBatches(t) {
		cases = append(cases, badInput{c.name, produce(&stratav1.ProduceRequest{Topic: "good", Batch: c.batch}), c.code, c.reason, false, c.meta})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			code, info, _ := errorInfo(err)
			if code != c.code || info == nil || info.Reason != c.reason || info.Domain != ErrorDomain {
				t.Fatalf("got %v (reason %v), want %v %s", err, info, c.code, c.reason)
			}
			if info.Metadata["retriable"] != fmt.Sprint(c.retriable) {
				t.Fatalf("retriable %q, want %v", info.Metadata["retriable"], c.retriable)
			}
			for k, v := range c.meta {
				if info.Metadata[k] != v {
					t.Fatalf("metadata %s = %q, want %q (all: %v)", k, info.Metadata[k], v, info.Metadata)
				}
			}
			after, _ := b1.readAll(t, "good", 0, 0)
			if string(after) != string(before) {
				t.Fatal("the log changed")
			}
		})
	}

	t.Run("refused while the disk is short of space", func(t *testing.T) {
		b1.stop(t)
		// This broker starts with room, then its disk runs short
		// (TestStartsOnAFullDisk starts one short of it).
		var free atomic.Int64
		free.Store(1 << 40)
		b := startBroker(t, b1.cfg, broker.WithFreeSpace(func(string) (int64, error) { return free.Load(), nil }))
		free.Store(int64(b1.cfg.Storage.MinFreeBytes) - 1)
		// The restarted broker leads its partitions again once the
		// controller sees it back; only then is the disk check reached.
		testutil.WaitFor(t, 20*time.Second, "a leader of good/0", func() bool {
			md, err := b.meta.GetMetadata(testCtx(t), &stratav1.GetMetadataRequest{Topics: []string{"good"}})
			return err == nil && md.Topics[0].Partitions[0].Leader == b.cfg.NodeID
		})
		_, err := b.produce.Produce(testCtx(t), &stratav1.ProduceRequest{Topic: "good", Batch: batchOf(t, "x")})
		code, info, retry := errorInfo(err)
		if code != codes.ResourceExhausted || info == nil || info.Reason != "STORAGE_FULL" || info.Metadata["retriable"] != "true" || retry == nil || retry.RetryDelay.AsDuration() <= 0 {
			t.Fatalf("got %v, want STORAGE_FULL with a retry delay", err)
		}
		if want := fmt.Sprint(b1.cfg.Storage.MinFreeBytes - 1); info.Metadata["free_bytes"] != want || !strings.Contains(err.Error(), "storage.min_free_bytes") {
			t.Fatalf("got %v (metadata %v), want free_bytes %s and the setting named", err, info.Metadata, want)
		}
		after, _ := b.readAll(t, "good", 0, 0)
		if string(after) != string(before) {
			t.Fatal("the log changed")
		}
	})
}

// joinSecondBroker starts another broker with b1 as its gossip seed: b1,
// the controller, adds it to the metadata group and registers it.
func joinSecondBroker(t *testing.T, b1 *testBroker, cfg config.Broker) *testBroker {
	cfg.Gossip.Join = []string{b1.cfg.Gossip.Listen}
	b2 := startBroker(t, cfg)
	testutil.Eventually(t, 10*time.Second, "broker 2 to be registered", func() error {
		md, err := b1.meta.GetMetadata(testCtx(t), &stratav1.GetMetadataRequest{})
		if err == nil && slices.ContainsFunc(md.Brokers, func(b *stratav1.Broker) bool { return b.Id == cfg.NodeID }) {
			return nil
		}
		return fmt.Errorf("%v %v", md, err)
	})
	return b2
}

// ledBy returns a partition of topic that broker id leads.
func ledBy(t *testing.T, b *testBroker, topic string, id int32) int32 {
	md, err := b.meta.GetMetadata(testCtx(t), &stratav1.GetMetadataRequest{Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range md.Topics[0].Partitions {
		if p.Leader == id {
			return p.Partition
		}
	}
	t.Fatalf("broker %d leads no partition of %s", id, topic)
	return 0
}

// waitForISR waits until a partition's ISR has n members.
func waitForISR(t *testing.T, b *testBroker, topic string, p int32, n int) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("the ISR of %s/%d to reach %d members", topic, p, n), func() error {
		md, err := b.meta.GetMetadata(testCtx(t), &stratav1.GetMetadataRequest{Topics: []string{topic}})
		if err != nil {
			return err
		}
		if isr := md.Topics[0].Partitions[p].Isr; len(isr) != n {
			return fmt.Errorf("ISR %v", isr)
		}
		return nil
	})
}
