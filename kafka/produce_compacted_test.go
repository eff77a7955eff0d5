package kafka

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/record"
)

// compactedTopic creates a one-partition compacted topic.
func compactedTopic(t *testing.T, tb *testBroker, name string) {
	t.Helper()
	if _, err := tb.CreateTopic(testCtx(t), name, 1, 1, map[string]string{"cleanup.policy": "compact", "remote.storage.enable": "false"}); err != nil {
		t.Fatal(err)
	}
}

// logEnd is the log end offset of partition 0 of topic.
func logEnd(t *testing.T, tb *testBroker, topic string) int64 {
	t.Helper()
	d, err := tb.DescribeTopic(topic)
	if err != nil {
		t.Fatal(err)
	}
	return d.Partitions[0].LogEndOffset
}

// TestProduceWithoutKeyToCompactedTopic: over the Kafka protocol (kgo, in
// one batch with keyed records, uncompressed and compressed) a record
// without a key is refused with INVALID_RECORD and Kafka's message, the
// whole batch with it, and nothing is appended; keyed batches go in.
func TestProduceWithoutKeyToCompactedTopic(t *testing.T) {
	tb := startBroker(t)
	ctx := testCtx(t)
	compactedTopic(t, tb, "state")
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.ZstdCompression()} {
		cl := tb.client(t, kgo.ProducerLinger(50*time.Millisecond), kgo.ProducerBatchCompression(codec),
			kgo.RecordRetries(0), kgo.DefaultProduceTopic("state"), kgo.RequiredAcks(kgo.AllISRAcks()))
		before := logEnd(t, tb, "state")
		// Three records in one batch (one linger), the middle one keyless.
		results := make(chan error, 3)
		for _, r := range []*kgo.Record{{Key: []byte("a"), Value: []byte("1")}, {Value: []byte("2")}, {Key: []byte("b"), Value: []byte("3")}} {
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) { results <- err })
		}
		for range 3 {
			if err := <-results; !errors.Is(err, kerr.InvalidRecord) {
				t.Fatalf("%v: a batch with a keyless record: %v, want INVALID_RECORD", codec, err)
			}
		}
		if end := logEnd(t, tb, "state"); end != before {
			t.Fatalf("%v: the refused batch moved the log end from %d to %d", codec, before, end)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("a"), Value: []byte("1")}, &kgo.Record{Key: []byte{}, Value: nil}).FirstErr(); err != nil {
			t.Fatalf("%v: keyed records (an empty key, a tombstone): %v", codec, err)
		}
	}
	if end := logEnd(t, tb, "state"); end != 4 {
		t.Fatalf("log end %d after two keyed batches of two, want 4", end)
	}

	// On the wire: the partition's error is INVALID_RECORD with Kafka's
	// message (v8+ carries it).
	bl := record.NewBuilder(record.DefaultBatchOptions())
	bl.Add(record.Record{Timestamp: time.Now().UnixMilli(), Value: []byte("v")})
	batch, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	preq := kmsg.NewPtrProduceRequest()
	preq.Acks, preq.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "state"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = batch
	pt.Partitions = append(pt.Partitions, pp)
	preq.Topics = append(preq.Topics, pt)
	resp, err := preq.RequestWith(ctx, tb.client(t))
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.InvalidRecord.Code || p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "Compacted topic cannot accept message without key in topic partition state/0") {
		t.Fatalf("raw produce of a keyless record: error %d, message %v", p.ErrorCode, p.ErrorMessage)
	}
}

// TestKcatProduceWithoutKeyToCompactedTopic: kcat, librdkafka's client,
// gets the refusal (INVALID_RECORD, which librdkafka words as "Broker
// failed to validate record"; kcat prints no broker message) and exits
// non-zero; with keys (-K) its records go in.
func TestKcatProduceWithoutKeyToCompactedTopic(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat not found (apt-get install -y kcat; make tools does it): %v", err)
	}
	tb := startBroker(t)
	compactedTopic(t, tb, "state")
	run := func(stdin string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, append([]string{"-P", "-b", tb.addr, "-t", "state", "-X", "message.send.max.retries=0"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("no key\n")
	if err == nil || !strings.Contains(out, "Broker failed to validate record") {
		t.Fatalf("kcat without a key: %v\n%s", err, out)
	}
	if end := logEnd(t, tb, "state"); end != 0 {
		t.Fatalf("the refused record moved the log end to %d", end)
	}
	if out, err := run("k1:v1\nk2:v2\n", "-K", ":"); err != nil {
		t.Fatalf("kcat with keys: %v\n%s", err, out)
	}
	if end := logEnd(t, tb, "state"); end != 2 {
		t.Fatalf("log end %d after two keyed records, want 2", end)
	}
}
