package rpc

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// TestProduceWithoutKeyToCompactedTopic: over gRPC a batch holding a
// record without a key is refused whole as INVALID_ARGUMENT with reason
// INVALID_RECORD and Kafka's message, not retriable, and nothing is
// appended; the strata client's producer reports the same error to the
// record's caller; keyed records go in both ways.
func TestProduceWithoutKeyToCompactedTopic(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	ctx := testCtx(t)
	tb.createTopic(t, "state", 1, map[string]string{"cleanup.policy": "compact", "remote.storage.enable": "false"})

	bl := record.NewBuilder(record.DefaultBatchOptions())
	bl.Add(record.Record{Timestamp: baseTime, Key: []byte("a"), Value: []byte("keyed")})
	bl.Add(record.Record{Timestamp: baseTime, Value: []byte("no key")})
	keyless, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	_, err = tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "state", Batch: keyless})
	code, info, _ := errorInfo(err)
	if code != codes.InvalidArgument || info == nil || info.Reason != "INVALID_RECORD" || info.Metadata["retriable"] != "false" ||
		!strings.Contains(err.Error(), "Compacted topic cannot accept message without key in topic partition state/0") {
		t.Fatalf("gRPC produce without a key: %v (%v)", err, info)
	}

	c, err := client.New(ctx, []string{tb.addr}, client.WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := c.NewProducer()
	defer p.Close()
	err = p.ProduceSync(ctx, &client.Record{Topic: "state", Key: []byte("a"), Value: []byte("1")}, &client.Record{Topic: "state", Value: []byte("2")})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != codes.InvalidArgument || ce.Reason != "INVALID_RECORD" || !strings.Contains(ce.Message, "without key") {
		t.Fatalf("client produce without a key: %v", err)
	}
	if end := logEndOf(t, tb, "state"); end != 0 {
		t.Fatalf("refused produces moved the log end to %d", end)
	}
	if err := p.ProduceSync(ctx, &client.Record{Topic: "state", Key: []byte("a"), Value: []byte("1")}, &client.Record{Topic: "state", Key: []byte("a")}); err != nil {
		t.Fatalf("client produce with keys (a tombstone too): %v", err)
	}
	if end := logEndOf(t, tb, "state"); end != 2 {
		t.Fatalf("log end %d after two keyed records, want 2", end)
	}
}

// logEndOf is the log end offset of partition 0 of topic, as described.
func logEndOf(t *testing.T, tb *testBroker, topic string) int64 {
	t.Helper()
	d, err := tb.admin.DescribeTopic(testCtx(t), &stratav1.DescribeTopicRequest{Name: topic})
	if err != nil {
		t.Fatal(err)
	}
	return d.Topic.Partitions[0].LogEndOffset
}
