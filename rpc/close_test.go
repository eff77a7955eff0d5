package rpc

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// brokerGoroutines returns the stacks of the goroutines the broker package
// started (its loops, tasks, fetchers, pushers, tiering passes), by
// goroutine id.
func brokerGoroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		stack := string(g)
		if !strings.Contains(stack, "created by github.com/strata-log/strata/broker.") {
			continue
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(stack, "goroutine "), " ")
		out[id] = stack
	}
	return out
}

// Close ends every goroutine the broker started and waits for them, so
// that none runs once it returns: the loops and tasks under the broker's
// lifetime, the fetchers of the partitions it follows (with their streams'
// receivers), the pushers of the streams it serves and the tiering passes.
// Two brokers replicate a topic each leads a partition of, so that each
// runs fetchers and serves streams whose pushers sent batches (a pusher
// runs on a goroutine only while it sends, so the test does not wait for
// one to be running: TestIdleReplicationHoldsNoGoroutinePerPartition);
// once both have closed, none of the goroutines the broker package
// started is left.
func TestCloseEndsEveryBrokerGoroutine(t *testing.T) {
	before := brokerGoroutines()
	dir := t.TempDir()
	b1 := startBroker(t, brokerConfig(t, 1, filepath.Join(dir, "b1")))
	b2 := joinSecondBroker(t, b1, brokerConfig(t, 2, filepath.Join(dir, "b2")))
	bs := []*testBroker{b1, b2}
	createEverywhere(t, bs, "r", 4, map[string]string{"replication.factor": "2", "min.insync.replicas": "2"})
	ctx := testCtx(t)
	for p := range int32(4) {
		leader := byID(bs, partitionState(t, b1, "r", p).Metadata.Leader)
		if _, err := leader.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "r", Partition: p, Batch: batchOf(t, fmt.Sprint(p)), Acks: stratav1.Acks_ACKS_ALL}); err != nil {
			t.Fatal(err)
		}
	}
	running := func(fn string) bool {
		for _, stack := range brokerGoroutines() {
			if strings.Contains(stack, fn) {
				return true
			}
		}
		return false
	}
	for _, fn := range []string{"(*fetcher).run", "(*Broker).tierLoop", "(*Broker).housekeepingLoop", "(*Broker).reconcileLoop", "(*Broker).controllerLoop"} {
		testutil.WaitFor(t, 20*time.Second, fn+" running", func() bool { return running(fn) })
	}

	b2.stop(t)
	b1.stop(t)
	for id, stack := range brokerGoroutines() {
		if _, ok := before[id]; !ok {
			t.Errorf("a goroutine the broker started runs after Close returned:\n%s", stack)
		}
	}
}
