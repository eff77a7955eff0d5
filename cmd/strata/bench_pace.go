package main

// Open-loop pacing for strata bench produce --rate and bench e2e: record
// i is due at start + i/rate, fixed before the first record is sent, and
// its latency is measured from that time. When the producer falls behind
// (Produce blocks for buffer space, a slow broker), later records go out
// late and their latency includes the wait, so coordinated omission is
// not hidden the way it is when the clock starts at the Produce call.

import (
	"context"
	"math"
	"time"
)

// lateAfter is how far behind its schedule a record may be handed to the
// producer before it counts as late.
const lateAfter = time.Millisecond

type pacer struct {
	start time.Time
	rate  float64 // records per second
	timer *time.Timer
	late  int64 // records handed to the producer more than lateAfter after their due time
}

func newPacer(start time.Time, rate float64) *pacer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &pacer{start: start, rate: rate, timer: t}
}

// due is record i's scheduled send time.
func (p *pacer) due(i int64) time.Time {
	return p.start.Add(time.Duration(float64(i) * float64(time.Second) / p.rate))
}

// wait sleeps until record i is due and returns its due time; false when
// ctx ends or stop fires first. A record already due is not waited for.
func (p *pacer) wait(ctx context.Context, stop <-chan time.Time, i int64) (time.Time, bool) {
	due := p.due(i)
	if d := time.Until(due); d > 0 {
		p.timer.Reset(d)
		select {
		case <-ctx.Done():
			p.timer.Stop()
			return due, false
		case <-stop:
			p.timer.Stop()
			return due, false
		case <-p.timer.C:
		}
	}
	if time.Since(due) > lateAfter {
		p.late++
	}
	return due, true
}

// scheduledRecords is how many records a run of --records n at rate for
// duration d (0: no cap) schedules.
func scheduledRecords(n int64, rate float64, d time.Duration) int64 {
	if d > 0 {
		n = min(n, int64(math.Ceil(rate*d.Seconds())))
	}
	return max(n, 1)
}
