package kafka

import (
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testutil"
)

// TestKafkaFetchAcrossGaps: a Kafka consumer (kgo) reading a compacted
// topic whose log the cleaner left with gaps (records gone from batches,
// empty batches, whole batches gone; written here through hotlog while
// the broker was down) gets every record the log holds, once and in
// order, from the start and from offsets inside gaps, and does not stall.
func TestKafkaFetchAcrossGaps(t *testing.T) {
	dataDir := t.TempDir()
	withDir := func(c *config.Broker) { c.DataDir = dataDir }
	tb := startBrokerWith(t, withDir)
	compactedTopic(t, tb, "state")
	tb.srv.Close()
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}

	var dir string
	filepath.WalkDir(filepath.Join(dataDir, "logs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "00000000000000000000.log" {
			dir = filepath.Dir(p)
		}
		return nil
	})
	l, err := hotlog.Open(dir, hotlog.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	specs := []testutil.GapSpec{
		{Base: 3, LastDelta: 6, Keep: []int32{0, 6}},
		{Base: 10, LastDelta: 9, Keep: nil},
		{Base: 30, LastDelta: 4, Keep: []int32{2}},
		{Base: 35, LastDelta: 14, Keep: []int32{0, 1, 13}},
	}
	data, offsets := testutil.GappedLog(t, specs, max(l.LatestEpoch(), 0), time.Now().UnixMilli()-60_000)
	if _, err := l.AppendReplicaFrom(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	tb = startBrokerWith(t, withDir)
	ctx := testCtx(t)
	cl := tb.client(t)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "state", Key: []byte("k"), Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	offsets = append(offsets, 50)

	for _, from := range []int64{0, 4, 11, 29, 33, 49, 50} {
		j, _ := slices.BinarySearch(offsets, from)
		want := offsets[j:]
		c := tb.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"state": {0: kgo.NewOffset().At(from)}}))
		var got []int64
		deadline := time.Now().Add(20 * time.Second)
		for len(got) < len(want) && time.Now().Before(deadline) {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			fetches := c.PollFetches(pctx)
			cancel()
			fetches.EachError(func(topic string, p int32, err error) {
				if pctx.Err() == nil {
					t.Fatalf("fetch from %d: %v", from, err)
				}
			})
			fetches.EachRecord(func(r *kgo.Record) { got = append(got, r.Offset) })
		}
		if !slices.Equal(got, want) {
			t.Fatalf("kgo from %d: %v, want %v", from, got, want)
		}
	}
}
