package rpc

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// withStore points a broker config at a MinIO bucket.
func withStore(cfg config.Broker, m *miniotest.Server) config.Broker {
	cfg.ObjectStore.Type = config.ObjectStoreS3
	cfg.ObjectStore.Endpoint = m.Endpoint
	cfg.ObjectStore.Bucket = m.Bucket
	cfg.ObjectStore.AccessKey = m.AccessKey
	cfg.ObjectStore.SecretKey = config.Secret(m.SecretKey)
	cfg.ObjectStore.PathStyle = true
	return cfg
}

// fetchOnce reads one response of a stop-at-end fetch.
func fetchOnce(t *testing.T, tb *testBroker, topic string, offset int64) (*stratav1.FetchResponse, error) {
	stream, err := tb.fetch.Fetch(testCtx(t), &stratav1.FetchRequest{Topic: topic, Offset: offset, StopAtEnd: true})
	if err != nil {
		return nil, err
	}
	resp, err := stream.Recv()
	if err == io.EOF {
		return &stratav1.FetchResponse{}, nil
	}
	return resp, err
}

// TestColdReadFromAnyBroker: once history is in the bucket and gone from
// the leader's disk, the leader serves it from the cold tier, byte for byte,
// and so does a broker that holds no replica of the partition; at the hot
// tail that broker answers NOT_LEADER.
func TestColdReadFromAnyBroker(t *testing.T) {
	m := miniotest.Start(t)
	dir := t.TempDir()
	b1 := startBroker(t, withStore(brokerConfig(t, 1, dir+"/b1"), m))
	b2 := joinSecondBroker(t, b1, withStore(brokerConfig(t, 2, dir+"/b2"), m))
	ctx := testCtx(t)
	// Just after the second broker joined the metadata group, a busy
	// machine can leave the group without a leader for a moment: the
	// refusal is retriable, and a client would retry.
	var err error
	testutil.WaitFor(t, 20*time.Second, "the topic created", func() bool {
		_, err = b1.admin.CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "cold", Partitions: 2, Config: map[string]string{
			"segment.bytes": "16KiB", "local.retention.bytes": "16KiB", "retention.ms": "-1"}})
		if status.Code(err) == codes.Unavailable {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		return true
	})
	p := ledBy(t, b1, "cold", 1)
	var sent []byte
	for i := range 200 {
		batch := batchOf(t, fmt.Sprintf("%04d-%0500d", i, i))
		if _, err := b1.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "cold", Partition: p, Batch: batch}); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, batch...)
	}
	testutil.Eventually(t, time.Minute, "history to move to the cold tier", func() error {
		d, err := b1.admin.DescribeTopic(ctx, &stratav1.DescribeTopicRequest{Name: "cold"})
		if err != nil {
			t.Fatal(err)
		}
		if part := d.Topic.Partitions[p]; !(part.LocalStartOffset > 100 && part.LogStartOffset == 0 && part.ColdSegments > 5) {
			return fmt.Errorf("%v", part)
		}
		return nil
	})
	for _, tb := range []*testBroker{b1, b2} {
		resp, err := tb.fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: "cold", Partition: p, Offset: 0, MaxBytes: 1 << 20, StopAtEnd: true})
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for {
			r, err := resp.Recv()
			if err != nil {
				if tb == b2 && reasonOf(err) == "NOT_LEADER" {
					break // past the cold tier: the leader has the rest
				}
				if err == io.EOF {
					break
				}
				t.Fatalf("broker %d: %v", tb.ID(), err)
			}
			got = append(got, r.Batches...)
		}
		// What came back is the stored batches: the sent ones with offsets
		// and leader epoch written in.
		if len(got) == 0 || len(got) > len(sent) {
			t.Fatalf("broker %d returned %d bytes of %d", tb.ID(), len(got), len(sent))
		}
		for rest, want := got, sent; len(rest) > 0; {
			g, next, err := record.Next(rest)
			if err != nil {
				t.Fatal(err)
			}
			w, wnext, _ := record.Next(want)
			w = append(record.Batch(nil), w...)
			w.SetBaseOffset(g.BaseOffset())
			w.SetLeaderEpoch(g.LeaderEpoch())
			if !bytes.Equal(g, w) {
				t.Fatalf("broker %d: the batch at %d differs from what was produced", tb.ID(), g.BaseOffset())
			}
			rest, want = next, wnext
		}
		t.Logf("broker %d served %d bytes of history", tb.ID(), len(got))
	}
	// At the hot tail, only the leader answers.
	if _, err := fetchOnce(t, b2, "cold", 199); reasonOf(err) != "NOT_LEADER" {
		t.Fatalf("hot read from a broker without a replica: %v", err)
	}
}
