package main

// strata consume: print a topic's records.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-log/strata/client"
)

func init() { clientCommands = append(clientCommands, newConsumeCommand) }

// consumeOptions are the flags of strata consume.
type consumeOptions struct {
	partition    int32
	from         string
	follow       bool
	max          int64
	format       string
	keySeparator string
	delimiter    string
	group        string
	commitEvery  time.Duration
	session      time.Duration
	assignor     string
}

func newConsumeCommand() *cobra.Command {
	var (
		f clientFlags
		o consumeOptions
	)
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print a topic's records",
		Long: `Print a topic's records, one per line, from every partition (or the one
given with --partition). Records of one partition come in offset order;
partitions are interleaved as their records arrive.

--from (-o, as kcat's) says where each partition starts: earliest (the
default; also oldest or beginning), latest (also newest or end), an offset,
-N for the last N records of each partition (as kcat's -o -N), an RFC 3339
time or a date (the first record at or after it), epoch milliseconds after
@ or s@ (kcat's form), or a duration ago such as 15m, 2h30m or 1d. An
offset applies to every partition read; one with fewer records starts at its
end, but with --partition an offset outside the partition is an error.

Without --follow, consume stops at the end of what each partition holds
when it gets there; with --follow it waits for new records until Ctrl-C.
While the broker cannot be reached, --follow keeps retrying and says so on
stderr, once when it starts reconnecting and once when it is back. --max
stops after that many records.

--format (-f, as kcat's and rpk's):
  value  the value alone (the default), then the delimiter (-D, "\n")
  kv     KEY<SEP>VALUE, SEP from --key-separator (-K, default "="), then
         the delimiter
  json   one object per record: {"topic","partition","offset","timestamp",
         "key","value","headers":[{"key","value"}]}; timestamp is RFC 3339
         in UTC with milliseconds; a null key or value is null; a key or
         value (header values too) that is not valid UTF-8 is given in
         base64 as "key_b64" / "value_b64" instead; then the delimiter.
  a format string, as kcat's -f: %s value, %k key, %S / %K their lengths
         (-1 when null), %t topic, %p partition, %o offset, %T timestamp in
         epoch milliseconds, %h headers (k=v,k2=v2), %% a percent sign;
         \n \t \r \0 \\ are escapes. Nothing is added between records:
         end it with \n. Example: --format '%p:%o %k=%s\n'.
-D and -K take the same escapes ('\t', '\0').

--timeout bounds connecting and each request that looks up the topic and
its offsets; it does not bound how long consume runs. A fetch that stays
silent longer is retried.

With --group, consume is a member of that consumer group: the group's
members share the topic's partitions, so two consumes with the same group
read different partitions, and when one stops (or dies) the others take its
partitions over. Each partition starts at the group's committed position
(--from where there is none, but not -N), and the positions printed are
committed every --commit-interval, when a partition moves to another
member, and when consume stops. Without --follow a member stops at the end
of what its partitions hold. stderr says which partitions the member is
given and gives up.`,
		Example: `  strata consume demo
  strata consume demo --from latest --follow
  strata consume demo --partition 2 --from 1042 --max 10
  strata consume demo --from 2h --format json
  strata consume demo --from 2024-05-01T00:00:00Z --format kv --key-separator ': '
  strata consume demo -o -5 -f '%p/%o %T %k=%s\n'
  strata consume demo -o s@1714564800000 --format json
  strata consume demo --group audit --follow
  strata consume demo --group audit --follow --commit-interval 1s`,
		Args: exactArgs("topic"),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return consume(ctx, cmd, &f, &o, args[0])
		}),
	}
	f.register(cmd)
	describeTimeout(cmd, "how long to wait for the cluster: connecting, each lookup of the topic and its offsets, a fetch that stays silent (then retried); not how long consume runs")
	fl := cmd.Flags()
	fl.Int32VarP(&o.partition, "partition", "p", -1, "read only this partition")
	describeDefault(cmd, "partition", "all")
	fl.StringVarP(&o.from, "from", "o", "earliest", "where to start: "+startHelp)
	fl.BoolVarP(&o.follow, "follow", "F", false, "keep waiting for new records until Ctrl-C")
	fl.Int64VarP(&o.max, "max", "n", 0, "stop after this many records (0: no limit)")
	fl.StringVarP(&o.format, "format", "f", "value", "output format: "+formatHelp)
	fl.StringVarP(&o.keySeparator, "key-separator", "K", "=", "separator between key and value for --format kv (escapes \\t, \\0 ...)")
	fl.StringVarP(&o.delimiter, "delimiter", "D", `\n`, "what ends each record of --format value, kv or json (escapes \\n, \\0 ...)")
	describeDefault(cmd, "delimiter", "\n") // shown as "\n", not "\\n"
	fl.StringVarP(&o.group, "group", "g", "", "read as a member of this consumer group, sharing the partitions with its other members")
	fl.DurationVar(&o.commitEvery, "commit-interval", 5*time.Second, "with --group, how often to commit the positions printed")
	fl.StringVar(&o.assignor, "assignor", "sticky", "with --group, how the group shares partitions: sticky, range or roundrobin (the group's first member decides)")
	fl.DurationVar(&o.session, "session-timeout", 10*time.Second, "with --group, how long the group waits for a member that stopped answering before giving its partitions to others")
	return cmd
}

func consume(ctx context.Context, cmd *cobra.Command, f *clientFlags, o *consumeOptions, topic string) error {
	from, err := parseStart(o.from, time.Now())
	if err != nil {
		return err
	}
	format, err := o.recordFormat()
	if err != nil {
		return err
	}
	if o.max < 0 {
		return usageErrorf("--max %d: want a count >= 0 (0: no limit)", o.max)
	}
	if o.partition < -1 {
		return usageErrorf("--partition %d: want a partition number >= 0", o.partition)
	}
	if o.group != "" {
		if o.partition >= 0 {
			return usageErrorf("--partition cannot be used with --group: the group shares the partitions among its members")
		}
		if from.back > 0 {
			return usageErrorf("--from %s cannot be used with --group: where a member starts is decided per partition as it is assigned; use latest, an offset or a time", o.from)
		}
		if o.commitEvery <= 0 {
			return usageErrorf("--commit-interval %v: want a duration > 0", o.commitEvery)
		}
	}
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if o.group != "" {
		return consumeAsMember(ctx, cmd, f, o, c, topic, from, format)
	}

	parts, err := partitionsToRead(ctx, c, f, topic, o.partition)
	if err != nil {
		return err
	}
	starts, err := startPositions(ctx, c, f, topic, parts, from, o.partition >= 0)
	if err != nil {
		return err
	}

	k := c.NewConsumer(client.WithStopAtEnd(!o.follow), client.WithOnFetchRetry(newReconnectNotice(cmd.ErrOrStderr()).fetchRetry))
	defer k.Close()
	for i, p := range parts {
		if err := k.Assign(topic, p, starts[i]); err != nil {
			return err
		}
	}

	out := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
	var printed int64
	var pollErr error
	for o.max == 0 || printed < o.max {
		recs, err := k.Poll(ctx)
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				pollErr = err
			}
			break
		}
		for _, r := range recs {
			format(out, r)
			printed++
			if o.max > 0 && printed >= o.max {
				break
			}
		}
		if o.follow {
			if err := out.Flush(); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
		}
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return pollErr
}

// partitionsToRead checks the topic (failing fast with the broker's reason
// when it does not exist) and returns the partitions to read.
func partitionsToRead(ctx context.Context, c *client.Client, f *clientFlags, topic string, only int32) ([]int32, error) {
	rctx, cancel := f.withTimeout(ctx)
	defer cancel()
	desc, err := c.DescribeTopic(rctx, topic)
	if err != nil {
		return nil, topicError(topic, err)
	}
	n := int32(len(desc.GetPartitions()))
	if only >= 0 {
		if only >= n {
			return nil, usageErrorf("topic %q has no partition %d: it has %d (PARTITION_NOT_FOUND)", topic, only, n)
		}
		return []int32{only}, nil
	}
	parts := make([]int32, n)
	for i := range parts {
		parts[i] = int32(i)
	}
	return parts, nil
}

// startPositions returns where each partition starts. An offset is used as
// it is for a partition named with --partition (strict) and is otherwise
// clamped to each partition's [log start, high watermark]; -N is N records
// before the high watermark, not before the log start.
func startPositions(ctx context.Context, c *client.Client, f *clientFlags, topic string, parts []int32, from startPosition, strict bool) ([]client.OffsetSpec, error) {
	out := make([]client.OffsetSpec, len(parts))
	for i, p := range parts {
		out[i] = from.spec
		if !(from.isOffset && !strict) && from.back == 0 {
			continue
		}
		rctx, cancel := f.withTimeout(ctx)
		lo, err := c.ListOffsets(rctx, topic, p, client.Earliest())
		if err == nil {
			var hi int64
			if hi, err = c.ListOffsets(rctx, topic, p, client.Latest()); err == nil {
				out[i] = client.AtOffset(startOffset(from, lo, hi))
			}
		}
		cancel()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// startOffset is where an offset or -N start puts a partition whose log
// holds [lo, hi).
func startOffset(from startPosition, lo, hi int64) int64 {
	if from.back > 0 {
		return max(hi-from.back, lo)
	}
	return min(max(from.offset, lo), hi)
}

// recordFormat is the format --format, --key-separator and --delimiter ask
// for.
func (o *consumeOptions) recordFormat() (recordFormat, error) {
	return formatFlags(o.format, o.keySeparator, o.delimiter)
}

// formatFlags reads --format, --key-separator and --delimiter, whose
// escapes are replaced.
func formatFlags(format, keySeparator, delimiter string) (recordFormat, error) {
	sep, err := unescape(keySeparator)
	if err != nil {
		return nil, usageErrorf("--key-separator %q: %v", keySeparator, err)
	}
	delim, err := unescape(delimiter)
	if err != nil {
		return nil, usageErrorf("--delimiter %q: %v", delimiter, err)
	}
	return newRecordFormat(format, sep, delim)
}

// reconnectNotice says on stderr, once, that the consumer lost the broker
// and is reconnecting, and once more when every partition is read again,
// rather than a line per partition and per retry.
type reconnectNotice struct {
	w    io.Writer
	mu   sync.Mutex
	down map[client.TopicPartition]bool
}

func newReconnectNotice(w io.Writer) *reconnectNotice {
	return &reconnectNotice{w: w, down: map[client.TopicPartition]bool{}}
}

// fetchRetry is the consumer's WithOnFetchRetry.
func (n *reconnectNotice) fetchRetry(tp client.TopicPartition, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	was := len(n.down)
	if err != nil {
		n.down[tp] = true
	} else {
		delete(n.down, tp)
	}
	switch {
	case was == 0 && len(n.down) > 0:
		fmt.Fprintf(n.w, "strata: %s; reconnecting\n", explain(err))
	case was > 0 && len(n.down) == 0:
		fmt.Fprintf(n.w, "strata: reconnected\n")
	}
}
