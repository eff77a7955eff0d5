package broker

import (
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/internal/testutil"
)

// sentChunks is the leader's end of a follower's stream as a test sees it:
// it keeps what the pushers send.
type sentChunks struct {
	mu     sync.Mutex
	chunks []ReplicaChunk
}

func (s *sentChunks) Recv() (ReplicaUpdate, error) { select {} }

func (s *sentChunks) Send(c ReplicaChunk) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Batches = append([]byte(nil), c.Batches...)
	if c.Release != nil {
		c.Release()
		c.Release = nil
	}
	s.chunks = append(s.chunks, c)
	return nil
}

// batchesTo counts the chunks with batches sent for partition id.
func (s *sentChunks) batchesTo(id int32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.chunks {
		if c.Partition == id && len(c.Batches) > 0 {
			n++
		}
	}
	return n
}

// The pushers of a stream each run until stopped, one per partition: a
// position that replaces a partition's pusher stops the old one, and the
// stream's end (stopAll) stops every pusher it started, replaced and
// stopped ones included, and waits for all of them.
func TestPushersStopEveryPusherWhenTheStreamEnds(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1}
	a := newTestReplica(t, 1, info, 1)
	b := newTestReplica(t, 1, info, 1)
	b.p.id = 1
	a.produce(1, 3)
	b.produce(10, 3)

	stream := &sentChunks{}
	ps := newPushers(t.Context(), stream, func(run func()) bool { go run(); return true })
	tpA := cluster.TopicPartition{Topic: "t", Partition: 0}
	tpB := cluster.TopicPartition{Topic: "t", Partition: 1}
	var started []*pusher
	start := func(tp cluster.TopicPartition, p *partition) {
		ps.start(tp, p, 2, 0, 0)
		started = append(started, ps.running(tp))
	}
	start(tpA, a.p)
	start(tpB, b.p)
	testutil.WaitFor(t, 10*time.Second, "batches of both partitions sent", func() bool {
		return stream.batchesTo(0) > 0 && stream.batchesTo(1) > 0
	})

	start(tpA, a.p) // a new epoch or a reopened replica: a new pusher
	if started[2] == started[0] {
		t.Fatal("start kept the old pusher")
	}
	waitClosed(t, started[0].done, "the replaced pusher")
	if ps.running(tpA) != started[2] {
		t.Fatal("the new pusher is not the partition's")
	}

	ps.stop(tpB) // the follower left the partition
	waitClosed(t, started[1].done, "the stopped pusher")
	if ps.running(tpB) != nil {
		t.Fatal("a stopped pusher is still the partition's")
	}

	ended := make(chan struct{})
	go func() {
		ps.stopAll()
		close(ended)
	}()
	waitClosed(t, ended, "stopAll")
	for i, p := range started {
		select {
		case <-p.done:
		default:
			t.Fatalf("pusher %d still runs after stopAll returned", i)
		}
	}
	if ps.running(tpA) != nil || ps.running(tpB) != nil {
		t.Fatal("stopAll left pushers registered")
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not end within 10s", what)
	}
}
