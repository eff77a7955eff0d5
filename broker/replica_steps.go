package broker

// The replication transport's decisions, without I/O: what a leader's
// pusher sends next, what a leader does with a follower's position, what a
// follower does with a chunk and when it reports. The goroutines of
// replica_leader.go and replica_follower.go carry them out over streams;
// the simulation (sim_test.go) carries out the same steps over its
// simulated network and clock, so its seeds cover the decisions that ship.
// Each step reads only what it is given and changes only its own state.

import (
	"errors"
	"time"

	"github.com/strata-log/strata/hotlog"
)

// pushState is what a leader's pusher knows of one follower's stream in
// one leader epoch.
type pushState struct {
	acked  int64   // the follower's position
	next   int64   // where the next chunk starts
	ends   []int64 // ends of chunks sent and not yet acknowledged
	lastHW int64   // the high watermark last sent (-1: none)
}

func newPushState(from int64) pushState {
	return pushState{acked: from, next: from, lastHW: -1}
}

// ack records the follower's new position. A position behind what was
// acknowledged (it truncated) or past what was sent (it reset) restarts the
// stream from there.
func (s *pushState) ack(leo int64) {
	if leo < s.acked || leo > s.next {
		s.next, s.ends = leo, nil
	}
	s.acked = leo
	for len(s.ends) > 0 && s.ends[0] <= leo {
		s.ends = s.ends[1:]
	}
}

// pushKind is what a pusher does next.
type pushKind int8

const (
	pushWait          pushKind = iota // until the log changes or an acknowledgement comes
	pushFenced                        // the epoch is over: say so and stop
	pushOutOfRange                    // the follower is below the local log start: send the start
	pushBatches                       // send batches from next
	pushHighWatermark                 // send the high watermark alone
)

// step says what the pusher sends next, given whether the partition is
// still in the pusher's epoch and the leader's log end, high watermark and
// local start.
func (s *pushState) step(current bool, leo, hw, start int64) pushKind {
	switch {
	case !current:
		// Deposed, or the follower will follow a newer epoch: this
		// stream's epoch is over.
		return pushFenced
	case s.next < start:
		// Behind the leader's local log: what it lacks is in the cold tier
		// (or gone). It starts again at the local start.
		return pushOutOfRange
	case s.next < leo && len(s.ends) < replicaWindow:
		return pushBatches
	case hw != s.lastHW:
		return pushHighWatermark
	}
	return pushWait
}

// sent records what a step sent: for pushOutOfRange, the start to (and
// nothing more goes out until the follower reports); for pushBatches, a
// chunk from from to to, carrying high watermark hw (an acknowledgement
// that moved the stream meanwhile wins); for pushHighWatermark, hw.
func (s *pushState) sent(step pushKind, from, to, hw int64) {
	switch step {
	case pushOutOfRange:
		s.next, s.ends = to, nil
	case pushBatches:
		s.lastHW = hw
		if s.next == from {
			s.next = to
			s.ends = append(s.ends, to)
		}
	case pushHighWatermark:
		s.lastHW = hw
	}
}

// positionKind is what a leader does with a follower's position on a
// stream that serves the partition.
type positionKind int8

const (
	positionStartPusher   positionKind = iota // a pusher from the position
	positionRestartPusher                     // the partition was reopened or the epoch moved: a new pusher
	positionAck                               // the pusher's follower moved
)

// positionStep places a counted position in epoch on a stream whose pusher
// for the partition serves pusherEpoch, on the same replica object or not:
// a new pusher when the partition was reopened or the follower follows a
// new epoch, else an acknowledgement. (With no pusher there, a position
// starts one: positionStartPusher.)
func positionStep(sameReplica bool, pusherEpoch, epoch int32) positionKind {
	if !sameReplica || pusherEpoch != epoch {
		return positionRestartPusher
	}
	return positionAck
}

// chunkKind is what a follower does with a chunk from its leader.
type chunkKind int8

const (
	chunkDrop      chunkKind = iota // not for the partition or epoch followed
	chunkAppend                     // batches (or only a high watermark) to append
	chunkReset                      // behind the leader's local start: move the log there
	chunkReprepare                  // truncate by leader epoch again, after a pause
)

// chunkPause is how long a follower waits before it prepares again a
// partition the leader could not serve.
const chunkPause = 200 * time.Millisecond

// chunkStep says what a follower that follows epoch, with its log
// committed to committedEnd, does with a chunk.
func chunkStep(c ReplicaChunk, epoch int32, committedEnd int64) chunkKind {
	switch c.ErrReason {
	case "":
	case ReasonOffsetOutOfRange:
		if committedEnd >= c.LogStart {
			// Not behind the leader but past what it holds or sent us: our
			// log does not end where we said, or the leader's changed.
			return chunkReprepare
		}
		return chunkReset
	default:
		// Not (yet) the leader in this epoch: wait for the metadata, and
		// ask again a little later in case it was only starting.
		return chunkReprepare
	}
	if c.LeaderEpoch != epoch {
		return chunkDrop // from another epoch of this leader's
	}
	return chunkAppend
}

// appendKind is what a follower does after it appended a chunk.
type appendKind int8

const (
	appendReport      appendKind = iota // report the new position if it moved
	appendReportAgain                   // report the position even if it did not move
	appendDrop                          // the replica stopped following: nothing to say
	appendFailed                        // prepare again, after appendPause
)

// appendPause is how long a follower waits before it prepares again a
// partition whose append failed.
const appendPause = time.Second

// appendStep says what follows an append that returned err.
func appendStep(err error) appendKind {
	switch {
	case err == nil:
		return appendReport
	case errors.Is(err, hotlog.ErrOffsetGap):
		return appendReportAgain // the leader restarts from our end
	case errors.Is(err, errNotFollowing):
		return appendDrop
	}
	return appendFailed
}

// positionDue says whether a follower sends its position: when it moved
// since it last sent it, and when it last sent it at least every ago (a
// keepalive: a leader asks a follower outside the ISR back only if it
// heard from it within replica.lag.time.max).
func positionDue(end, reported int64, sentAt, now time.Time, every time.Duration) bool {
	return end != reported || now.Sub(sentAt) >= every
}

// followerKeepalive is the longest a follower goes without sending the
// position of a partition whose position did not move, for
// replica.lag.time.max lagMax: a quarter of it, so that a leader hears an
// idle follower several times within it, between one and five seconds.
// The fetcher looks at every partition every half of it (its keepalive
// round) and sends the positions last sent at least that long ago; a
// position that moves is sent when it moves, whatever the keepalive.
func followerKeepalive(lagMax time.Duration) time.Duration {
	return min(max(lagMax/4, time.Second), 5*time.Second)
}
