package broker

import (
	"context"
	"errors"
	"time"

	"github.com/strata-log/strata/hotlog"
)

const (
	// housekeepingGap is the least time between two rounds of the
	// housekeeping loop: the marks of a busy replica's appends meanwhile
	// make one visit, not one each.
	housekeepingGap = 100 * time.Millisecond
	// checkpointDelay is how long a log whose state (log start, high
	// watermark, recovery point) moved waits for its checkpoint: one
	// write covers the moves of that time.
	checkpointDelay = 5 * time.Second
	// houseRetry is when a visit that failed, or asked the controller for
	// something, looks again.
	houseRetry = time.Second
	// keepRoomEvery is how often the loop gives back to raft.db the room
	// Raft used.
	keepRoomEvery = 10 * time.Second
)

// housekeepingLoop visits the replicas the housekeeper says have work
// (housekeeper.go): it takes lagging followers out of the ISR (and asks
// for caught-up ones back), asks for a new leader epoch where a restart
// left this broker leading an old one, seals segments that reached
// segment.ms (so their data can move on without a new append), writes
// producer snapshots of sealed segments and checkpoints high watermarks.
// It sleeps until the earliest deadline or a mark, so an idle broker
// visits no replica at all.
func (b *Broker) housekeepingLoop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last, lastRoom time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-b.house.kick:
		}
		if wait := housekeepingGap - time.Since(last); wait > 0 {
			// Marked soon after the last round: the marks of the gap
			// make one round.
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		round := time.Now()
		last = round
		for _, p := range b.house.take(round) {
			b.house.schedule(p, b.visit(p, round))
		}
		// Give back to raft.db the room Raft used, while the disk has
		// some: on a full disk it is what lets the metadata group commit.
		if round.Sub(lastRoom) >= keepRoomEvery {
			b.meta.KeepRoom()
			lastRoom = round
		}
		wake := lastRoom.Add(keepRoomEvery)
		if at, ok, _ := b.house.next(); ok && at.Before(wake) {
			wake = at
		}
		timer.Reset(time.Until(wake))
	}
}

// visit does a replica's housekeeping at now and returns when it next has
// some that no mark will announce (zero for none).
func (b *Broker) visit(p *partition, now time.Time) time.Time {
	c := p.houseVisit(now)
	if c.isr != nil {
		b.proposeISR(p, c.isr)
	}
	if c.newEpoch {
		b.requestNewEpoch(p)
	}
	if c.rollErr != nil {
		b.log.Warn("roll of an aged segment failed", "partition", p.name(), "err", c.rollErr)
	}
	next := c.next
	if !p.writeProducerSnapshots(c.rolled, b.log) {
		next = earliest(next, now.Add(houseRetry))
	}
	return earliest(next, p.checkpointIfDue(now, b))
}

// chores is what a replica's housekeeping visit found for its broker to
// do, and when the replica next has some.
type chores struct {
	// isr is an ISR change to propose.
	isr *isrChange
	// newEpoch: the replica leads an epoch it inherited from before its
	// restart, and its broker asks the controller for the next one.
	newEpoch bool
	// rolled: the active segment reached segment.ms and was sealed;
	// rollErr: sealing it failed.
	rolled  bool
	rollErr error
	// next is when the replica next has work no mark announces (zero
	// for none): an ISR member's lag deadline, the active segment's roll
	// by age, a retry.
	next time.Time
}

// houseVisit does what the broker and the simulation share of a replica's
// housekeeping at now: the ISR's check, the restarted leader's wait for a
// new epoch, the roll by segment.ms.
func (p *partition) houseVisit(now time.Time) chores {
	var c chores
	c.isr, c.next = p.tick()
	if _, ok := p.needsNewEpoch(); ok {
		// Asked at most once a second (requestNewEpoch): look again then.
		c.newEpoch = true
		c.next = earliest(c.next, now.Add(houseRetry))
	}
	c.rolled, c.rollErr = p.log.RollIfAged()
	switch {
	case errors.Is(c.rollErr, hotlog.ErrClosed):
		c.rollErr = nil // closed under the visit: nothing is due any more
		return chores{}
	case c.rollErr != nil:
		c.next = earliest(c.next, now.Add(houseRetry))
	default:
		if at, ok := p.log.RollDue(); ok {
			c.next = earliest(c.next, at)
		}
	}
	return c
}

// checkpointIfDue writes the log's state checkpoint checkpointDelay after
// it first saw it move, and returns when the next is due (zero for none).
// Only the housekeeping loop calls it.
func (p *partition) checkpointIfDue(now time.Time, b *Broker) time.Time {
	s := &p.house
	if !p.log.NeedsCheckpoint() {
		s.checkpointAt = time.Time{}
		return time.Time{}
	}
	if s.checkpointAt.IsZero() {
		s.checkpointAt = now.Add(checkpointDelay)
	}
	if now.Before(s.checkpointAt) {
		return s.checkpointAt
	}
	s.checkpointAt = time.Time{}
	if err := p.log.Checkpoint(); err != nil {
		if errors.Is(err, hotlog.ErrClosed) {
			return time.Time{}
		}
		b.log.Warn("checkpoint failed", "partition", p.name(), "err", err)
	}
	if p.log.NeedsCheckpoint() {
		s.checkpointAt = now.Add(checkpointDelay)
	}
	return s.checkpointAt
}
