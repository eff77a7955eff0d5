package main

// strata bench: throughput and latency of a running cluster. The summary
// (text or --json) is shared by both directions.

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/spf13/cobra"
)

func init() { clientCommands = append(clientCommands, newBenchCommand) }

func newBenchCommand() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure produce and consume throughput and latency against a cluster",
		Long: `Measure a running cluster: "bench produce" writes generated records as fast
as the producer settings allow, or at a fixed --rate (open loop), "bench
consume" reads a topic from the start, and "bench e2e" produces at a fixed
rate while consuming the same topic, for end-to-end latency. All print progress every second on standard error and a summary at the end
(or when Ctrl-C stops them): records, bytes, elapsed time, records/s, MB/s
(payload bytes, keys and values, / 1e6 / s) and latency percentiles in
milliseconds from an HDR histogram. --json prints the summary as one JSON
object on standard output instead. Numbers are reported, never judged.`,
		Example: `  strata bench produce --topic bench --create --partitions 4 --records 1000000
  strata bench produce --topic bench --rate 10000 --duration 30s
  strata bench consume --topic bench
  strata bench e2e --topic bench --create --rate 51200 --duration 10s`,
	}
	cmd.RunE = groupRun
	f.register(cmd)
	cmd.AddCommand(newBenchProduceCommand(&f), newBenchConsumeCommand(&f), newBenchE2ECommand(&f))
	return cmd
}

// latencies is an HDR histogram of durations in microseconds, safe for
// concurrent use, that also keeps the exact maximum.
type latencies struct {
	mu  sync.Mutex
	h   *hdrhistogram.Histogram
	max time.Duration
}

// latencyMaxMicros is the largest latency recorded as it is (one hour);
// longer ones are recorded as one hour, and still reported as the max.
const latencyMaxMicros = int64(time.Hour / time.Microsecond)

func newLatencies() *latencies {
	// 1 µs to 1 h with 3 significant figures: values within 0.1%.
	return &latencies{h: hdrhistogram.New(1, latencyMaxMicros, 3)}
}

func (l *latencies) record(d time.Duration) {
	us := min(max(d.Microseconds(), 1), latencyMaxMicros)
	l.mu.Lock()
	_ = l.h.RecordValue(us) // in range by construction
	l.max = max(l.max, d)
	l.mu.Unlock()
}

// summary returns the percentiles in milliseconds. HDR reports a bucket's
// upper end, so a percentile is capped at the exact max to keep p50 <= p99
// <= p99.9 <= max.
func (l *latencies) summary() latencySummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h.TotalCount() == 0 {
		return latencySummary{}
	}
	maxMs := float64(l.max) / float64(time.Millisecond)
	at := func(p float64) float64 {
		return min(float64(l.h.ValueAtPercentile(p))/1000, maxMs)
	}
	return latencySummary{Count: l.h.TotalCount(), P50: at(50), P99: at(99), P999: at(99.9), Max: maxMs, Mean: min(l.h.Mean()/1000, maxMs)}
}

// latencySummary is the latency part of a bench summary, in milliseconds.
type latencySummary struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
	Mean  float64 `json:"mean"`
}

// benchSummary is what a bench prints at the end.
type benchSummary struct {
	Bench   string `json:"bench"` // "produce", "consume" or "e2e"
	Topic   string `json:"topic"`
	Records int64  `json:"records"`
	// Rate is the open-loop schedule in records/s (--rate); absent for a
	// flood. Late counts the records handed to the producer more than
	// 1 ms after their scheduled send time; present when Rate is.
	Rate        float64        `json:"rate,omitempty"`
	Late        *int64         `json:"late,omitempty"`
	Bytes       int64          `json:"bytes"` // payload: keys and values
	ElapsedSec  float64        `json:"elapsed_s"`
	RecordsPerS float64        `json:"records_per_s"`
	MBPerS      float64        `json:"mb_per_s"` // payload bytes / 1e6 / s
	Latency     latencySummary `json:"latency_ms"`
	// LatencyOf says what Latency measures.
	LatencyOf   string         `json:"latency_of"`
	Errors      int64          `json:"errors"`
	FirstError  string         `json:"first_error,omitempty"`
	Interrupted bool           `json:"interrupted"`
	Settings    map[string]any `json:"settings"`
}

// finish computes the rates and rounds the figures to what is worth
// reading: microseconds, whole records/s, kB/s.
func (s *benchSummary) finish(elapsed time.Duration) {
	s.ElapsedSec = round(elapsed.Seconds(), 6)
	if secs := elapsed.Seconds(); secs > 0 {
		s.RecordsPerS = round(float64(s.Records)/secs, 0)
		s.MBPerS = round(float64(s.Bytes)/1e6/secs, 3)
	}
	l := &s.Latency
	l.P50, l.P99, l.P999, l.Max, l.Mean = round(l.P50, 3), round(l.P99, 3), round(l.P999, 3), round(l.Max, 3), round(l.Mean, 3)
}

// round rounds v to the given decimals.
func round(v float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(v*p) / p
}

// write prints the summary as text or as one JSON object.
func (s *benchSummary) write(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		return enc.Encode(s)
	}
	note := ""
	if s.Interrupted {
		note = " (interrupted)"
	}
	schedule := ""
	if s.Rate > 0 && s.Late != nil {
		schedule = fmt.Sprintf("  schedule    %.0f records/s open loop, %d late (sent > 1 ms after their scheduled time)\n", s.Rate, *s.Late)
	}
	_, err := fmt.Fprintf(w, `%s %s%s
  records     %d
  bytes       %d (payload: keys and values)
  elapsed     %.3f s
  throughput  %.0f records/s, %.2f MB/s (payload bytes / 1e6 / s)
%s  latency     p50 %s ms, p99 %s ms, p99.9 %s ms, max %s ms (%s)
  errors      %d%s
`, s.Bench, s.Topic, note, s.Records, s.Bytes, s.ElapsedSec, s.RecordsPerS, s.MBPerS, schedule,
		ms(s.Latency.P50), ms(s.Latency.P99), ms(s.Latency.P999), ms(s.Latency.Max), s.LatencyOf,
		s.Errors, firstErrorNote(s.FirstError))
	return err
}

func firstErrorNote(e string) string {
	if e == "" {
		return ""
	}
	return " (first: " + e + ")"
}

// ms formats milliseconds with three significant decimals at most.
func ms(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// progress prints a line every second on w until stop is closed: the
// count so far and the rate over the last second.
func progress(w io.Writer, what string, count func() (records, bytes int64), stop <-chan struct{}) {
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastRecs, lastBytes int64
	last := start
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			recs, bytes := count()
			dt := now.Sub(last).Seconds()
			fmt.Fprintf(w, "%6.1fs  %d records %s  %.0f records/s  %.2f MB/s\n",
				now.Sub(start).Seconds(), recs, what,
				float64(recs-lastRecs)/dt, float64(bytes-lastBytes)/1e6/dt)
			lastRecs, lastBytes, last = recs, bytes, now
		}
	}
}
