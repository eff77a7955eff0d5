package broker

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/internal/testutil"
)

// passCounter spawns a pusher's passes on goroutines and counts those
// still running.
type passCounter struct {
	running atomic.Int32
	started atomic.Int32
}

func (c *passCounter) spawn(run func()) bool {
	c.running.Add(1)
	c.started.Add(1)
	go func() {
		defer c.running.Add(-1)
		run()
	}()
	return true
}

// A pusher runs on a goroutine only while it has something to send: once
// it sent the log and the follower's window is open, no goroutine of it
// runs; the log's next change runs a pass that sends the new batch, and
// after it the pusher is idle again.
func TestPusherRunsOnlyWhileItHasSomethingToSend(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1}
	r := newTestReplica(t, 1, info, 1)
	r.produce(1, 3)

	stream := &sentChunks{}
	var passes passCounter
	ps := newPusher(t.Context(), r.p, 2, 0, 0, stream.Send, passes.spawn)
	defer ps.stop()
	ps.wake()
	testutil.WaitFor(t, 10*time.Second, "the log sent and the pusher idle", func() bool {
		return stream.batchesTo(0) == 1 && passes.running.Load() == 0
	})

	r.produce(4, 2)
	testutil.WaitFor(t, 10*time.Second, "the new batch sent and the pusher idle again", func() bool {
		return stream.batchesTo(0) == 2 && passes.running.Load() == 0
	})
	if n := passes.started.Load(); n > 3 {
		t.Fatalf("%d pass goroutines for two sends; want one per wake-up", n)
	}

	ps.stop()
	waitClosed(t, ps.done, "the stopped pusher")
	r.produce(6, 1)
	if n := passes.started.Load(); passes.running.Load() != 0 || stream.batchesTo(0) != 2 {
		t.Fatalf("a stopped pusher ran a pass (%d started) or sent a batch", n)
	}
}

// No wake-up is lost: a change that arrives after a pass's last look at
// the log, before the pass returns, runs another pass that sends it. The
// pass's watch of the log is registered before that look; one registered
// after it would miss this change, and the batch would wait for the next.
func TestPusherSendsAChangeMadeAfterItsLastLook(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1}
	r := newTestReplica(t, 1, info, 1)
	r.produce(1, 3)

	stream := &sentChunks{}
	var passes passCounter
	ps := newPusher(t.Context(), r.p, 2, 0, 0, stream.Send, passes.spawn)
	defer ps.stop()
	var once sync.Once
	appendErr := make(chan error, 1)
	ps.idle = func() {
		once.Do(func() {
			_, _, err := r.p.appendAsLeader(testBatch(t, 4, 2), AcksLeader)
			appendErr <- err
		})
	}
	ps.wake()
	if err := <-appendErr; err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the batch appended after the last look sent", func() bool {
		return stream.batchesTo(0) == 2
	})
	testutil.WaitFor(t, 10*time.Second, "the pusher idle", func() bool { return passes.running.Load() == 0 })
}
