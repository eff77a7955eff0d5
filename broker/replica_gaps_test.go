package broker

import (
	"bytes"
	"errors"
	"testing"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testutil"
)

// A follower catching up from a leader whose log the cleaner compacted
// (built here through hotlog's API: batches holding fewer records than
// their range, empty ones, whole batches gone) copies it chunk by chunk as
// the leader pushes it, gaps and all: its log ends byte-identical to the
// leader's, at the same offsets, high watermark included. A chunk the
// leader read past the follower's end (in flight across a truncation) is
// refused without a write, and the follower reports its end again.
func TestFollowerCopiesGappedLeader(t *testing.T) {
	info := cluster.PartitionInfo{Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 1}
	leader := newTestReplica(t, 1, info, 1)
	follower := newTestReplica(t, 2, info, 1)
	specs := []testutil.GapSpec{
		{Base: 0, LastDelta: 9, Keep: []int32{3, 9}},
		{Base: 10, LastDelta: 9, Keep: nil},
		{Base: 40, LastDelta: 4, Keep: []int32{0, 1, 2, 3, 4}},
		{Base: 45, LastDelta: 19, Keep: []int32{19}},
		{Base: 90, LastDelta: 0, Keep: []int32{0}},
	}
	data, offsets := testutil.GappedLog(t, specs, 1, 1_700_000_000_000)
	if _, err := leader.p.log.AppendReplicaFrom(data, 0); err != nil {
		t.Fatal(err)
	}
	leo := leader.p.log.LogEndOffset()
	leader.p.log.SetHighWatermark(leo)

	// A chunk read from offset 46, past the follower's end (0): refused.
	stale, _, ok := leader.p.pushChunk(2, 1, pushBatches, 46, leo, leo, 0, 1<<20)
	if !ok || stale.ReadFrom != 46 {
		t.Fatalf("chunk from 46: %+v %v", stale, ok)
	}
	err := follower.p.appendAsFollower(1, 1, stale.ReadFrom, stale.Batches, stale.HighWatermark)
	if !errors.Is(err, hotlog.ErrOffsetGap) || appendStep(err) != appendReportAgain || follower.p.log.LogEndOffset() != 0 {
		t.Fatalf("a chunk read past the follower's end: %v, log end %d", err, follower.p.log.LogEndOffset())
	}

	// Catch up, one small chunk at a time, each read from the follower's end.
	for chunks := 0; follower.p.log.LogEndOffset() < leo; chunks++ {
		next := follower.p.log.LogEndOffset()
		c, _, ok := leader.p.pushChunk(2, 1, pushBatches, next, leo, leo, 0, 1)
		if !ok || chunks > len(specs) {
			t.Fatalf("no chunk from %d (%d sent)", next, chunks)
		}
		if err := follower.p.appendAsFollower(1, 1, c.ReadFrom, c.Batches, c.HighWatermark); err != nil {
			t.Fatalf("append the chunk from %d: %v", next, err)
		}
	}
	lead, err := leader.p.log.Read(0, 1<<20, leo)
	if err != nil {
		t.Fatal(err)
	}
	copied, err := follower.p.log.Read(0, 1<<20, leo)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(lead.Data, copied.Data) || follower.p.log.HighWatermark() != leo {
		t.Fatalf("the follower holds %d bytes to the leader's %d, high watermark %d of %d", len(copied.Data), len(lead.Data), follower.p.log.HighWatermark(), leo)
	}
	if len(offsets) != 9 {
		t.Fatalf("test data: %v", offsets)
	}
}
