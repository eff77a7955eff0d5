package broker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strata-log/strata/hotlog"
)

// A pusher sends batches up to replicaWindow chunks ahead of the
// follower's acknowledgements, the high watermark when only it moved, the
// log start to a follower below it, and stops when its epoch is over.
func TestPushStateSteps(t *testing.T) {
	s := newPushState(10)
	if step := s.step(true, 10, 10, 0); step != pushHighWatermark {
		t.Fatalf("caught up, high watermark never sent: %d", step)
	}
	s.sent(pushHighWatermark, s.next, s.next, 10)
	if step := s.step(true, 10, 10, 0); step != pushWait {
		t.Fatalf("caught up, high watermark sent: %d, want wait", step)
	}
	for i := range int64(replicaWindow) {
		if step := s.step(true, 100, 10, 0); step != pushBatches {
			t.Fatalf("chunk %d of the window: %d, want batches", i, step)
		}
		s.sent(pushBatches, s.next, s.next+5, 10)
	}
	if step := s.step(true, 100, 10, 0); step != pushWait {
		t.Fatalf("a full window: %d, want wait", step)
	}
	s.ack(15) // the first chunk acknowledged: room for one more
	if step := s.step(true, 100, 10, 0); step != pushBatches || s.next != 30 {
		t.Fatalf("after an ack: %d from %d, want batches from 30", step, s.next)
	}
	// An acknowledgement that moved the stream while a chunk was read wins.
	s.ack(12)
	s.sent(pushBatches, 30, 35, 10)
	if s.next != 12 || len(s.ends) != 0 {
		t.Fatalf("a follower that went back to 12: next %d, %d chunks in flight", s.next, len(s.ends))
	}
	if step := s.step(true, 100, 10, 20); step != pushOutOfRange {
		t.Fatalf("follower at 12 below the local start 20: %d", step)
	}
	s.sent(pushOutOfRange, 12, 20, 10)
	if step := s.step(false, 100, 10, 20); step != pushFenced {
		t.Fatalf("epoch over: %d", step)
	}
}

func TestChunkStep(t *testing.T) {
	for _, tc := range []struct {
		name      string
		c         ReplicaChunk
		committed int64
		want      chunkKind
	}{
		{"batches of the epoch followed", ReplicaChunk{LeaderEpoch: 3}, 10, chunkAppend},
		{"batches of another epoch", ReplicaChunk{LeaderEpoch: 2}, 10, chunkDrop},
		{"behind the leader's start", ReplicaChunk{ErrReason: ReasonOffsetOutOfRange, LogStart: 20}, 10, chunkReset},
		{"past what the leader sent", ReplicaChunk{ErrReason: ReasonOffsetOutOfRange}, 10, chunkReprepare},
		{"at the leader's start", ReplicaChunk{ErrReason: ReasonOffsetOutOfRange, LogStart: 10}, 10, chunkReprepare},
		{"a fenced epoch", ReplicaChunk{ErrReason: ReasonFencedEpoch}, 10, chunkReprepare},
		{"not the leader", ReplicaChunk{ErrReason: ReasonNotLeader}, 10, chunkReprepare},
	} {
		if got := chunkStep(tc.c, 3, tc.committed); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	for err, want := range map[error]appendKind{
		nil:                                      appendReport,
		fmt.Errorf("x: %w", hotlog.ErrOffsetGap): appendReportAgain,
		errNotFollowing:                          appendDrop,
		errors.New("disk"):                       appendFailed,
	} {
		if got := appendStep(err); got != want {
			t.Errorf("append error %v: %d, want %d", err, got, want)
		}
	}
}

func TestPositionSteps(t *testing.T) {
	if positionStep(true, 4, 4) != positionAck ||
		positionStep(true, 3, 4) != positionRestartPusher ||
		positionStep(false, 4, 4) != positionRestartPusher {
		t.Fatal("positionStep")
	}
	now := time.Now()
	if every := time.Second; positionDue(5, 5, now, now.Add(every-1), every) || !positionDue(6, 5, now, now, every) || !positionDue(5, 5, now, now.Add(every), every) {
		t.Fatal("positionDue")
	}
	for lagMax, want := range map[time.Duration]time.Duration{30 * time.Second: 5 * time.Second, 8 * time.Second: 2 * time.Second, time.Second: time.Second} {
		if got := followerKeepalive(lagMax); got != want {
			t.Errorf("followerKeepalive(%v) = %v; want %v", lagMax, got, want)
		}
	}
}
