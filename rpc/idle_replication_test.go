package rpc

import (
	"bytes"
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// goroutinesIn counts this process's goroutines with a frame in fn (a
// function name as a goroutine profile prints it).
func goroutinesIn(t *testing.T, fn string) int {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	n := 0
	// Groups of identical stacks: "N @ pcs" then a "#" line per frame.
	for _, group := range strings.Split(buf.String(), "\n\n") {
		head, frames, _ := strings.Cut(group, "\n")
		count, _, ok := strings.Cut(head, " @ ")
		if c, err := strconv.Atoi(count); ok && err == nil && strings.Contains(frames, fn) {
			n += c
		}
	}
	return n
}

// TestIdleReplicationHoldsNoGoroutinePerPartition: a leader pushed each
// partition's batches to each follower from a goroutine of its own, parked
// while the partition was idle; at thousands of replicas those goroutines'
// stacks were the largest part of a broker's memory per replica. A pusher
// now runs only while it has something to send, so idle partitions hold
// none. Idle pushers still wake on the log's next change: an acks=all
// produce to each partition after the idle spell commits on every replica.
func TestIdleReplicationHoldsNoGoroutinePerPartition(t *testing.T) {
	const partitions = 20
	bs := threeBrokers(t)
	ctx := testCtx(t)
	cfg := map[string]string{"replication.factor": "3", "min.insync.replicas": "3"}
	createEverywhere(t, bs, "idle", partitions, cfg)
	testutil.WaitFor(t, 30*time.Second, "full ISRs", func() bool {
		for p := range int32(partitions) {
			if len(partitionState(t, bs[0], "idle", p).Metadata.Isr) != 3 {
				return false
			}
		}
		return true
	})
	// 20 partitions x 2 followers: parked pushers before.
	testutil.WaitFor(t, 20*time.Second, "no pusher goroutine for idle partitions", func() bool {
		return goroutinesIn(t, "broker.(*pusher).") == 0
	})

	for p := range int32(partitions) {
		leader := byID(bs, partitionState(t, bs[0], "idle", p).Metadata.Leader)
		if _, err := leader.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "idle", Partition: p, Batch: batchOf(t, fmt.Sprint(p)), Acks: stratav1.Acks_ACKS_ALL}); err != nil {
			t.Fatalf("acks=all produce to idle partition %d: %v", p, err)
		}
	}
	for _, b := range bs {
		testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("broker %d to hold every record", b.ID()), func() bool {
			for p := range int32(partitions) {
				if st := partitionState(t, b, "idle", p); st.LogEndOffset != 1 || st.HighWatermark != 1 {
					return false
				}
			}
			return true
		})
	}
	testutil.WaitFor(t, 20*time.Second, "no pusher goroutine once idle again", func() bool {
		return goroutinesIn(t, "broker.(*pusher).") == 0
	})
}
