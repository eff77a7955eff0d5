package kafka

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCompressedBatchBoundedDecompressed pins where Strata differs from
// Kafka, as docs/KAFKA.md ("Compatibility tests") says and franz-go's
// TestConsumeMaxDecompressBatchBytes trips over: a gzip batch of three
// 1 MiB records, a few KB as sent, is refused with CORRUPT_MESSAGE on a
// topic with the default max.message.bytes (Strata bounds the decompressed
// records by it; Kafka bounds the batch as sent), and nothing is stored;
// on a topic whose max.message.bytes exceeds the decompressed size the
// same batch is stored and reads back whole.
func TestCompressedBatchBoundedDecompressed(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic(t, "default-max", 1)
	if _, err := tb.CreateTopic(testCtx(t), "large-max", 1, 1, map[string]string{"max.message.bytes": "4194304"}); err != nil {
		t.Fatal(err)
	}
	cl := tb.client(t,
		kgo.ProducerBatchCompression(kgo.GzipCompression()),
		kgo.ProducerBatchMaxBytes(4<<20),
		kgo.ProducerLinger(time.Second),
	)
	big := make([]byte, 1<<20)
	produce := func(topic string) error {
		return cl.ProduceSync(testCtx(t),
			&kgo.Record{Topic: topic, Value: big},
			&kgo.Record{Topic: topic, Value: big},
			&kgo.Record{Topic: topic, Value: big},
		).FirstErr()
	}

	if err := produce("default-max"); !errors.Is(err, kerr.CorruptMessage) {
		t.Fatalf("default max.message.bytes: got %v, want CORRUPT_MESSAGE", err)
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(testCtx(t), "default-max")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("default-max", 0); o.Err != nil || o.Offset != 0 {
		t.Fatalf("refused batch changed the partition: end offset %d, err %v", o.Offset, o.Err)
	}

	if err := produce("large-max"); err != nil {
		t.Fatalf("max.message.bytes 4 MiB: %v", err)
	}
	consumer := tb.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"large-max": {0: kgo.NewOffset().At(0)},
	}))
	var got []*kgo.Record
	for len(got) < 3 {
		fs := consumer.PollFetches(testCtx(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got = append(got, fs.Records()...)
	}
	for i, r := range got {
		if r.Offset != int64(i) || !bytes.Equal(r.Value, big) {
			t.Fatalf("record %d: offset %d, %d bytes; want offset %d, 1 MiB of zeros", i, r.Offset, len(r.Value), i)
		}
	}
}
