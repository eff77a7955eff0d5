package kafka

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/tiering"
)

// Every test of the package reads through poisoned buffers, the local
// log's and the cold tier's chunks alike.
func init() {
	poisonGivenBack = true
	tiering.PoisonRecycledBuffers()
}

// Fetches read the log into pooled buffers that their answer refers to and
// that go back to the pool, shared by every connection, once the answer is
// written (conn.lend, giveBack). Consumers on several connections at once,
// each reading every record many fetches deep, must each get every record
// exactly as produced: a buffer given back too early, or lent twice, would
// show as another record's bytes.
func TestPooledFetchBuffersKeepEveryAnswerIntact(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic(t, "pooled", 3)
	ctx := testCtx(t)
	value := func(p int32, i int) []byte {
		return bytes.Repeat(fmt.Appendf(nil, "p%d-r%d;", p, i), 200) // about 1.6 KiB
	}
	const perPartition = 1500
	prod := tb.client(t, kgo.ProducerBatchMaxBytes(64<<10), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range perPartition {
		for p := range int32(3) {
			prod.Produce(ctx, &kgo.Record{Topic: "pooled", Partition: p, Value: value(p, i)}, nil)
		}
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := tb.client(t,
				kgo.FetchMaxPartitionBytes(96<<10), // many small fetches
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"pooled": {
					0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()}}))
			next := map[int32]int{}
			for next[0]+next[1]+next[2] < 3*perPartition {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					t.Errorf("consumer %d: read %v of %d per partition: %v", c, next, perPartition, ctx.Err())
					return
				}
				fs.EachError(func(_ string, p int32, err error) { t.Errorf("consumer %d, partition %d: %v", c, p, err) })
				fs.EachRecord(func(r *kgo.Record) {
					i := next[r.Partition]
					if r.Offset != int64(i) || !bytes.Equal(r.Value, value(r.Partition, i)) {
						t.Errorf("consumer %d: partition %d offset %d: got %.40q..., want record %d", c, r.Partition, r.Offset, r.Value, i)
					}
					next[r.Partition]++
				})
				if t.Failed() {
					return
				}
			}
		}()
	}
	wg.Wait()
}
