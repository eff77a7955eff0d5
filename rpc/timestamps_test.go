package rpc

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// batchAt encodes one record per timestamp.
func batchAt(t testing.TB, ts ...int64) record.Batch {
	t.Helper()
	bl := record.NewBuilder(record.DefaultBatchOptions())
	for i, at := range ts {
		bl.Add(record.Record{Timestamp: at, Value: []byte{byte('a' + i)}})
	}
	b, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withHeader is b with its header changed by edit and a right CRC: a
// batch a producer could send.
func withHeader(b record.Batch, edit func(h []byte)) record.Batch {
	c := bytes.Clone(b)
	edit(c)
	binary.BigEndian.PutUint32(c[17:], crc32.Checksum(c[21:], crc32.MakeTable(crc32.Castagnoli)))
	return c
}

// attrs sets attribute bits (4 transactional, 5 control, 3 LogAppendTime).
func attrs(bits uint16) func(h []byte) {
	return func(h []byte) { binary.BigEndian.PutUint16(h[21:], binary.BigEndian.Uint16(h[21:])|bits) }
}

// year3000 is a timestamp that would hold its segment for a millennium.
var year3000 = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// TestTimestampBoundsAreLiveTopicSettings: a topic shows both bounds with
// their defaults, refuses a far-future batch under them (writing nothing),
// takes it once the bound is altered away, and holds old records to a
// before bound set on the live topic.
func TestTimestampBoundsAreLiveTopicSettings(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	ctx := testCtx(t)
	desc := tb.createTopic(t, "bounded", 1, nil)
	if desc.Config["message.timestamp.before.max.ms"] != "-1" || desc.Config["message.timestamp.after.max.ms"] != "3600000" {
		t.Fatalf("described settings %v", desc.Config)
	}
	produce := func(b record.Batch) error {
		_, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "bounded", Batch: b})
		return err
	}
	if err := produce(batchAt(t, year3000)); reasonOf(err) != "INVALID_TIMESTAMP" {
		t.Fatalf("a record of the year 3000: %v, want INVALID_TIMESTAMP", err)
	}
	// The simple-records form goes through the same check.
	_, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "bounded", Records: []*stratav1.Record{{Value: []byte("x"), TimestampMs: year3000}}})
	if reasonOf(err) != "INVALID_TIMESTAMP" {
		t.Fatalf("a simple record of the year 3000: %v, want INVALID_TIMESTAMP", err)
	}
	if data, _ := tb.readAll(t, "bounded", 0, 0); len(data) != 0 {
		t.Fatalf("refused batches left %d bytes in the log", len(data))
	}
	// The time lookup is not pulled to the future by what was refused.
	ans, err := tb.fetch.ListOffsets(ctx, &stratav1.ListOffsetsRequest{Topic: "bounded", Query: &stratav1.ListOffsetsRequest_TimestampMs{TimestampMs: time.Now().UnixMilli()}})
	if err != nil || ans.Offset != 0 {
		t.Fatalf("ListOffsets by time on the empty log: %v, %v", ans, err)
	}

	resp, err := tb.admin.AlterTopicConfig(ctx, &stratav1.AlterTopicConfigRequest{Name: "bounded",
		Set: map[string]string{"message.timestamp.after.max.ms": "-1", "message.timestamp.before.max.ms": "1d"}})
	if err != nil || resp.Topic.Overrides["message.timestamp.before.max.ms"] != "86400000" || resp.Topic.Config["message.timestamp.after.max.ms"] != "-1" {
		t.Fatalf("alter: %v, %v", resp, err)
	}
	if err := produce(batchAt(t, year3000)); err != nil {
		t.Fatalf("the year 3000 with message.timestamp.after.max.ms -1: %v", err)
	}
	twoDaysAgo := time.Now().Add(-48 * time.Hour).UnixMilli()
	if err := produce(batchAt(t, time.Now().UnixMilli(), twoDaysAgo)); reasonOf(err) != "INVALID_TIMESTAMP" {
		t.Fatalf("a record two days old under message.timestamp.before.max.ms 1d: %v", err)
	}
	if _, recs := tb.readAll(t, "bounded", 0, 0); len(recs) != 1 || recs[0].Timestamp != year3000 {
		t.Fatalf("the log holds %v, want the one accepted record", recs)
	}
}

// TestProducedTimestampTypeFollowsTheTopic: a LogAppendTime topic stores
// what it accepts with the broker's time, whatever the producer stamped;
// a batch claiming LogAppendTime is refused on either kind of topic.
func TestProducedTimestampTypeFollowsTheTopic(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	ctx := testCtx(t)
	tb.createTopic(t, "stamped", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	tb.createTopic(t, "created", 1, nil)
	for _, topic := range []string{"stamped", "created"} {
		claimed := withHeader(batchAt(t, time.Now().UnixMilli()), attrs(0x08))
		if _, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: topic, Batch: claimed}); reasonOf(err) != "INVALID_TIMESTAMP" {
			t.Fatalf("%s: a batch claiming LogAppendTime: %v", topic, err)
		}
	}
	before := time.Now().UnixMilli()
	res, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "stamped", Batch: batchAt(t, year3000, -7)})
	if err != nil {
		t.Fatalf("the producer's times are not the LogAppendTime topic's: %v", err)
	}
	data, recs := tb.readAll(t, "stamped", 0, 0)
	stored := record.Batch(data)
	if res.LogAppendTimeMs < before || stored.TimestampType() != record.LogAppendTime || stored.MaxTimestamp() != res.LogAppendTimeMs ||
		len(recs) != 2 || recs[0].Timestamp != res.LogAppendTimeMs || recs[1].Timestamp != res.LogAppendTimeMs {
		t.Fatalf("stored %v at %d with records %v; answered %d", stored.TimestampType(), stored.MaxTimestamp(), recs, res.LogAppendTimeMs)
	}
	if data, _ := tb.readAll(t, "created", 0, 0); len(data) != 0 {
		t.Fatalf("created holds %d bytes", len(data))
	}
}

// badBatches are the matrix's cases of batches a producer may not send.
func badBatches(t *testing.T) []struct {
	name   string
	batch  record.Batch
	code   codes.Code
	reason string
	meta   map[string]string
} {
	now := time.Now().UnixMilli()
	good := batchAt(t, now-10, now)
	return []struct {
		name   string
		batch  record.Batch
		code   codes.Code
		reason string
		meta   map[string]string
	}{
		{"a record of the year 3000", batchAt(t, now, year3000), codes.InvalidArgument, "INVALID_TIMESTAMP", map[string]string{"timestamp": strconv.FormatInt(year3000, 10)}},
		{"a record before 1970", batchAt(t, now, -1000), codes.InvalidArgument, "INVALID_TIMESTAMP", map[string]string{"timestamp": "-1000"}},
		{"a header max timestamp of 0", withHeader(good, func(h []byte) { binary.BigEndian.PutUint64(h[35:], 0) }), codes.InvalidArgument, "CORRUPT_BATCH", nil},
		{"a control batch", withHeader(good, attrs(0x20)), codes.InvalidArgument, "INVALID_RECORD", nil},
		{"a transactional batch", withHeader(good, attrs(0x10)), codes.Unimplemented, "TRANSACTIONS_NOT_SUPPORTED", nil},
		{"a batch claiming LogAppendTime", withHeader(good, attrs(0x08)), codes.InvalidArgument, "INVALID_TIMESTAMP", nil},
	}
}
