package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// benchProduceOptions are the flags of strata bench produce.
type benchProduceOptions struct {
	topic       string
	create      bool
	partitions  int32
	records     int64
	recordSize  int
	keySize     int
	acks        string
	batchBytes  string
	linger      time.Duration
	inFlight    int
	compression string
	duration    time.Duration
	rate        float64 // records/s, open loop; 0: flood
	kafka       string  // a Kafka listener to produce through instead of gRPC
	sync        bool    // send each record alone and wait for its acknowledgement before the next
	json        bool
	// warmup: with a rate, records scheduled this soon after the start are
	// sent but their latency is not recorded.
	warmup time.Duration
}

func newBenchProduceCommand(f *clientFlags) *cobra.Command {
	var o benchProduceOptions
	cmd := &cobra.Command{
		Use:   "produce --topic TOPIC",
		Short: "Measure produce throughput and per-record latency",
		Long: `Produce --records generated records to a topic as fast as the producer
settings allow and report throughput and the latency of each record, from
the Produce call to its acknowledgement, as percentiles of an HDR histogram.

With --rate R the run is open loop instead: record i is due at start + i/R,
fixed in advance, and its latency is measured from that scheduled send
time to its acknowledgement. When the producer cannot keep up, records go
out late and their latency shows it (no coordinated omission); the
summary counts as late those handed to the producer more than 1 ms after
their time. --duration then caps the records at R times the duration.
--warmup D leaves the records scheduled in the first D out of the latency
figures (they are still produced and counted): the start of a run, when a
new process connects and the broker's first writes come after an idle
spell, is not what a steady rate costs.

Values are --record-size bytes of pseudo-random letters A-Z, each a slice at
a random place of an 8 MiB pool generated once before the clock starts, so
no two records are alike and compression ratios are those of such text
(not of zeros). With --key-size each record gets a key of that many random
letters, which spreads records over partitions by hash; without, records
stick to a partition per batch.

--in-flight above 1 (at most 5) lets a partition have several batches
awaiting their answer at once: more throughput over a slow link. The
producer is idempotent, so records keep their order. With --kafka and
--acks all the Kafka client keeps one request in flight per broker, and
--in-flight above 1 is refused.

--sync sends each record alone, without lingering, and waits for its
acknowledgement before the next: one record in flight, a batch of one per
request, as a client that publishes synchronously (NATS js.Publish, one
Redis XADD per round trip). Its latency is then a round trip with the
write's durability wait, and its records/s the inverse of that.

Ctrl-C stops producing, waits for what was sent and prints the summary.
The command exits 1 when records failed.`,
		Example: `  strata bench produce --topic bench --create --partitions 4
  strata bench produce --topic bench --records 200000 --record-size 100 --acks leader
  strata bench produce --topic bench --compression zstd --duration 30s --json
  strata bench produce --topic bench --rate 51200 --duration 10s
  strata bench produce --topic bench --sync --records 20000 --duration 15s
  strata bench produce --topic bench --kafka 127.0.0.1:9092`,
		Args: exactArgs(),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
			if o.sync && o.rate > 0 {
				return usageErrorf("--sync and --rate: give one (--sync sends the next record when the last is acknowledged, --rate on a schedule)")
			}
			return benchProduce(ctx, cmd, f, &o)
		}),
	}
	// acks=all as strata produce and Kafka's producers default to: the
	// figure is that of a write every in-sync replica holds.
	o.registerFlags(cmd, 1_000_000, "all")
	cmd.Flags().Float64Var(&o.rate, "rate", 0, "records/s on a fixed schedule, latency from each record's scheduled time (0: as fast as possible)")
	cmd.Flags().StringVar(&o.kafka, "kafka", "", kafkaFlagHelp)
	cmd.Flags().BoolVar(&o.sync, "sync", false, "send each record alone and wait for its acknowledgement before the next (a synchronous publisher)")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

// registerFlags adds the flags bench produce and bench e2e share; --size
// is accepted for --record-size.
func (o *benchProduceOptions) registerFlags(cmd *cobra.Command, records int64, acks string) {
	fl := cmd.Flags()
	fl.StringVarP(&o.topic, "topic", "t", "", "topic to write to (required)")
	fl.BoolVar(&o.create, "create", false, "create the topic with --partitions if it does not exist")
	fl.Int32Var(&o.partitions, "partitions", 1, "partitions of the topic --create makes")
	fl.Int64Var(&o.records, "records", records, "records to produce")
	fl.IntVar(&o.recordSize, "record-size", 1024, "bytes of each value (also --size)")
	fl.IntVar(&o.keySize, "key-size", 0, "bytes of each key (0: no key, records stick to a partition per batch)")
	fl.StringVar(&o.acks, "acks", acks, "when a record counts as written: none, leader or all (every in-sync replica, as strata produce)")
	fl.StringVar(&o.batchBytes, "batch-bytes", "1MiB", "size at which a partition's batch is sent")
	fl.DurationVar(&o.linger, "linger", 5*time.Millisecond, "how long a batch waits for more records")
	fl.IntVar(&o.inFlight, "in-flight", 1, "batches per partition awaiting an answer at once, 1 to 5")
	fl.StringVar(&o.compression, "compression", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	fl.DurationVar(&o.duration, "duration", 0, "stop producing after this long even if --records are not all sent (0: no cap)")
	fl.DurationVar(&o.warmup, "warmup", 0, "with --rate: leave the records scheduled in this first stretch of the run out of the latency figures")
	fl.BoolVar(&o.json, "json", false, "print the summary as one JSON object on standard output")
	fl.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "size" {
			name = "record-size"
		}
		return pflag.NormalizedName(name)
	})
	_ = cmd.MarkFlagRequired("topic")
}

// validate checks the flags bench produce and bench e2e share.
func (o *benchProduceOptions) validate() (acks stratav1.Acks, codec record.Compression, batchBytes int64, err error) {
	if acks, err = parseAcks(o.acks); err != nil {
		return
	}
	if codec, err = parseCompression(o.compression); err != nil {
		return
	}
	batchBytes, err = config.ParseBytes(o.batchBytes)
	if err != nil || batchBytes < 1 || batchBytes > 1<<30 {
		err = usageErrorf("--batch-bytes %q: want a size such as 1MiB or 65536", o.batchBytes)
		return
	}
	switch {
	case o.records < 1:
		err = usageErrorf("--records %d: want at least 1", o.records)
	case o.recordSize < 0 || o.recordSize > 16<<20:
		err = usageErrorf("--record-size %d: want 0 to %d bytes", o.recordSize, 16<<20)
	case o.keySize < 0 || o.keySize > 1<<16:
		err = usageErrorf("--key-size %d: want 0 to 65536 bytes", o.keySize)
	case o.inFlight < 1 || o.inFlight > 5:
		err = usageErrorf("--in-flight %d: want 1 to 5 (an idempotent producer's bound)", o.inFlight)
	case o.inFlight > 1 && o.kafka != "" && acks == stratav1.Acks_ACKS_ALL:
		// franz-go's idempotent producer keeps one produce request in flight
		// per broker and refuses the setting.
		err = usageErrorf("--in-flight %d with --kafka needs --acks leader or none: the Kafka client's idempotent producer (acks all) keeps one request in flight per broker", o.inFlight)
	case o.partitions < 1:
		err = usageErrorf("--partitions %d: want at least 1", o.partitions)
	case o.linger < 0 || o.duration < 0 || o.warmup < 0:
		err = usageErrorf("--linger, --duration and --warmup cannot be negative")
	case o.warmup > 0 && o.rate == 0:
		err = usageErrorf("--warmup needs --rate: only a schedule says which records are the first")
	case o.warmup > 0 && o.warmup.Seconds() > o.scheduleSeconds():
		err = usageErrorf("--warmup %s: the run's last record is due %.3gs after the start, so no latency would be left to report", o.warmup, o.scheduleSeconds())
	case o.rate < 0 || math.IsNaN(o.rate) || math.IsInf(o.rate, 0) || o.rate > 1e8:
		err = usageErrorf("--rate %v: want records per second, above 0 and at most 1e8 (0: as fast as possible)", o.rate)
	}
	return
}

// scheduleSeconds is when, after the start, an open-loop run's last record
// is due: the --records-th, or the last within --duration.
func (o *benchProduceOptions) scheduleSeconds() float64 {
	end := float64(o.records-1) / o.rate
	if o.duration > 0 {
		end = min(end, o.duration.Seconds())
	}
	return end
}

// warmupNote is what latency_of adds for a run with --warmup.
func warmupNote(warmup time.Duration) string {
	if warmup == 0 {
		return ""
	}
	return ", after a " + warmup.String() + " warm-up"
}

// newProducer makes the bench producer the flags describe.
func (o *benchProduceOptions) newProducer(c *client.Client, f *clientFlags, acks stratav1.Acks, codec record.Compression, batchBytes int64) *client.Producer {
	return c.NewProducer(client.WithAcks(acks), client.WithCompression(codec), client.WithBatchBytes(int(batchBytes)),
		client.WithLinger(o.linger), client.WithMaxInFlightPerPartition(o.inFlight), client.WithDeliveryTimeout(f.timeout))
}

// payloadPoolBytes is the size of the random letters values are cut from.
const payloadPoolBytes = 8 << 20

// payloads cuts values and keys out of one pool of random letters.
type payloads struct {
	pool []byte
	rng  *rand.Rand
}

func newPayloads(maxLen int) *payloads {
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	pool := make([]byte, max(payloadPoolBytes, 2*maxLen))
	for i := 0; i < len(pool); i += 8 {
		v := rng.Uint64()
		for j := i; j < min(i+8, len(pool)); j++ {
			pool[j] = 'A' + byte((v&0xff)%26)
			v >>= 8
		}
	}
	return &payloads{pool: pool, rng: rng}
}

// next returns n bytes at a random place of the pool (shared, read-only).
func (p *payloads) next(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	off := p.rng.IntN(len(p.pool) - n + 1)
	return p.pool[off : off+n : off+n]
}

func benchProduce(ctx context.Context, cmd *cobra.Command, f *clientFlags, o *benchProduceOptions) error {
	acks, codec, batchBytes, err := o.validate()
	if err != nil {
		return err
	}
	records := o.records
	if o.rate > 0 {
		records = scheduledRecords(o.records, o.rate, o.duration)
	}

	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	parts, err := ensureTopic(ctx, cmd, c, f, o)
	if err != nil {
		return err
	}

	if o.rate > 0 { // the clock starts with metadata loaded and the leaders connected
		if _, err := partitionEnds(ctx, c, f, o.topic, parts); err != nil {
			return err
		}
	}
	pool := newPayloads(max(o.recordSize, o.keySize))
	var p benchProducer
	if o.kafka != "" {
		if p, err = o.newKafkaProducer(f, acks, codec, batchBytes); err != nil {
			return err
		}
	} else {
		gp := o.newProducer(c, f, acks, codec, batchBytes)
		// Like the metadata and the connections, the producer id is had
		// before the clock starts: its first records would wait for it.
		if err := gp.Prepare(ctx); err != nil {
			gp.Close()
			return err
		}
		p = grpcProducer{p: gp, topic: o.topic}
	}
	defer p.close()

	var (
		acked, ackedBytes, failed atomic.Int64
		lastAck                   atomic.Int64 // ns since start
		firstErr                  firstError
	)
	lat := newLatencies()
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		progress(cmd.ErrOrStderr(), "acknowledged", func() (int64, int64) { return acked.Load(), ackedBytes.Load() }, stopProgress)
	}()

	start := time.Now()
	var capped <-chan time.Time
	if o.duration > 0 && o.rate == 0 { // with --rate, the schedule ends at --duration
		t := time.NewTimer(o.duration)
		defer t.Stop()
		capped = t.C
	}
	var pace *pacer
	if o.rate > 0 {
		pace = newPacer(start, o.rate)
	}
	sent := int64(0)
produce:
	for ; sent < records; sent++ {
		select {
		case <-ctx.Done():
			break produce
		case <-capped:
			break produce
		default:
		}
		value := pool.next(o.recordSize)
		var key []byte
		if o.keySize > 0 {
			key = pool.next(o.keySize)
		}
		size := int64(len(key) + len(value))
		var t0 time.Time
		if pace != nil {
			var ok bool
			if t0, ok = pace.wait(ctx, capped, sent); !ok {
				break produce
			}
		} else {
			t0 = time.Now()
		}
		p.produce(ctx, key, value, func(err error) {
			now := time.Now()
			if err != nil {
				if !errors.Is(err, context.Canceled) { // Ctrl-C while waiting for buffer space: not sent
					failed.Add(1)
					firstErr.set(err)
				}
				return
			}
			if t0.Sub(start) >= o.warmup {
				lat.record(now.Sub(t0))
			}
			ackedBytes.Add(size)
			acked.Add(1)
			lastAck.Store(int64(now.Sub(start)))
		})
		if o.sync {
			// Flush sends the lone record now, past --linger, and returns
			// once it is answered: the next record waits for this one.
			fctx, cancel := f.withTimeout(ctx)
			err := p.flush(fctx)
			cancel()
			if err != nil {
				sent++ // this record was handed over; the wait below sees it out
				break produce
			}
		}
	}
	// Wait for what was sent, Ctrl-C or not.
	fctx, cancel := f.withTimeout(context.WithoutCancel(ctx))
	flushErr := p.flush(fctx)
	cancel()
	close(stopProgress)
	<-progressDone

	elapsed := time.Duration(lastAck.Load())
	if elapsed == 0 {
		elapsed = time.Since(start)
	}
	latencyOf := "per record, Produce call to acknowledgement"
	if o.sync {
		latencyOf = "per record, sent alone: Produce call to acknowledgement"
	}
	if pace != nil {
		latencyOf = "scheduled send to acknowledgement" + warmupNote(o.warmup)
	}
	s := &benchSummary{
		Bench: "produce", Topic: o.topic, Records: acked.Load(), Bytes: ackedBytes.Load(),
		Latency: lat.summary(), LatencyOf: latencyOf,
		Errors: failed.Load(), Interrupted: ctx.Err() != nil,
		Settings: map[string]any{
			"partitions": parts, "record_size": o.recordSize, "key_size": o.keySize, "acks": o.acks,
			"batch_bytes": batchBytes, "linger": o.linger.String(), "in_flight": o.inFlight,
			"compression": codec.String(), "records_requested": o.records, "records_sent": sent,
			"front_end": frontEnd(o.kafka), "sync": o.sync, "warmup": o.warmup.String(),
		},
	}
	if pace != nil {
		s.Rate, s.Late = o.rate, &pace.late
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
		return usageErrorf("%d of %d records failed; first: %s", s.Errors, sent, s.FirstError)
	case flushErr != nil:
		return usageErrorf("%d records still unacknowledged after %s (--timeout)", sent-s.Records, f.timeout)
	}
	return nil
}

// ensureTopic checks that the bench topic exists, creating it with
// --create, and returns its partition count.
func ensureTopic(ctx context.Context, cmd *cobra.Command, c *client.Client, f *clientFlags, o *benchProduceOptions) (int, error) {
	rctx, cancel := f.withTimeout(ctx)
	defer cancel()
	desc, err := c.DescribeTopic(rctx, o.topic)
	switch {
	case err == nil:
		n := len(desc.GetPartitions())
		if o.create && cmd.Flags().Changed("partitions") && n != int(o.partitions) {
			fmt.Fprintf(cmd.ErrOrStderr(), "topic %s exists with %d partitions (not %d): using it as it is\n", o.topic, n, o.partitions)
		}
		return n, nil
	case !errors.Is(err, client.ErrTopicNotFound):
		return 0, err
	case !o.create:
		return 0, usageErrorf("%s; add --create to create it", topicError(o.topic, err))
	}
	desc, err = c.CreateTopic(rctx, o.topic, o.partitions, 0, nil)
	if errors.Is(err, client.ErrTopicAlreadyExists) { // created meanwhile, or by a retry of this call
		desc, err = c.DescribeTopic(rctx, o.topic)
	}
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "created topic %s with %d partitions\n", o.topic, len(desc.GetPartitions()))
	return len(desc.GetPartitions()), nil
}
