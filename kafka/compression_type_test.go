package kafka

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/record"
)

// TestCompressionType: a topic created through kadm with
// compression.type=zstd stores what an idempotent kgo producer sends
// uncompressed in zstd, with its producer id and sequences; kgo reads it
// back; DescribeConfigs shows the setting; IncrementalAlterConfigs changes
// it live.
func TestCompressionType(t *testing.T) {
	tb := startBroker(t)
	adm := adminOf(t, tb)
	ctx := testCtx(t)
	res, err := adm.CreateTopics(ctx, 1, -1, map[string]*string{"compression.type": strp("zstd")}, "squeezed")
	if err != nil || res["squeezed"].Err != nil {
		t.Fatalf("create: %v %+v", err, res["squeezed"])
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "squeezed")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := rc.On("squeezed", nil); err != nil || !hasConfig(c.Configs, "compression.type", "zstd") {
		t.Fatalf("describe configs: %v %+v", err, c)
	}

	cl := tb.client(t, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	produce := func(from, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < from+n; i++ {
			recs = append(recs, &kgo.Record{Topic: "squeezed", Partition: 0, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "value %d %0100d", i, i)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 10)
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "compression.type", Value: strp("lz4")}}, "squeezed"); err != nil {
		t.Fatal(err)
	}
	produce(10, 10)

	// The stored batches.
	var codecs []record.Compression
	var pids []int64
	for off := int64(0); off < 20; {
		fr, err := tb.Fetch(ctx, broker.FetchRequest{Topic: "squeezed", Partition: 0, Offset: off})
		if err != nil {
			t.Fatal(err)
		}
		for data := fr.Batches; len(data) > 0; {
			b, rest, err := record.NextVerified(data)
			if err != nil {
				t.Fatal(err)
			}
			codecs, pids = append(codecs, b.Compression()), append(pids, b.ProducerID())
			off, data = b.NextOffset(), rest
		}
	}
	if len(codecs) == 0 || codecs[0] != record.CompressionZstd || codecs[len(codecs)-1] != record.CompressionLZ4 {
		t.Fatalf("stored codecs %v: want zstd, then lz4 after the alter", codecs)
	}
	for _, id := range pids {
		if id < 0 || id != pids[0] {
			t.Fatalf("producer ids of the stored batches %v: want the idempotent producer's", pids)
		}
	}

	// kgo reads every record back, in order.
	cons := tb.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"squeezed": {0: kgo.NewOffset().AtStart()}}))
	for next := 0; next < 20; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(next) || string(r.Value) != fmt.Sprintf("value %d %0100d", next, next) {
				t.Fatalf("offset %d: %q, want record %d", r.Offset, r.Value, next)
			}
			next++
		})
	}
}

func hasConfig(cs []kadm.Config, name, value string) bool {
	for _, c := range cs {
		if c.Key == name && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}
