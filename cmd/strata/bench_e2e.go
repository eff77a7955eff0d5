package main

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/config"
)

// benchE2EHeader is the header each bench e2e record carries: the run's
// id (8 bytes) and the record's scheduled send time in nanoseconds since
// the run's start (8 bytes), both big-endian. The consumer counts only
// records of its own run, so other writers to the topic do not disturb it.
const benchE2EHeader = "strata-bench-e2e"

// benchE2EDefaultBytesPerSec is the schedule without --rate: 50 MiB/s of
// keys and values, a steady load at which latency is worth planning on.
const benchE2EDefaultBytesPerSec = 50 << 20

// benchE2EOptions are the flags of strata bench e2e.
type benchE2EOptions struct {
	benchProduceOptions
	fetchMaxBytes string
}

func newBenchE2ECommand(f *clientFlags) *cobra.Command {
	var o benchE2EOptions
	cmd := &cobra.Command{
		Use:   "e2e --topic TOPIC [--rate R] (--records N | --duration D)",
		Short: "Measure end-to-end latency: produce at a fixed rate and consume the same topic",
		Long: `Produce generated records to a topic at a fixed --rate (records/s, open loop;
by default 50 MiB/s of --size records, 51,200/s of 1 KiB)
while a consumer in the same process reads the topic from its end, and
report the end-to-end latency of each record: from its scheduled send time
(start + i/rate, fixed in advance) to the moment the consumer's Poll
returned it, as percentiles of an HDR histogram. Each record carries its
scheduled time in a header (` + benchE2EHeader + `), so a producer that falls
behind shows up in the latency instead of hiding it (no coordinated
omission); the summary also counts as late the records handed to the
producer more than 1 ms after their time.

--records N produces N records; --duration D produces rate*D, or N if it is
fewer. --warmup D leaves the records scheduled in the first D out of the
latency figures; they are still produced and consumed. Values are --size
(--record-size) bytes of random letters, as in bench produce. Records are
acknowledged per --acks (all by default), and consumed records count only
after they are committed (below the high watermark). When every
acknowledged record has been seen, or --timeout after the last
acknowledgement, the summary is printed; throughput counts records
consumed.

Ctrl-C stops producing, waits for what was sent and prints the summary.
The command exits 1 when records failed or were not all consumed.`,
		Example: `  strata bench e2e --topic bench --create --rate 1000 --records 10000
  strata bench e2e --topic bench --rate 51200 --duration 10s --size 1024 --acks all --json`,
		Args: exactArgs(),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
			return benchE2E(ctx, cmd, f, &o)
		}),
	}
	o.registerFlags(cmd, 0, "all")
	fl := cmd.Flags()
	fl.Float64Var(&o.rate, "rate", 0, "records/s to produce on a fixed schedule (0: 50 MiB/s of --size records)")
	fl.StringVar(&o.fetchMaxBytes, "fetch-max-bytes", "1MiB", "bytes of batches the broker puts in one fetch response")
	return cmd
}

func benchE2E(ctx context.Context, cmd *cobra.Command, f *clientFlags, o *benchE2EOptions) error {
	if o.rate == 0 && o.recordSize+o.keySize > 0 {
		o.rate = float64(benchE2EDefaultBytesPerSec) / float64(o.recordSize+o.keySize)
	}
	switch {
	case o.rate <= 0:
		return usageErrorf("--rate %v: want records per second above 0", o.rate)
	case o.records < 0:
		return usageErrorf("--records %d: want at least 1", o.records)
	case o.records == 0 && o.duration <= 0:
		return usageErrorf("give --records N or --duration D (or both: whichever ends first)")
	}
	records := o.records
	if records == 0 {
		records = 1 << 62
	}
	records = scheduledRecords(records, o.rate, o.duration)
	o.records = records // for validate
	acks, codec, batchBytes, err := o.validate()
	if err != nil {
		return err
	}
	fetchMax, err := config.ParseBytes(o.fetchMaxBytes)
	if err != nil || fetchMax < 1 || fetchMax > 1<<30 {
		return usageErrorf("--fetch-max-bytes %q: want a size such as 1MiB or 65536", o.fetchMaxBytes)
	}

	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	nparts, err := ensureTopic(ctx, cmd, c, f, &o.benchProduceOptions)
	if err != nil {
		return err
	}

	// Start the consumer at each partition's end, resolved now so that no
	// record of this run is produced before the consumer's start.
	ends, err := partitionEnds(ctx, c, f, o.topic, nparts)
	if err != nil {
		return err
	}
	k := c.NewConsumer(client.WithFetchMaxBytes(int(fetchMax)))
	defer k.Close()
	for p, end := range ends {
		if err := k.Assign(o.topic, int32(p), client.AtOffset(end)); err != nil {
			return err
		}
	}

	pool := newPayloads(max(o.recordSize, o.keySize))
	prod := o.newProducer(c, f, acks, codec, batchBytes)
	defer prod.Close()
	if err := prod.Prepare(ctx); err != nil { // its producer id, before the clock starts
		return err
	}
	runID := rand.Uint64()

	var (
		acked, failed   atomic.Int64
		consumed, bytes atomic.Int64
		firstErr        firstError
	)
	lat := newLatencies()
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		progress(cmd.ErrOrStderr(), "consumed", func() (int64, int64) { return consumed.Load(), bytes.Load() }, stopProgress)
	}()

	start := time.Now()
	// The consumer stops once it has seen every acknowledged record
	// (known when the producer has flushed) or when cancelled.
	var seen struct {
		sync.Mutex
		n        int64
		want     int64 // -1 until the producer has flushed
		lastSeen time.Time
	}
	seen.want = -1
	cctx, cancelConsumer := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelConsumer()
	consumerDone := make(chan error, 1)
	go func() {
		consumerDone <- func() error {
			for {
				recs, err := k.Poll(cctx)
				now := time.Now()
				if err != nil {
					if cctx.Err() != nil {
						return nil
					}
					return err
				}
				var n, b int64
				for _, r := range recs {
					sched, ok := benchE2ESchedule(r, runID)
					if !ok {
						continue
					}
					if sched >= o.warmup {
						lat.record(now.Sub(start) - sched)
					}
					n++
					b += int64(len(r.Key) + len(r.Value))
				}
				bytes.Add(b)
				consumed.Add(n)
				seen.Lock()
				seen.n += n
				if n > 0 {
					seen.lastSeen = now
				}
				done := seen.want >= 0 && seen.n >= seen.want
				seen.Unlock()
				if done {
					return nil
				}
			}
		}()
	}()

	// --duration is in records: the schedule ends at it.
	pace := newPacer(start, o.rate)
	sent := int64(0)
	for ; sent < records; sent++ {
		due, ok := pace.wait(ctx, nil, sent)
		if !ok {
			break
		}
		h := make([]byte, 16)
		binary.BigEndian.PutUint64(h, runID)
		binary.BigEndian.PutUint64(h[8:], uint64(due.Sub(start)))
		r := &client.Record{Topic: o.topic, Partition: client.AnyPartition, Value: pool.next(o.recordSize),
			Headers: []client.Header{{Key: benchE2EHeader, Value: h}}}
		if o.keySize > 0 {
			r.Key = pool.next(o.keySize)
		}
		prod.Produce(ctx, r, func(_ *client.Record, err error) {
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					failed.Add(1)
					firstErr.set(err)
				}
				return
			}
			acked.Add(1)
		})
	}
	fctx, cancel := f.withTimeout(context.WithoutCancel(ctx))
	flushErr := prod.Flush(fctx)
	cancel()

	// Every acknowledged record should reach the consumer; give it
	// --timeout (or until Ctrl-C) to see them.
	seen.Lock()
	seen.want = acked.Load()
	if seen.n >= seen.want {
		cancelConsumer()
	}
	seen.Unlock()
	wait := time.NewTimer(f.timeout)
	var consumeErr error
	select {
	case consumeErr = <-consumerDone:
	case <-wait.C:
		cancelConsumer()
		consumeErr = <-consumerDone
	case <-ctx.Done():
		cancelConsumer()
		consumeErr = <-consumerDone
	}
	wait.Stop()
	close(stopProgress)
	<-progressDone

	seen.Lock()
	n, want, last := seen.n, seen.want, seen.lastSeen
	seen.Unlock()
	elapsed := last.Sub(start)
	if last.IsZero() {
		elapsed = time.Since(start)
	}
	s := &benchSummary{
		Bench: "e2e", Topic: o.topic, Records: n, Bytes: bytes.Load(), Rate: o.rate, Late: &pace.late,
		Latency: lat.summary(), LatencyOf: "scheduled send to consumption" + warmupNote(o.warmup),
		Errors: failed.Load(), Interrupted: ctx.Err() != nil,
		Settings: map[string]any{
			"partitions": nparts, "record_size": o.recordSize, "key_size": o.keySize, "acks": o.acks,
			"batch_bytes": batchBytes, "linger": o.linger.String(), "in_flight": o.inFlight,
			"compression": codec.String(), "fetch_max_bytes": fetchMax,
			"records_scheduled": records, "records_sent": sent, "records_acknowledged": want, "warmup": o.warmup.String(),
		},
	}
	if consumeErr != nil {
		s.Errors++
		firstErr.set(consumeErr)
	}
	if err := firstErr.get(); err != nil {
		s.FirstError = explain(err).Error()
	}
	s.finish(elapsed)
	if err := s.write(cmd.OutOrStdout(), o.json); err != nil {
		return err
	}
	switch {
	case s.Errors > 0:
		return usageErrorf("%d errors; first: %s", s.Errors, s.FirstError)
	case flushErr != nil:
		return usageErrorf("%d records still unacknowledged after %s (--timeout)", sent-want, f.timeout)
	case n < want && ctx.Err() == nil:
		return usageErrorf("%d of %d acknowledged records not consumed within %s (--timeout)", want-n, want, f.timeout)
	}
	return nil
}

// benchE2ESchedule returns the scheduled send time, since the run's
// start, that a record of run id carries; false for other records.
func benchE2ESchedule(r *client.Record, id uint64) (time.Duration, bool) {
	for _, h := range r.Headers {
		if h.Key == benchE2EHeader && len(h.Value) == 16 && binary.BigEndian.Uint64(h.Value) == id {
			return time.Duration(binary.BigEndian.Uint64(h.Value[8:])), true
		}
	}
	return 0, false
}

// partitionEnds returns the high watermark of each partition of a topic.
// Asking each leader also loads the topic's metadata and connects to the
// leaders, so an open-loop run that calls it before its clock starts does
// not count that setup in the first records' latency.
func partitionEnds(ctx context.Context, c *client.Client, f *clientFlags, topic string, nparts int) ([]int64, error) {
	ends := make([]int64, nparts)
	for p := range ends {
		rctx, cancel := f.withTimeout(ctx)
		end, err := c.ListOffsets(rctx, topic, int32(p), client.Latest())
		cancel()
		if err != nil {
			return nil, err
		}
		ends[p] = end
	}
	return ends, nil
}
