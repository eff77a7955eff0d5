package broker

import (
	"io"
	"log/slog"
	"testing"

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
		parts: map[cluster.TopicPartition]*followed{}, kick: make(chan struct{}, 1)}
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
