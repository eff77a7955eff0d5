package kafka

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// scrape is the broker's metrics exposition as sample → value.
func (tb *testBroker) scrape(t *testing.T) map[string]float64 {
	t.Helper()
	var buf bytes.Buffer
	tb.WriteMetrics(&buf)
	out := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("bad sample line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

// TestKafkaRequestMetrics: after kgo traffic the metrics count requests
// by API and version, with a latency histogram per API and version, and
// the error codes of answers by Kafka error name.
func TestKafkaRequestMetrics(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic(t, "metered", 2)
	cl := tb.client(t)
	ctx := testCtx(t)
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "metered", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	consumer := tb.client(t, kgo.ConsumeTopics("metered"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for n := 0; n < 10; {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		n += fs.NumRecords()
	}
	// Two partitions of a topic that does not exist: two errors.
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "no-such-topic"
	for p := range int32(2) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	c := dialRaw(t, tb.addr)
	c.ask(req, 6)

	m := tb.scrape(t)
	sum := func(prefix string) (n float64) {
		for k, v := range m {
			if strings.HasPrefix(k, prefix) {
				n += v
			}
		}
		return n
	}
	if n := sum(`strata_kafka_requests_total{api="Produce",`); n < 10 {
		t.Errorf("Produce requests counted: %v, want at least 10", n)
	}
	if n := sum(`strata_kafka_requests_total{api="Fetch",`); n < 1 {
		t.Errorf("Fetch requests counted: %v", n)
	}
	if n := sum(`strata_kafka_requests_total{api="ApiVersions",`); n < 1 {
		t.Errorf("ApiVersions requests counted: %v", n)
	}
	if n := m[`strata_kafka_requests_total{api="ListOffsets",version="6"}`]; n != 1 {
		t.Errorf("ListOffsets v6 requests: %v, want 1", n)
	}
	if n := m[`strata_kafka_errors_total{api="ListOffsets",version="6",error="UNKNOWN_TOPIC_OR_PARTITION"}`]; n != 2 {
		t.Errorf("ListOffsets v6 UNKNOWN_TOPIC_OR_PARTITION: %v, want 2", n)
	}
	if n := m[`strata_kafka_latency_seconds_count{api="ListOffsets",version="6"}`]; n != 1 {
		t.Errorf("ListOffsets v6 latency count: %v, want 1", n)
	}
	if n := m[`strata_kafka_latency_seconds_bucket{api="ListOffsets",version="6",le="+Inf"}`]; n != 1 {
		t.Errorf("ListOffsets v6 +Inf bucket: %v, want 1", n)
	}
	if n := sum(`strata_kafka_errors_total{api="Produce",`); n != 0 {
		t.Errorf("Produce errors: %v, want none", n)
	}
	if n := m[`strata_kafka_connections`]; n < 2 {
		t.Errorf("open connections: %v, want at least the two clients' and the test's", n)
	}
}
