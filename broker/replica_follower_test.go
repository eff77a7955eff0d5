package broker

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/strata-log/strata/cluster"
)

// The fetcher applies each chunk in the epoch it checked the chunk
// against. apply runs on the stream's receiving goroutine; it used to read
// a followed partition's epoch and prepared flag after letting go of the
// fetcher's lock, while set, on new metadata, wrote them under it: a chunk
// could be applied under an epoch just replaced. The race detector fails
// this test on that code (make test runs it with -race).
func TestFetcherAppliesAChunkInTheEpochItChecked(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 1}
	r := newTestReplica(t, 2, info, 1)
	tp := cluster.TopicPartition{Topic: "t", Partition: 0}
	f := &fetcher{leader: 1, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		parts: map[cluster.TopicPartition]*followed{}, due: map[cluster.TopicPartition]*followed{}, kick: make(chan struct{}, 1)}
	follow := func(epoch int32) {
		f.set(map[cluster.TopicPartition]followTarget{tp: {p: r.p, leader: 1, epoch: epoch}})
		f.mu.Lock()
		f.parts[tp].prepared = true // as pending does once truncation is done
		f.mu.Unlock()
	}
	chunk := ReplicaChunk{Topic: "t", TopicID: r.p.topicID, Partition: 0, LeaderEpoch: 1, Batches: leaderBatch(t, 0, 1, 1, 3)}

	// Following epoch 2, a chunk of epoch 1 is dropped.
	follow(2)
	if pos, ok := f.apply(chunk); ok {
		t.Fatalf("a chunk of epoch 1 applied while following epoch 2: reported %+v", pos)
	}
	if end := r.p.log.LogEndOffset(); end != 0 {
		t.Fatalf("log end %d after a chunk of a replaced epoch", end)
	}
	// Following epoch 1, it goes in, and the position is in epoch 1.
	follow(1)
	pos, ok := f.apply(chunk)
	if !ok || pos.LeaderEpoch != 1 || pos.LogEnd != 3 {
		t.Fatalf("a chunk of the epoch followed: reported %+v (%v), want 3 in epoch 1", pos, ok)
	}

	// New metadata while chunks arrive.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for epoch := range int32(200) {
			follow(1 + epoch%2)
		}
	}()
	for range 200 {
		if pos, ok := f.apply(chunk); ok && pos.LeaderEpoch != 1 {
			t.Errorf("a chunk of epoch 1 reported in epoch %d", pos.LeaderEpoch)
		}
	}
	<-done
}

// A fetcher's rounds look only at the partitions with something to
// report: once its partitions are prepared and reported, a round visits
// none and sends nothing; a chunk's position goes when it is applied; a
// metadata change touching a partition (an ISR change, say) sends its
// position at the next round, not at the keepalive; and the keepalive
// round sends every position last sent at least half a keepalive ago.
func TestFetcherRoundsLookOnlyAtPartitionsWithSomethingToReport(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 1}
	a := newTestReplica(t, 2, info, 1)
	b := newTestReplica(t, 2, info, 1)
	b.p.id = 1
	tpA := cluster.TopicPartition{Topic: "t", Partition: 0}
	tpB := cluster.TopicPartition{Topic: "t", Partition: 1}
	f := &fetcher{leader: 1, log: slog.New(slog.NewTextHandler(io.Discard, nil)), keepalive: 4 * time.Second,
		parts: map[cluster.TopicPartition]*followed{}, due: map[cluster.TopicPartition]*followed{}, kick: make(chan struct{}, 1)}
	f.keptAlive = time.Now() // the next keepalive round is two seconds away
	targets := map[cluster.TopicPartition]followTarget{tpA: {p: a.p, leader: 1, epoch: 1}, tpB: {p: b.p, leader: 1, epoch: 1}}
	f.set(targets)

	positions := func() map[int32]int64 {
		out := map[int32]int64{}
		for _, pos := range f.pending(t.Context()) {
			out[pos.Partition] = pos.LogEnd
		}
		return out
	}
	dueNow := func() int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.due)
	}
	// Empty logs: preparing them asks the leader nothing.
	if got := positions(); len(got) != 2 || got[0] != 0 || got[1] != 0 {
		t.Fatalf("first round sent %v; want both positions at 0", got)
	}
	if got := positions(); len(got) != 0 {
		t.Fatalf("an idle round sent %v", got)
	}
	if n := dueNow(); n != 0 {
		t.Fatalf("%d partitions due with nothing to report", n)
	}

	chunk := ReplicaChunk{Topic: "t", TopicID: a.p.topicID, Partition: 0, LeaderEpoch: 1, Batches: leaderBatch(t, 0, 1, 1, 3)}
	if pos, ok := f.apply(chunk); !ok || pos.LogEnd != 3 {
		t.Fatalf("applied a chunk: reported %+v (%v), want 3", pos, ok)
	}
	if got := positions(); len(got) != 0 || dueNow() != 0 {
		t.Fatalf("a round after a chunk reported with it sent %v, %d due", got, dueNow())
	}

	f.add(map[cluster.TopicPartition]followTarget{tpB: targets[tpB]}) // an ISR change of B
	if got := positions(); len(got) != 1 || got[1] != 0 {
		t.Fatalf("the round after a metadata change of partition 1 sent %v; want its position", got)
	}

	f.mu.Lock()
	f.keptAlive = time.Now().Add(-f.keepalive / 2)
	for _, fo := range f.parts {
		fo.sentAt = time.Now().Add(-f.keepalive / 2)
	}
	f.mu.Unlock()
	if got := positions(); len(got) != 2 || got[0] != 3 || got[1] != 0 {
		t.Fatalf("the keepalive round sent %v; want both positions", got)
	}
}
