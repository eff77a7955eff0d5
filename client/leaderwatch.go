package client

// A request stuck at a leader that has stopped answering (paused, cut off)
// would otherwise hold its partition until the request timeout, 30 s by
// default, though the cluster elects a new leader in about a second. While
// a produce waits longer than leaderCheckAfter, the client asks the other
// brokers, every leaderCheckEvery, who leads the partition now; once the
// metadata names another leader or a newer leader epoch, the request is
// abandoned and sent again there.
//
// That is safe: an abandoned request the old leader appended either
// reached the new leader (an idempotent producer's resend is then answered
// as a duplicate) or is cut from the old leader's log when it learns it
// was deposed. A producer without idempotence may write a record twice,
// as with any retry.

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
)

const (
	// leaderCheckAfter is how long a request waits before the client starts
	// asking whether its leader is still the leader: well above a healthy
	// acks=all round trip.
	leaderCheckAfter = time.Second
	// leaderCheckEvery is how often it asks after that.
	leaderCheckEvery = 500 * time.Millisecond
	// leaderCheckTimeout bounds one such question to one broker.
	leaderCheckTimeout = 2 * time.Second
	// leaderPollMin is the shortest wait between two looks at the metadata
	// by a retry waiting for its partition's leader to move.
	leaderPollMin = 50 * time.Millisecond
)

// errLeaderMoved ends a request whose partition has a new leader.
var errLeaderMoved = errors.New("the partition's leader changed while the request waited")

// leaderOf returns who leads tp, and in which epoch, as the metadata says.
func (s *snapshot) leaderOf(tp TopicPartition) (partitionInfo, bool) {
	t, ok := s.topics[tp.Topic]
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.partitions) {
		return partitionInfo{}, false
	}
	return t.partitions[tp.Partition], true
}

// watchLeader calls moved once the metadata shows that tp is no longer led
// by sentTo, checking from leaderCheckAfter on until stop is called or ctx
// ends. It asks the brokers other than the one at addr (the one that is
// not answering) first. Most requests are answered well before
// leaderCheckAfter: for them it costs a timer, not a goroutine.
func (c *Client) watchLeader(ctx context.Context, tp TopicPartition, sentTo partitionInfo, addr string, moved func()) (stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t := time.AfterFunc(leaderCheckAfter, func() {
		defer close(done)
		for {
			c.leaderChecks.refresh(wctx, func(ctx context.Context) {
				if resp, err := c.fetchMetadataAvoiding(ctx, addr, leaderCheckTimeout); err == nil {
					c.meta.install(resp)
				}
			})
			if now, ok := c.meta.current().leaderOf(tp); ok && (now.leader != sentTo.leader || now.epoch > sentTo.epoch) {
				moved()
				return
			}
			if sleepCtx(wctx, leaderCheckEvery) != nil {
				return
			}
		}
	})
	return func() {
		cancel()
		if !t.Stop() {
			<-done // the check started: wait until it has seen the cancel
		}
	}
}

// leaderSuspect reports whether err says a partition's leader may be gone
// or moving: NOT_LEADER, LEADER_NOT_AVAILABLE, or a broken or timed-out
// call with no answer from the broker.
func leaderSuspect(err error) bool {
	e, ok := AsError(err)
	if !ok {
		return false
	}
	switch e.Reason {
	case "NOT_LEADER", "LEADER_NOT_AVAILABLE":
		return true
	case "":
		return e.Code == codes.Unavailable || e.Code == codes.DeadlineExceeded
	}
	return false
}

// backoffUntilLeaderMoves waits d before a retry to tp, as sleepCtx does,
// but ends as soon as the metadata shows tp led by another broker than
// sentTo, or in a newer epoch: a leader that died is replaced in about a
// second, and the retry should go to its successor then, not at the end
// of a backoff that has grown meanwhile. While it waits it refreshes the
// metadata, which every waiting partition shares and the client fetches at
// most once per its minimum refresh interval.
func (c *Client) backoffUntilLeaderMoves(ctx context.Context, d time.Duration, tp TopicPartition, sentTo partitionInfo) error {
	deadline := time.Now().Add(d)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for {
		if now, ok := c.meta.current().leaderOf(tp); ok && now.leader >= 0 && (now.leader != sentTo.leader || now.epoch > sentTo.epoch) {
			return nil
		}
		if sleepCtx(wctx, max(c.cfg.metadataMinRefresh, leaderPollMin)) != nil {
			return ctx.Err() // nil when the backoff is over
		}
		c.refreshAfterError(wctx)
	}
}

// leaderMovedError is the retriable answer for a request abandoned because
// its partition's leader changed.
func leaderMovedError(tp TopicPartition) error {
	return newError(codes.FailedPrecondition, "NOT_LEADER", true, "%s: %v; sending it to the new leader", tp, errLeaderMoved)
}

// leaderChecks shares the metadata fetches of the requests that watch
// their leader: a producer writing to a thousand partitions of a slow
// broker has a thousand requests waiting at once, and each asking for the
// whole metadata every leaderCheckEvery made the broker slower still. A
// watcher that finds a fetch under way waits for it, and one that comes
// within leaderCheckEvery/2 of the last fetch's end uses what it
// installed.
type leaderChecks struct {
	mu       sync.Mutex
	inflight chan struct{} // closed when the fetch under way ends; nil if none
	last     time.Time     // when the last fetch ended
}

// refresh runs fetch unless one ran lately or runs now (then it waits for
// that one, or until ctx ends).
func (l *leaderChecks) refresh(ctx context.Context, fetch func(context.Context)) {
	l.mu.Lock()
	if wait := l.inflight; wait != nil {
		l.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
		}
		return
	}
	if time.Since(l.last) < leaderCheckEvery/2 {
		l.mu.Unlock()
		return
	}
	done := make(chan struct{})
	l.inflight = done
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.inflight, l.last = nil, time.Now()
		l.mu.Unlock()
		close(done)
	}()
	// Not cut short when this watcher's request is answered: the others
	// wait for it (fetchMetadataAvoiding bounds it by leaderCheckTimeout).
	fetch(context.WithoutCancel(ctx))
}
