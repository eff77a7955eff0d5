package rpc

import (
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// gappedTopicSpecs is the log a cleaner leaves of a compacted partition:
// batches holding fewer records than their range, empty ones, whole
// batches gone, at the start and between others.
var gappedTopicSpecs = []testutil.GapSpec{
	{Base: 5, LastDelta: 4, Keep: []int32{1, 4}},
	{Base: 10, LastDelta: 9, Keep: nil},
	{Base: 20, LastDelta: 4, Keep: []int32{0, 1, 2, 3, 4}},
	{Base: 40, LastDelta: 9, Keep: []int32{9}},
	{Base: 50, LastDelta: 9, Keep: []int32{0}},
}

// startGappedTopic starts a broker whose compacted topic "state" holds
// gappedTopicSpecs, written through hotlog while the broker was down, then
// one record produced after them at the log end (60), which also brings
// the high watermark there. It returns the broker and every offset the
// topic holds.
func startGappedTopic(t *testing.T) (*testBroker, []int64) {
	t.Helper()
	cfg := brokerConfig(t, 1, t.TempDir())
	tb := startBroker(t, cfg)
	tb.createTopic(t, "state", 1, map[string]string{"cleanup.policy": "compact", "remote.storage.enable": "false"})
	tb.stop(t)

	var dir string
	filepath.WalkDir(filepath.Join(cfg.DataDir, "logs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "00000000000000000000.log" {
			dir = filepath.Dir(p)
		}
		return nil
	})
	if dir == "" {
		t.Fatal("no segment of the topic")
	}
	l, err := hotlog.Open(dir, hotlog.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	data, offsets := testutil.GappedLog(t, gappedTopicSpecs, max(l.LatestEpoch(), 0), baseTime)
	if _, err := l.AppendReplicaFrom(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	tb = startBroker(t, cfg)
	ctx := testCtx(t)
	res, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "state", Batch: batchOf(t, "after"), Acks: stratav1.Acks_ACKS_ALL})
	if err != nil || res.BaseOffset != 60 {
		t.Fatalf("produce after the gapped batches: %v %v", res, err)
	}
	return tb, append(offsets, 60)
}

// TestConsumeAcrossGaps: over gRPC, a fetch (raw batches and decoded
// records) from every offset, gaps included, moves on to the next record;
// the strata client's consumer reads the compacted topic from the start to
// its end, every record once and in order, without stalling or erring.
func TestConsumeAcrossGaps(t *testing.T) {
	tb, offsets := startGappedTopic(t)
	ctx := testCtx(t)
	for from := int64(0); from <= 60; from++ {
		j, _ := slices.BinarySearch(offsets, from)
		_, recs := tb.readAll(t, "state", 0, from)
		var got []int64
		for _, r := range recs {
			got = append(got, r.Offset)
		}
		if !slices.Equal(got, offsets[j:]) {
			t.Fatalf("fetch from %d: %v, want %v", from, got, offsets[j:])
		}
		// Decoded by the broker.
		st, err := tb.fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: "state", Offset: from, StopAtEnd: true, Decode: true})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for {
			resp, err := st.Recv()
			if err != nil {
				break
			}
			for _, r := range resp.Records {
				got = append(got, r.Offset)
			}
		}
		if !slices.Equal(got, offsets[j:]) {
			t.Fatalf("decoded fetch from %d: %v, want %v", from, got, offsets[j:])
		}
	}

	c, err := client.New(ctx, []string{tb.addr}, client.WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, decode := range []bool{false, true} {
		k := c.NewConsumer(client.WithServerDecode(decode))
		if err := k.Assign("state", 0, client.Earliest()); err != nil {
			t.Fatal(err)
		}
		var got []int64
		deadline := time.Now().Add(20 * time.Second)
		for len(got) < len(offsets) && time.Now().Before(deadline) {
			pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			recs, err := k.Poll(pctx)
			cancel()
			if err != nil && pctx.Err() == nil {
				t.Fatalf("poll: %v", err)
			}
			for _, r := range recs {
				got = append(got, r.Offset)
			}
		}
		k.Close()
		if !slices.Equal(got, offsets) {
			t.Fatalf("client consumer (server decode %v): %v, want %v", decode, got, offsets)
		}
	}
}
