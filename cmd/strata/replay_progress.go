package main

// The progress bar of strata replay: redrawn from the replay's counters at
// most ten times a second, never per record, so that it costs the replay
// nothing measurable.

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/strata-log/strata/internal/human"
)

// replayBarInterval is how often the bar is redrawn.
const replayBarInterval = 100 * time.Millisecond

// startReplayProgress draws the bar on w until the returned function is
// called, which draws it one last time and ends its line. Without show it
// does nothing.
func startReplayProgress(w io.Writer, show bool, r *replayer, ranges []*replayRange) (stop func()) {
	if !show {
		return func() {}
	}
	var total int64
	for _, rr := range ranges {
		total += rr.end - rr.start
	}
	start := time.Now()
	draw := func(now time.Time) {
		fmt.Fprintf(w, "\r%s\x1b[K", replayBar(r.records.Load(), r.bytes.Load(), now.Sub(start), total, ranges))
	}
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(replayBarInterval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				draw(now)
			}
		}
	}()
	return func() {
		close(done)
		<-exited
		draw(time.Now())
		fmt.Fprintln(w)
	}
}

// replayBar renders one line: a bar of the offsets read out of total,
// records and bytes written, the rate, the time left and the cold share.
func replayBar(records, bytes int64, elapsed time.Duration, total int64, ranges []*replayRange) string {
	var read, cold int64
	for _, rr := range ranges {
		pos := rr.position.Load()
		read += pos - rr.start
		// Offsets below the first local offset were served by the cold tier.
		cold += max(0, min(pos, rr.localStart)-rr.start)
	}
	frac := 1.0
	if total > 0 {
		frac = float64(read) / float64(total)
	}
	const width = 24
	filled := min(width, int(frac*width))
	secs := max(elapsed.Seconds(), 1e-9)
	eta := "--"
	if read > 0 && read < total {
		eta = (time.Duration(float64(elapsed) * float64(total-read) / float64(read))).Round(time.Second).String()
	}
	coldPct := 0.0
	if read > 0 {
		coldPct = 100 * float64(cold) / float64(read)
	}
	return fmt.Sprintf("[%s%s] %3.0f%%  %d records  %s  %.0f rec/s  %.2f MB/s  ETA %s  cold %.0f%%",
		strings.Repeat("=", filled), strings.Repeat(" ", width-filled), 100*frac,
		records, human.Bytes(bytes), float64(records)/secs, float64(bytes)/1e6/secs, eta, coldPct)
}
