package rpc

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// TestTopicCompressionType: a topic with compression.type=zstd stores an
// uncompressed idempotent batch in zstd, keeping its offsets, producer id,
// epoch, sequence and timestamps, with a valid CRC; a resend is still
// known as the duplicate it is; records sent as simple messages are stored
// in zstd too; the setting is altered live (gzip, then producer, which
// keeps the producer's codec); and the follower's log holds the same bytes
// the leader serves.
func TestTopicCompressionType(t *testing.T) {
	bs := threeBrokers(t)
	ctx := testCtx(t)
	createEverywhere(t, bs, "squeezed", 1, map[string]string{"replication.factor": "2", "compression.type": "zstd"})
	st := partitionState(t, bs[0], "squeezed", 0)
	leader := byID(bs, st.Metadata.Leader)
	// Under load an election of the metadata group may be under way:
	// producer ids come from the controller, so wait for one.
	var pid int64
	testutil.WaitFor(t, 20*time.Second, "a producer id", func() bool {
		resp, err := bs[0].produce.InitProducer(ctx, &stratav1.InitProducerRequest{})
		pid = resp.GetProducerId()
		return err == nil
	})

	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = pid, 0, 0
	sent := []record.Record{
		{Timestamp: baseTime, Key: []byte("a"), Value: bytes.Repeat([]byte("alpha "), 50)},
		{Timestamp: baseTime + 5, Key: nil, Value: []byte("beta"), Headers: []record.Header{{Key: "h", Value: []byte("1")}}},
		{Timestamp: baseTime + 2, Key: []byte("c"), Value: nil},
	}
	batch, err := record.Encode(opts, sent...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := leader.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "squeezed", Batch: bytes.Clone(batch), Acks: stratav1.Acks_ACKS_ALL})
	if err != nil {
		t.Fatal(err)
	}
	if res.BaseOffset != 0 || res.LastOffset != 2 {
		t.Fatalf("offsets %d..%d, want 0..2", res.BaseOffset, res.LastOffset)
	}
	dup, err := leader.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "squeezed", Batch: bytes.Clone(batch), Acks: stratav1.Acks_ACKS_ALL})
	if err != nil || !dup.Duplicate || dup.BaseOffset != 0 {
		t.Fatalf("resend: %+v, %v; want the duplicate of offset 0", dup, err)
	}

	// Simple records, sent uncompressed.
	if _, err := leader.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "squeezed", Acks: stratav1.Acks_ACKS_ALL,
		Records: []*stratav1.Record{{Value: []byte("plain")}}, Compression: stratav1.Compression_COMPRESSION_NONE}); err != nil {
		t.Fatal(err)
	}
	// Altered live: gzip, then the producer's own codec.
	produceOne := func(set string, value string) {
		t.Helper()
		if _, err := bs[1].admin.AlterTopicConfig(ctx, &stratav1.AlterTopicConfigRequest{Name: "squeezed", Set: map[string]string{"compression.type": set}}); err != nil {
			t.Fatal(err)
		}
		b, err := record.Encode(record.DefaultBatchOptions(), record.Record{Timestamp: baseTime, Value: []byte(value)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leader.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "squeezed", Batch: b, Acks: stratav1.Acks_ACKS_ALL}); err != nil {
			t.Fatal(err)
		}
	}
	produceOne("gzip", "zipped")
	produceOne("producer", "as sent")
	if _, err := bs[0].admin.AlterTopicConfig(ctx, &stratav1.AlterTopicConfigRequest{Name: "squeezed", Set: map[string]string{"compression.type": "brotli"}}); err == nil {
		t.Fatal("compression.type=brotli was accepted")
	}

	raw, recs := leader.readAll(t, "squeezed", 0, 0)
	var codecs []record.Compression
	for data := raw; len(data) > 0; {
		b, rest, err := record.NextVerified(data)
		if err != nil {
			t.Fatalf("a stored batch fails its checks: %v", err)
		}
		codecs = append(codecs, b.Compression())
		if b.BaseOffset() == 0 {
			if b.ProducerID() != pid || b.ProducerEpoch() != 0 || b.BaseSequence() != 0 || b.NumRecords() != 3 ||
				b.FirstTimestamp() != batch.FirstTimestamp() || b.MaxTimestamp() != batch.MaxTimestamp() {
				t.Fatalf("the stored batch's header lost what the producer sent: pid %d epoch %d seq %d, %d records, timestamps %d/%d",
					b.ProducerID(), b.ProducerEpoch(), b.BaseSequence(), b.NumRecords(), b.FirstTimestamp(), b.MaxTimestamp())
			}
		}
		data = rest
	}
	want := []record.Compression{record.CompressionZstd, record.CompressionZstd, record.CompressionGzip, record.CompressionNone}
	if fmt.Sprint(codecs) != fmt.Sprint(want) {
		t.Fatalf("stored codecs %v, want %v", codecs, want)
	}
	if len(recs) != 6 {
		t.Fatalf("read %d records, want 6", len(recs))
	}
	for i, r := range recs[:3] {
		w := sent[i]
		if r.Offset != int64(i) || r.Timestamp != w.Timestamp || !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) ||
			(r.Key == nil) != (w.Key == nil) || (r.Value == nil) != (w.Value == nil) || len(r.Headers) != len(w.Headers) {
			t.Fatalf("record %d: %+v, want %+v", i, r, w)
		}
	}
	if string(recs[3].Value) != "plain" || string(recs[4].Value) != "zipped" || string(recs[5].Value) != "as sent" {
		t.Fatalf("records 3..5: %q %q %q", recs[3].Value, recs[4].Value, recs[5].Value)
	}

	// The follower stores the leader's bytes.
	id := partitionTopicID(t, bs[0], "squeezed")
	for _, rid := range st.Metadata.Replicas {
		b := byID(bs, rid)
		testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("broker %d to have every batch", rid), func() bool {
			p := partitionState(t, b, "squeezed", 0)
			return p.LogEndOffset == 6 && p.HighWatermark == 6
		})
	}
	for _, b := range bs {
		b.stop(t)
	}
	for _, rid := range st.Metadata.Replicas {
		if got := localLog(t, byID(bs, rid), "squeezed", id, 0); !bytes.Equal(got, raw) {
			t.Fatalf("broker %d's log differs from what the leader served", rid)
		}
	}
}
