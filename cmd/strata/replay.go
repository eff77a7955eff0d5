package main

// strata replay: write a time range of a topic, from either tier, to
// standard output or a file.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/human"
)

func init() { clientCommands = append(clientCommands, newReplayCommand) }

// replayProgressEnv, set to 1, shows the progress bar even when standard
// error is not a terminal (as the hidden --progress flag does): for
// measuring what the bar costs.
const replayProgressEnv = "STRATA_REPLAY_PROGRESS"

// replayOptions are the flags of strata replay.
type replayOptions struct {
	from, to     string
	partitions   string
	format       string
	keySeparator string
	delimiter    string
	output       string
	rate         float64
	progress     bool
	group        string
	// ordered: trust that times follow offsets (--ordered).
	ordered bool
}

func newReplayCommand() *cobra.Command {
	var (
		f clientFlags
		o replayOptions
	)
	cmd := &cobra.Command{
		Use:   "replay TOPIC --from T [--to T2]",
		Short: "Write a time range of a topic's records, from either tier",
		Long: `Read a range of a topic's history from every partition (or those given
with --partitions) in parallel and write the records, one per line, to
standard output or --output. The broker serves history from the local disk
or the object store alike. Records of one partition come in offset order;
partitions are interleaved.

--from (-o) says where each partition starts, as for strata consume:
earliest (oldest, beginning), latest (newest, end), an offset, -N for the
last N records of each partition, a time (RFC 3339, a date, a date-time
without a zone read as UTC, or epoch milliseconds after @ or s@) or a
duration ago (15m, 2h30m, 1d); a time starts at the first record at or
after it, and no record before that offset has a timestamp at or after it.

--to is a time in the same forms (no offsets); records with a timestamp
after --to are not written, nor, with --from a time, records before it.
Timestamps need not grow with offsets (history backfilled with its own
times, producers with skewed clocks), so a record with a time in range may
sit at any later offset: each partition is read to the end it had when the
replay began, and records outside the range are skipped. A topic with
message.timestamp.type=LogAppendTime, whose times follow its offsets, or a
replay with --ordered stops at the first record after --to instead (found by
the time index): faster on long history, but a record stamped in range at a
later offset is then missed (on LogAppendTime topics, only one written while
the topic was CreateTime). Without --to, each partition stops at the end it
had when the replay began: what arrives meanwhile is not replayed.

--rate limits the records written per second, across all partitions.

--format (-f), --key-separator (-K) and --delimiter (-D) are as for
strata consume: value, kv, json or a kcat-style format string.

--timeout bounds connecting and each request that looks up the topic, its
offsets or the group; it does not bound how long the replay runs.

While standard error is a terminal, a progress bar shows the records and
bytes (keys and values) written, the rate, the time left and the share of
the offsets read so far that lay below each partition's first local offset
when the replay began: the part the broker had to serve from the cold tier
(an estimate from describe, as fetches do not say which tier served them).
Otherwise one summary line is written to standard error at the end.

--group first resets that consumer group to the start of the range in every
partition replayed (refused while the group has members), then commits the
offset after the last record written as the replay goes (every 5 s, and at
the end, also when interrupted): strata group describe shows how far it
got, and a consumer of the group later resumes where the replay stopped.`,
		Example: `  strata replay orders --from 2024-05-01 --to 2024-05-02 > orders-0501.txt
  strata replay orders --from 2h --format json --output last-2h.jsonl
  strata replay orders --from @1714564800000 --to @1714568400000 --partitions 0,2,5
  strata replay orders --from earliest --rate 1000 --format kv
  strata replay orders -o -1000 -f '%p %o %T %s\n'
  strata replay orders --from 2024-05-01 --group reprocess --output may.txt`,
		Args: exactArgs("topic"),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return replay(ctx, cmd, &f, &o, args[0])
		}),
	}
	f.register(cmd)
	describeTimeout(cmd, "how long to wait for the cluster: connecting, each lookup of the topic, its offsets or the group, a fetch that stays silent (then retried); not how long the replay runs")
	fl := cmd.Flags()
	fl.StringVarP(&o.from, "from", "o", "", "where to start (required): "+startHelp)
	fl.StringVar(&o.to, "to", "", "the last time to replay: "+timeHelp+", or a duration ago (default: the end when the replay begins)")
	fl.BoolVar(&o.ordered, "ordered", false, "times follow offsets in this topic: stop each partition at the first record after --to (the time index finds it) instead of reading to its end; a record stamped in range after that is missed")
	fl.StringVar(&o.partitions, "partitions", "", "comma-separated partitions to read, such as 0,2,5 (default: all)")
	fl.StringVarP(&o.format, "format", "f", "value", "output format: "+formatHelp)
	fl.StringVarP(&o.keySeparator, "key-separator", "K", "=", "separator between key and value for --format kv (escapes \\t, \\0 ...)")
	fl.StringVarP(&o.delimiter, "delimiter", "D", `\n`, "what ends each record of --format value, kv or json (escapes \\n, \\0 ...)")
	describeDefault(cmd, "delimiter", "\n") // shown as "\n", not "\\n"
	fl.StringVar(&o.output, "output", "", "write the records to this file instead of standard output")
	fl.Float64Var(&o.rate, "rate", 0, "at most this many records a second, across partitions (0: no limit)")
	fl.StringVarP(&o.group, "group", "g", "", "reset this consumer group to the start of the range, then commit the positions written")
	fl.BoolVar(&o.progress, "progress", false, "show the progress bar even when standard error is not a terminal")
	_ = fl.MarkHidden("progress")
	_ = cmd.MarkFlagRequired("from")
	return cmd
}

// replayRange is one partition's part of a replay: offsets [start, end),
// and the first offset on the broker's local disk when it began.
type replayRange struct {
	partition  int32
	start, end int64
	localStart int64
	// position is the next offset to read, for the progress bar.
	position atomic.Int64
	// committable is the offset after the last record written out (start
	// before one is): what --group commits. Records after it that the
	// range skipped (times outside it) are left to the group's next
	// consumer.
	committable atomic.Int64
}

func replay(ctx context.Context, cmd *cobra.Command, f *clientFlags, o *replayOptions, topic string) error {
	now := time.Now()
	from, err := parseStart(o.from, now)
	if err != nil {
		return err
	}
	var to time.Time
	if o.to != "" {
		if to, err = parseUntil(o.to, now); err != nil {
			return err
		}
		if !from.at.IsZero() && to.Before(from.at) {
			return usageErrorf("--to %s is before --from %s", to.UTC().Format(jsonTimeLayout), from.at.UTC().Format(jsonTimeLayout))
		}
	}
	only, err := parsePartitionList(o.partitions)
	if err != nil {
		return err
	}
	// Checked here; each partition makes its own, as a format keeps a
	// buffer and is not safe for concurrent use.
	newFormat := func() (recordFormat, error) { return formatFlags(o.format, o.keySeparator, o.delimiter) }
	if _, err := newFormat(); err != nil {
		return err
	}
	if o.rate < 0 {
		return usageErrorf("--rate %g: want records a second >= 0 (0: no limit)", o.rate)
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()

	ranges, err := replayRanges(ctx, c, f, topic, only, from, to, o.ordered)
	if err != nil {
		return err
	}
	if o.group != "" {
		starts := map[client.TopicPartition]int64{}
		for _, rr := range ranges {
			starts[client.TopicPartition{Topic: topic, Partition: rr.partition}] = rr.start
		}
		rctx, cancel := f.withTimeout(ctx)
		_, err := c.ResetGroupOffsets(rctx, o.group, starts, false)
		cancel()
		if err != nil {
			return groupError(o.group, err)
		}
	}

	var dst io.Writer = cmd.OutOrStdout()
	var file *os.File
	if o.output != "" {
		if file, err = os.Create(o.output); err != nil {
			return usageErrorf("--output: %v", err)
		}
		defer file.Close() // closed with its error checked below; this is for early returns
		dst = file
	}

	r := &replayer{
		topic: topic, from: from.at, to: to, newFormat: newFormat,
		out:     bufio.NewWriterSize(dst, 256<<10),
		limiter: newRateLimiter(o.rate),
	}
	if file != nil {
		r.sync = file.Sync
	}
	showBar := o.progress || os.Getenv(replayProgressEnv) == "1" || isTerminal(cmd.ErrOrStderr())
	stopBar := startReplayProgress(cmd.ErrOrStderr(), showBar, r, ranges)
	stopCommits := func() {}
	if o.group != "" {
		stopCommits = r.commitEvery(ctx, c, f, o.group, ranges, 5*time.Second, cmd.ErrOrStderr())
	}
	start := time.Now()
	err = r.run(ctx, c, ranges)
	elapsed := time.Since(start)
	stopBar()
	stopCommits()
	werr := r.out.Flush()
	if werr == nil && o.group != "" && r.sync != nil {
		werr = r.sync() // a committed position never covers a record not on disk
	}
	if werr != nil && err == nil {
		err = fmt.Errorf("write output: %w", werr)
	}
	if o.group != "" && werr == nil {
		if cerr := r.commit(ctx, c, f, o.group, ranges, false); cerr != nil && err == nil {
			err = cerr
		}
	}
	if file != nil {
		if cerr := file.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("write %s: %w", o.output, cerr)
		}
	}
	recs, byts := r.records.Load(), r.bytes.Load()
	fmt.Fprintf(cmd.ErrOrStderr(), "replayed %d records, %s in %s (%.2f MB/s)\n",
		recs, human.Bytes(byts), elapsed.Round(time.Millisecond), float64(byts)/1e6/max(elapsed.Seconds(), 1e-9))
	return err
}

// parseUntil reads --to: a time as parseTime reads it, or a duration ago.
func parseUntil(s string, now time.Time) (time.Time, error) {
	v := strings.TrimSpace(s)
	if t, err := parseTime(v); err == nil {
		return t, nil
	}
	if d, err := config.ParseDuration(v); err == nil {
		return now.Add(-d), nil
	}
	return time.Time{}, usageErrorf("--to %q: want %s, or a duration ago (15m, 2h30m, 1d)", s, timeHelp)
}

// parsePartitionList reads --partitions: partition numbers separated by
// commas. Empty means all (nil).
func parsePartitionList(s string) ([]int32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int32
	for _, field := range strings.Split(s, ",") {
		field = strings.TrimSpace(field)
		n, err := strconv.ParseInt(field, 10, 32)
		if err != nil || n < 0 {
			return nil, usageErrorf("--partitions %q: %q is not a partition number; want numbers >= 0 separated by commas, such as 0,2,5", s, field)
		}
		if slices.Contains(out, int32(n)) {
			return nil, usageErrorf("--partitions %q: partition %d is listed twice", s, n)
		}
		out = append(out, int32(n))
	}
	return out, nil
}

// replayRanges checks the topic and the partitions asked for and resolves
// each partition's offsets: from where from says (an offset clamped to the
// partition's range) to the high watermark, or, on a topic with append
// times, to the first offset after to.
func replayRanges(ctx context.Context, c *client.Client, f *clientFlags, topic string, only []int32, from startPosition, to time.Time, ordered bool) ([]*replayRange, error) {
	rctx, cancel := f.withTimeout(ctx)
	desc, err := c.DescribeTopic(rctx, topic)
	cancel()
	if err != nil {
		return nil, topicError(topic, err)
	}
	parts := desc.GetPartitions()
	n := int32(len(parts))
	// The first offset after --to bounds the range only where times follow
	// offsets: with the broker's append times, or where --ordered says so.
	// A record's own time (CreateTime) may be far older than those before
	// it, backfilled or from a slow clock, so then each partition is read to
	// its end and filtered: the time index finds the first record after
	// --to, not the last one within it.
	ordered = ordered || strings.EqualFold(desc.GetConfig()["message.timestamp.type"], "LogAppendTime")
	if only == nil {
		for p := range n {
			only = append(only, p)
		}
	}
	for _, p := range only {
		if p >= n {
			return nil, usageErrorf("topic %q has no partition %d: it has %d (PARTITION_NOT_FOUND)", topic, p, n)
		}
	}
	out := make([]*replayRange, 0, len(only))
	for _, p := range only {
		rr := &replayRange{partition: p, localStart: parts[p].GetLocalStartOffset()}
		rctx, cancel := f.withTimeout(ctx)
		lo, err := c.ListOffsets(rctx, topic, p, client.Earliest())
		var hi int64
		if err == nil {
			hi, err = c.ListOffsets(rctx, topic, p, client.Latest())
		}
		switch {
		case err != nil:
		case from.isOffset || from.back > 0:
			rr.start = startOffset(from, lo, hi)
		default:
			rr.start, err = c.ListOffsets(rctx, topic, p, from.spec)
		}
		rr.end = hi
		if err == nil && !to.IsZero() && ordered {
			rr.end, err = c.ListOffsets(rctx, topic, p, client.AtTime(to.Add(time.Millisecond)))
		}
		cancel()
		if err != nil {
			return nil, topicError(topic, err)
		}
		rr.end = max(rr.end, rr.start)
		rr.position.Store(rr.start)
		rr.committable.Store(rr.start)
		out = append(out, rr)
	}
	return out, nil
}

// replayer reads the partitions of one replay in parallel and writes their
// records to one output.
type replayer struct {
	topic    string
	from, to time.Time // zero when not times: no filter on that side
	// newFormat makes a record format for one partition's goroutine.
	newFormat func() (recordFormat, error)
	limiter   *rateLimiter

	// records and bytes (keys and values) written, for the progress bar.
	records, bytes atomic.Int64

	mu  sync.Mutex // guards out
	out *bufio.Writer
	// sync, when set, makes what out wrote durable (an --output file),
	// before a group commit covers it.
	sync func() error
}

// run reads every range to its end; the first error stops the others.
func (r *replayer) run(ctx context.Context, c *client.Client, ranges []*replayRange) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, rr := range ranges {
		if rr.start >= rr.end {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.partition(ctx, c, rr); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// partition replays one range with its own consumer. Records are formatted
// into a private buffer and written to the output one poll at a time, so
// lines of different partitions never mix.
func (r *replayer) partition(ctx context.Context, c *client.Client, rr *replayRange) error {
	format, err := r.newFormat()
	if err != nil {
		return err
	}
	k := c.NewConsumer(client.WithStopAtEnd(true))
	defer k.Close()
	if err := k.Assign(r.topic, rr.partition, client.AtOffset(rr.start)); err != nil {
		return err
	}
	var buf bytes.Buffer
	w := bufio.NewWriterSize(&buf, 64<<10)
	for {
		recs, err := k.Poll(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		done := false
		for len(recs) > 0 {
			chunk := recs[:min(len(recs), r.limiter.chunk())]
			recs = recs[len(chunk):]
			if err := r.limiter.wait(ctx, len(chunk)); err != nil {
				return err
			}
			var n, b int64
			last, written := rr.start, int64(-1)
			for _, rec := range chunk {
				if rec.Offset >= rr.end {
					done = true
					break
				}
				last = rec.Offset
				if (!r.to.IsZero() && rec.Timestamp.After(r.to)) || (!r.from.IsZero() && rec.Timestamp.Before(r.from)) {
					continue
				}
				format(w, rec)
				written = rec.Offset
				n++
				b += int64(len(rec.Key) + len(rec.Value))
			}
			w.Flush()
			if buf.Len() > 0 {
				r.mu.Lock()
				_, err := r.out.Write(buf.Bytes())
				r.mu.Unlock()
				if err != nil {
					return fmt.Errorf("write output: %w", err)
				}
				buf.Reset()
			}
			r.records.Add(n)
			r.bytes.Add(b)
			rr.position.Store(last + 1)
			if written >= 0 {
				rr.committable.Store(written + 1)
			}
			if done {
				rr.position.Store(rr.end)
				return nil
			}
		}
	}
}

// commitEvery commits the group's positions every interval until the
// returned stop is called.
func (r *replayer) commitEvery(ctx context.Context, c *client.Client, f *clientFlags, group string, ranges []*replayRange, every time.Duration, stderr io.Writer) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := r.commit(ctx, c, f, group, ranges, true); err != nil {
					fmt.Fprintf(stderr, "strata: commit group %s: %v\n", group, err)
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// commit commits each range's position: the offset after the last record
// written out (committable). A position is stored after its records went into the output
// buffer, so reading the positions and then flushing (flush) under the
// output's lock never commits a record still in the buffer.
func (r *replayer) commit(ctx context.Context, c *client.Client, f *clientFlags, group string, ranges []*replayRange, flush bool) error {
	offsets := make(map[client.TopicPartition]int64, len(ranges))
	r.mu.Lock()
	for _, rr := range ranges {
		offsets[client.TopicPartition{Topic: r.topic, Partition: rr.partition}] = rr.committable.Load()
	}
	var err error
	if flush {
		if err = r.out.Flush(); err == nil && r.sync != nil {
			err = r.sync()
		}
	}
	r.mu.Unlock()
	if err != nil {
		return err
	}
	// Also after Ctrl-C: the positions reached are what to keep.
	cctx, cancel := f.withTimeout(context.WithoutCancel(ctx))
	defer cancel()
	return groupError(group, c.CommitOffsets(cctx, group, offsets))
}

// rateLimiter spaces records evenly at a rate shared by all partitions; a
// nil one does not limit.
type rateLimiter struct {
	every time.Duration
	mu    sync.Mutex
	next  time.Time // when the next record may be written
}

func newRateLimiter(perSecond float64) *rateLimiter {
	if perSecond <= 0 {
		return nil
	}
	return &rateLimiter{every: time.Duration(float64(time.Second) / perSecond)}
}

// chunk is how many records to write at once: a tenth of a second's worth,
// so that a large poll does not burst past the rate.
func (l *rateLimiter) chunk() int {
	if l == nil {
		return 1 << 30
	}
	return max(1, int(100*time.Millisecond/max(l.every, 1)))
}

// wait blocks until n more records may be written.
func (l *rateLimiter) wait(ctx context.Context, n int) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	now := time.Now()
	at := l.next
	if at.Before(now) {
		at = now
	}
	l.next = at.Add(time.Duration(n) * l.every)
	l.mu.Unlock()
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
