package broker

// How long acknowledged records wait for the bucket (remote.max.lag.ms).
//
// A record is acknowledged once the high watermark passes it, but it
// reaches the cold tier only with its segment, which is uploaded once
// sealed; a partition that stops receiving writes would keep its
// acknowledged tail on local disk alone until segment.ms rolled it, and a
// restore from the bucket after those disks are lost would not have it.
// So the leader notes when it saw the high watermark pass which offsets
// (commitClock), and seals the active segment early once the oldest
// acknowledged record in it has waited long enough that an upload is
// still due within the bound (sealForLag); the normal upload path then
// takes it, as only what lies below the high watermark is ever uploaded.
// The same clock gives describe and strata_upload_lag_seconds how long the
// oldest acknowledged record not yet in the bucket has waited.

import (
	"sync"
	"time"

	"github.com/strata-log/strata/config"
)

// msgLagSeal is what the leader logs when remote.max.lag.ms sealed a
// segment (the simulation counts them).
const msgLagSeal = "sealed the active segment for remote.max.lag.ms"

// maxCommitMarks bounds what a commitClock remembers while uploads cannot
// keep up (a store outage): older marks merge, towards older times.
const maxCommitMarks = 64

// uploadAllowance is the part of remote.max.lag.ms left for the upload
// itself (half the bound, at most a minute): the active segment is sealed
// once its oldest acknowledged record has waited the bound less this. A
// partition that receives a trickle of records thus makes a segment every
// nine minutes at the default bound of ten (every half bound for bounds
// under two minutes), not one per tiering pass.
func uploadAllowance(bound time.Duration) time.Duration {
	return min(bound/2, time.Minute)
}

// commitClock remembers, on a leader, when it saw the high watermark pass
// which offsets. It knows what this leader has seen since it took the
// partition over: records acknowledged under an earlier leader count from
// then. Safe for concurrent use: the tiering pass writes it, describe and
// the metrics read it.
type commitClock struct {
	mu struct {
		sync.Mutex
		// marks are in offset order: the offsets from the previous
		// mark's hw up to a mark's hw were acknowledged after its at
		// (the last time the leader looked and had not seen them),
		// except in the first mark, which holds what the leader found
		// acknowledged when it started to look.
		marks []commitMark
		hw    int64     // the high watermark last seen
		last  time.Time // when; zero before the first look
	}
}

type commitMark struct {
	hw int64
	at time.Time
}

// observe records the high watermark as seen at now.
func (c *commitClock) observe(hw int64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := &c.mu
	switch {
	case m.last.IsZero() || hw < m.hw:
		// The first look, or a log that started again: what is below hw
		// was acknowledged before now, how long before is not known.
		m.marks = m.marks[:0]
		if hw > 0 {
			m.marks = append(m.marks, commitMark{hw: hw, at: now})
		}
	case hw > m.hw:
		// Acknowledged since the last look, and not before it: counting
		// from the last look errs towards older, so a seal comes early
		// rather than late.
		m.marks = append(m.marks, commitMark{hw: hw, at: m.last})
		if len(m.marks) > maxCommitMarks {
			m.marks = mergeCommitMarks(m.marks)
		}
	}
	m.hw, m.last = hw, now
}

// mergeCommitMarks merges the two neighbouring marks closest in time into
// one that covers both offsets ranges from the earlier time.
func mergeCommitMarks(marks []commitMark) []commitMark {
	best := 0
	for i := 1; i+1 < len(marks); i++ {
		if marks[i+1].at.Sub(marks[i].at) < marks[best+1].at.Sub(marks[best].at) {
			best = i
		}
	}
	marks[best+1].at = marks[best].at
	return append(marks[:best], marks[best+1:]...)
}

// since returns the earliest time offset may have been acknowledged
// since this leader looked; ok is false when the leader has not seen it
// acknowledged.
func (c *commitClock) since(offset int64) (at time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.mu.marks {
		if m.hw > offset {
			return m.at, true
		}
	}
	return time.Time{}, false
}

// age is how long offset, acknowledged, may have waited: from the mark
// that covers it, or, when it was acknowledged after the last look, from
// that look (at least a millisecond: it waits, so it is not current).
func (c *commitClock) age(offset int64, now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	from := c.mu.last
	for _, m := range c.mu.marks {
		if m.hw > offset {
			from = m.at
			break
		}
	}
	return max(now.Sub(from), time.Millisecond)
}

// looking reports whether the clock has seen the high watermark since it
// was reset.
func (c *commitClock) looking() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.mu.last.IsZero()
}

// forget drops what the clock knows of offsets below end: they are in the
// cold tier.
func (c *commitClock) forget(end int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := &c.mu
	i := 0
	for i < len(m.marks) && m.marks[i].hw <= end {
		i++
	}
	m.marks = append(m.marks[:0], m.marks[i:]...)
}

// reset forgets everything: a new leader epoch starts looking afresh.
func (c *commitClock) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.marks, c.mu.hw, c.mu.last = c.mu.marks[:0], 0, time.Time{}
}

// uploadLagAge is how long the oldest acknowledged record not yet in the
// cold tier has waited for it, as this leader has seen: 0 when the cold
// tier holds every record below the high watermark. ok is false where
// this replica cannot tell: it does not lead the partition, or has not
// read the partition's cold tier yet.
func (p *partition) uploadLagAge(now time.Time) (age time.Duration, ok bool) {
	st := p.tier.Load()
	if !p.isLeader() || !st.loaded || !p.commits.looking() {
		return 0, false
	}
	oldest := max(st.coldEnd, p.log.LogStartOffset())
	if oldest >= p.log.HighWatermark() {
		return 0, true
	}
	return p.commits.age(oldest, now), true
}

// sealForLag seals the leader's active segment when it holds acknowledged
// records that have waited for the bucket long enough that only an upload
// now keeps them within remote.max.lag.ms (cfg). Records at or above the
// high watermark are never the reason: a segment sealed with some of them
// waits for the high watermark to pass its end before it is uploaded, as
// every segment does.
func (p *partition) sealForLag(cfg *config.Topic, coldEnd int64, now time.Time) (bool, error) {
	if cfg.RemoteMaxLagMs <= 0 {
		return false, nil
	}
	segs := p.log.Segments()
	if len(segs) == 0 {
		return false, nil
	}
	active := segs[len(segs)-1]
	if active.Sealed || active.LastOffset < active.BaseOffset {
		return false, nil // empty: nothing waits in it
	}
	oldest := max(active.BaseOffset, coldEnd)
	if oldest >= p.log.HighWatermark() || oldest > active.LastOffset {
		return false, nil
	}
	at, ok := p.commits.since(oldest)
	bound := time.Duration(cfg.RemoteMaxLagMs) * time.Millisecond
	if !ok || now.Sub(at) < bound-uploadAllowance(bound) {
		return false, nil
	}
	// A roll seals whatever is active when it runs: an append that
	// rolled the segment meanwhile leaves a younger one sealed early,
	// which costs a small object and nothing else.
	return true, p.log.Roll()
}
