package main

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/config"
)

// benchConsumeOptions are the flags of strata bench consume.
type benchConsumeOptions struct {
	topic         string
	records       int64
	from          string
	fetchMaxBytes string
	kafka         string
	json          bool
}

func newBenchConsumeCommand(f *clientFlags) *cobra.Command {
	var o benchConsumeOptions
	cmd := &cobra.Command{
		Use:   "consume --topic TOPIC",
		Short: "Measure consume throughput and Poll latency",
		Long: `Read every partition of a topic from --from (earliest by default) until
--records have been read or every partition is at its end, and report
throughput and the time each Poll call that returned records was blocked, as
percentiles of an HDR histogram. Records are decoded and their batch CRCs
checked, as any consumer does, but not printed.

Ctrl-C stops reading and prints the summary.`,
		Example: `  strata bench consume --topic bench
  strata bench consume --topic bench --records 500000 --fetch-max-bytes 4MiB --json
  strata bench consume --topic bench --kafka 127.0.0.1:9092`,
		Args: exactArgs(),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
			return benchConsume(ctx, cmd, f, &o)
		}),
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.topic, "topic", "t", "", "topic to read (required)")
	fl.Int64Var(&o.records, "records", 0, "stop after this many records (0: read everything to the end)")
	fl.StringVar(&o.from, "from", "earliest", "where each partition starts: "+startHelp)
	fl.StringVar(&o.fetchMaxBytes, "fetch-max-bytes", "1MiB", "bytes of batches the broker puts in one fetch response")
	fl.StringVar(&o.kafka, "kafka", "", kafkaFlagHelp)
	fl.BoolVar(&o.json, "json", false, "print the summary as one JSON object on standard output")
	_ = cmd.MarkFlagRequired("topic")
	return cmd
}

func benchConsume(ctx context.Context, cmd *cobra.Command, f *clientFlags, o *benchConsumeOptions) error {
	from, err := parseStart(o.from, time.Now())
	if err != nil {
		return err
	}
	fetchMax, err := config.ParseBytes(o.fetchMaxBytes)
	if err != nil || fetchMax < 1 || fetchMax > 1<<30 {
		return usageErrorf("--fetch-max-bytes %q: want a size such as 1MiB or 65536", o.fetchMaxBytes)
	}
	if o.records < 0 {
		return usageErrorf("--records %d: want a count >= 0 (0: everything to the end)", o.records)
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	parts, err := partitionsToRead(ctx, c, f, o.topic, -1)
	if err != nil {
		return err
	}
	starts, err := startPositions(ctx, c, f, o.topic, parts, from, false)
	if err != nil {
		return err
	}

	k, err := o.newConsumer(ctx, c, f, parts, starts, fetchMax)
	if err != nil {
		return err
	}
	defer k.close()
	var records, bytes atomic.Int64
	lat := newLatencies()
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		progress(cmd.ErrOrStderr(), "read", func() (int64, int64) { return records.Load(), bytes.Load() }, stopProgress)
	}()

	start := time.Now()
	end := start
	var pollErr error
	for o.records == 0 || records.Load() < o.records {
		t0 := time.Now()
		limit := int64(0)
		if o.records > 0 {
			limit = o.records - records.Load()
		}
		n, b, err := k.poll(ctx, limit)
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				pollErr = err
			}
			break
		}
		end = time.Now()
		lat.record(end.Sub(t0))
		bytes.Add(b)
		records.Add(n)
	}
	close(stopProgress)
	<-progressDone

	s := &benchSummary{
		Bench: "consume", Topic: o.topic, Records: records.Load(), Bytes: bytes.Load(),
		Latency: lat.summary(), LatencyOf: "per Poll call that returned records, time blocked",
		Interrupted: ctx.Err() != nil,
		Settings: map[string]any{
			"partitions": len(parts), "from": o.from, "fetch_max_bytes": fetchMax, "records_requested": o.records,
			"front_end": frontEnd(o.kafka),
		},
	}
	if pollErr != nil {
		s.Errors = 1
		s.FirstError = explain(pollErr).Error()
	}
	s.finish(end.Sub(start))
	if err := s.write(cmd.OutOrStdout(), o.json); err != nil {
		return err
	}
	return pollErr
}

// newConsumer is the bench consumer: Strata's, reading every partition from
// its start to its end, or with --kafka a Kafka client reading the same
// partitions from the same offsets to the ends they have now.
func (o *benchConsumeOptions) newConsumer(ctx context.Context, c *client.Client, f *clientFlags, parts []int32, starts []client.OffsetSpec, fetchMax int64) (benchConsumer, error) {
	if o.kafka == "" {
		k := c.NewConsumer(client.WithStopAtEnd(true), client.WithFetchMaxBytes(int(fetchMax)))
		for i, p := range parts {
			if err := k.Assign(o.topic, p, starts[i]); err != nil {
				k.Close()
				return nil, err
			}
		}
		return grpcConsumer{k}, nil
	}
	from := make([]int64, len(parts))
	ends := make([]int64, len(parts))
	for i, p := range parts {
		rctx, cancel := f.withTimeout(ctx)
		off, err := c.ListOffsets(rctx, o.topic, p, starts[i])
		if err == nil {
			ends[i], err = c.ListOffsets(rctx, o.topic, p, client.Latest())
		}
		cancel()
		if err != nil {
			return nil, err
		}
		from[i] = off
		if off < 0 { // no record at or after the time asked: nothing to read
			from[i] = ends[i]
		}
	}
	return newKafkaConsumer(o.kafka, o.topic, parts, from, ends, fetchMax)
}

// frontEnd names the path records take, for the summary.
func frontEnd(kafka string) string {
	if kafka != "" {
		return "kafka " + kafka
	}
	return "grpc"
}
