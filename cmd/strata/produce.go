package main

// strata produce: one record per input line.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// defaultMaxMessageBytes is the topic's max.message.bytes when describe
// does not show it: Kafka's default, 1 MiB and a batch's overhead.
const defaultMaxMessageBytes = 1048588

// produceBatchBytes is the size at which produce sends a batch, when the
// topic takes batches that large.
const produceBatchBytes = 1 << 20

func init() { clientCommands = append(clientCommands, newProduceCommand) }

// produceOptions are the flags of strata produce.
type produceOptions struct {
	file         string
	key          string
	keySeparator string
	partition    int32
	acks         string
	compression  string
	headers      []string
	delimiter    string
	// timestamp is one time for every record; timestampField names the
	// JSON field of each line that holds its record's time.
	timestamp      string
	timestampField string
}

func newProduceCommand() *cobra.Command {
	var (
		f clientFlags
		o produceOptions
	)
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Write records to a topic, one per input line",
		Long: `Write records to a topic: one record per line of standard input (or of
--file), its value the line without the line end ("\n" or "\r\n"). With
--delimiter (-D, as kcat's) records are split at that string instead ('\0',
'\t', '\n' and '\\' are escapes), and nothing else is stripped. An empty
line is a record with an empty value. Empty input produces nothing and
succeeds.

A line may be as long as the topic's max.message.bytes (1 MiB by default;
strata topic alter T --set max.message.bytes=4MiB raises it). A record the
broker would refuse as larger than that, with its key, headers and batch
framing, is refused here first, naming the line and the limit, before
anything after it is sent.

With --key-separator (-K, as kcat's) each line is KEY<SEP>VALUE, split at
the first SEP; a line without SEP is an error that names it. --key gives
every record the same key. Records with a key go to the partition the key
hashes to (murmur2, as Kafka's producer does), so one key keeps its order;
records without one stick to a partition per batch. --partition sends
everything to one partition. --header (-H) key=value adds a header to every
record; repeat it for more.

Each record's time is now, unless --timestamp gives one for all or
--timestamp-field names the JSON field of each line that holds it (then a
line that is not a JSON object with that field is an error that names it).
A time before 1970 is an error. The broker refuses (INVALID_TIMESTAMP) a time
further ahead of its clock than the topic's message.timestamp.after.max.ms
(1h by default) or further behind than message.timestamp.before.max.ms (any
past time by default). A topic with message.timestamp.type=LogAppendTime
keeps the broker's time.

Records are sent asynchronously in batches and the command waits until each
is acknowledged (--acks), then reports "produced N records to TOPIC" on
standard error. If any record fails, it stops reading, reports the first
error (after "produced N records to TOPIC" when some were) and exits 1.
Ctrl-C ends the input: what was read is still sent.

--timeout bounds connecting, the lookup of the topic and each record's
acknowledgement; the input may take as long as it likes.`,
		Example: `  printf 'hello\nworld\n' | strata produce demo
  strata produce demo --file events.txt --compression zstd
  printf 'user-1:login\nuser-2:logout\n' | strata produce demo --key-separator :
  printf 'k1\tv1\0k2\tv2\0' | strata produce demo -K '\t' -D '\0'
  echo '{"id":1}' | strata produce demo --key order-1 --header source=cli --header trace=abc

  # history with its own times, to replay and seek by time later
  strata produce events --file old-events.jsonl --timestamp-field created_at
  strata produce events --file backfill.txt --timestamp 2024-05-01`,
		Args: exactArgs("topic"),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return produce(ctx, cmd, &f, &o, args[0])
		}),
	}
	f.register(cmd)
	describeTimeout(cmd, "how long to wait for the cluster: connecting, the lookup of the topic, each record's acknowledgement; not for the input")
	fl := cmd.Flags()
	fl.StringVarP(&o.file, "file", "f", "", "read lines from this file instead of standard input")
	fl.StringVarP(&o.key, "key", "k", "", "give every record this key")
	fl.StringVarP(&o.keySeparator, "key-separator", "K", "", "split each line into KEY<SEP>VALUE at the first SEP (escapes \\t, \\0 ...)")
	fl.StringVarP(&o.delimiter, "delimiter", "D", "", "split the input into records at this string instead of at line ends (escapes \\n, \\0 ...)")
	describeDefault(cmd, "delimiter", "line ends")
	fl.Int32VarP(&o.partition, "partition", "p", client.AnyPartition, "write to this partition")
	describeDefault(cmd, "partition", "by key hash, sticky when no key")
	fl.StringVar(&o.acks, "acks", "all", "when a record counts as written: none, leader or all (every in-sync replica)")
	fl.StringVar(&o.compression, "compression", "none", "batch compression: none, gzip, snappy, lz4 or zstd")
	fl.StringArrayVarP(&o.headers, "header", "H", nil, "add a header key=value to every record (repeatable)")
	fl.StringVar(&o.timestamp, "timestamp", "", "give every record this time: "+timeHelp+" (default: now)")
	fl.StringVar(&o.timestampField, "timestamp-field", "", "each line is a JSON object; take its record's time from this field (a.b for a nested one), "+
		"a string as --timestamp reads or a number of epoch milliseconds (default: now)")
	return cmd
}

// parseAcks reads --acks.
func parseAcks(s string) (stratav1.Acks, error) {
	switch strings.ToLower(s) {
	case "none", "0":
		return stratav1.Acks_ACKS_NONE, nil
	case "leader", "1":
		return stratav1.Acks_ACKS_LEADER, nil
	case "all", "-1":
		return stratav1.Acks_ACKS_ALL, nil
	}
	return 0, usageErrorf("--acks %q: want none, leader or all", s)
}

// parseCompression reads --compression.
func parseCompression(s string) (record.Compression, error) {
	c, err := record.ParseCompression(s)
	if err != nil {
		return 0, usageErrorf("--compression %q: want none, gzip, snappy, lz4 or zstd", s)
	}
	return c, nil
}

// parseHeaders reads --header key=value flags, in order; a value may be
// empty, a key may repeat.
func parseHeaders(values []string) ([]client.Header, error) {
	var out []client.Header
	for _, h := range values {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return nil, usageErrorf("--header %q: want key=value", h)
		}
		out = append(out, client.Header{Key: k, Value: []byte(v)})
	}
	return out, nil
}

func produce(ctx context.Context, cmd *cobra.Command, f *clientFlags, o *produceOptions, topic string) error {
	acks, err := parseAcks(o.acks)
	if err != nil {
		return err
	}
	codec, err := parseCompression(o.compression)
	if err != nil {
		return err
	}
	headers, err := parseHeaders(o.headers)
	if err != nil {
		return err
	}
	if cmd.Flags().Changed("key") && cmd.Flags().Changed("key-separator") {
		return usageErrorf("--key and --key-separator cannot be used together: one key for all, or one per line")
	}
	if cmd.Flags().Changed("key-separator") && o.keySeparator == "" {
		return usageErrorf("--key-separator is empty")
	}
	keySep, err := unescape(o.keySeparator)
	if err != nil {
		return usageErrorf("--key-separator %q: %v", o.keySeparator, err)
	}
	var delim []byte // nil: line ends
	unit := "line"   // what errors call one piece of input
	if cmd.Flags().Changed("delimiter") {
		d, err := unescape(o.delimiter)
		if err != nil {
			return usageErrorf("--delimiter %q: %v", o.delimiter, err)
		}
		if d == "" {
			return usageErrorf("--delimiter is empty")
		}
		delim, unit = []byte(d), "record"
	}
	if o.partition < client.AnyPartition {
		return usageErrorf("--partition %d: want a partition number >= 0", o.partition)
	}
	var key []byte
	if cmd.Flags().Changed("key") {
		key = []byte(o.key)
	}
	var fixedTime time.Time
	switch {
	case o.timestamp != "" && o.timestampField != "":
		return usageErrorf("--timestamp and --timestamp-field cannot be used together: one time for all, or one per line")
	case o.timestamp != "":
		if fixedTime, err = recordTime(o.timestamp); err != nil {
			return usageErrorf("--timestamp %v", err)
		}
	}
	in := cmd.InOrStdin()
	if o.file != "" && o.file != "-" {
		file, err := os.Open(o.file)
		if err != nil {
			return usageErrorf("--file: %v", err)
		}
		defer file.Close()
		in = file
	}

	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	limit, err := checkTopic(ctx, c, f, topic, o.partition)
	if err != nil {
		return err
	}
	// Batches never over the topic's limit: the broker refuses them whole.
	p := c.NewProducer(client.WithAcks(acks), client.WithCompression(codec), client.WithDeliveryTimeout(f.timeout),
		client.WithBatchBytes(int(min(limit, produceBatchBytes))))
	defer p.Close()

	var (
		produced atomic.Int64
		failed   firstError
	)
	done := func(_ *client.Record, err error) {
		if err != nil {
			failed.set(err)
			return
		}
		produced.Add(1)
	}

	// Records are handed to the producer as lines arrive. The reader is a
	// goroutine so that Ctrl-C ends the input even while a read from a
	// terminal blocks; it may then stay blocked until the process ends.
	lines := make(chan lineOrErr, 64)
	go readRecords(ctx, in, delim, int(limit), lines)
	// sendCtx is not the Ctrl-C context: records read before Ctrl-C are
	// still sent and waited for.
	sendCtx := context.WithoutCancel(ctx)
	var inputErr error
	n := 0
loop:
	for failed.get() == nil {
		select {
		case <-ctx.Done():
			break loop
		case l, ok := <-lines:
			if !ok {
				break loop
			}
			if l.err != nil {
				inputErr = l.err
				break loop
			}
			n++
			r := &client.Record{Topic: topic, Partition: o.partition, Key: key, Value: l.line, Headers: headers, Timestamp: fixedTime}
			if o.timestampField != "" {
				if r.Timestamp, err = jsonFieldTime(l.line, o.timestampField); err != nil {
					inputErr = usageErrorf("%s %d: %v", unit, n, err)
					break loop
				}
			}
			if keySep != "" {
				k, v, ok := bytes.Cut(l.line, []byte(keySep))
				if !ok {
					inputErr = usageErrorf("%s %d has no key separator %q", unit, n, o.keySeparator)
					break loop
				}
				r.Key, r.Value = k, v
			}
			if size := loneBatchSize(r, codec); size > limit {
				inputErr = usageErrorf("%s %d: a record of %d bytes in its batch is over the topic's max.message.bytes (%d), which the broker refuses (RECORD_TOO_LARGE)", unit, n, size, limit)
				break loop
			}
			p.Produce(sendCtx, r, done)
		}
	}

	fctx, cancel := context.WithTimeout(sendCtx, f.timeout)
	defer cancel()
	flushErr := p.Flush(fctx)
	ok := failed.get() == nil && inputErr == nil && flushErr == nil
	if n := produced.Load(); n > 0 || ok {
		fmt.Fprintf(cmd.ErrOrStderr(), "produced %s to %s\n", plural(n, "record"), topic)
	}
	switch {
	case failed.get() != nil:
		return failed.get()
	case inputErr != nil:
		return inputErr
	case flushErr != nil:
		return fmt.Errorf("%d records still unacknowledged after %s (--timeout): %w", int64(n)-produced.Load(), f.timeout, flushErr)
	}
	return nil
}

// checkTopic fails fast, with the broker's reason, when the topic or the
// chosen partition does not exist (the producer itself would wait for
// them to appear in the metadata for --timeout). It returns the topic's
// max.message.bytes.
func checkTopic(ctx context.Context, c *client.Client, f *clientFlags, topic string, partition int32) (int64, error) {
	rctx, cancel := f.withTimeout(ctx)
	defer cancel()
	desc, err := c.DescribeTopic(rctx, topic)
	if err != nil {
		return 0, topicError(topic, err)
	}
	if n := int32(len(desc.GetPartitions())); partition >= n {
		return 0, usageErrorf("topic %q has no partition %d: it has %d (PARTITION_NOT_FOUND)", topic, partition, n)
	}
	limit := int64(defaultMaxMessageBytes)
	if v, ok := desc.GetConfig()["max.message.bytes"]; ok {
		if limit, err = strconv.ParseInt(v, 10, 64); err != nil || limit <= 0 {
			return 0, fmt.Errorf("topic %q has max.message.bytes %q, not a number of bytes", topic, v)
		}
	}
	return limit, nil
}

// loneBatchSize is the size of r alone in a batch, as the broker measures
// it against max.message.bytes: the whole batch when it is not compressed;
// when it is, the records uncompressed, which the broker also bounds (a
// compressed batch of them may be smaller, so this is the bound that holds
// whatever the codec achieves).
func loneBatchSize(r *client.Record, codec record.Compression) int64 {
	size := 1 + 1 + 1 + bytesSize(r.Key) + bytesSize(r.Value) + varintSize(int64(len(r.Headers))) // attributes, deltas
	for _, h := range r.Headers {
		size += varintSize(int64(len(h.Key))) + len(h.Key) + bytesSize(h.Value)
	}
	size += varintSize(int64(size))
	if codec == record.CompressionNone {
		size += record.HeaderSize
	}
	return int64(size)
}

// bytesSize is the encoded size of a record's key, value or header value:
// its length as a varint (-1 for null), then the bytes.
func bytesSize(b []byte) int {
	if b == nil {
		return varintSize(-1)
	}
	return varintSize(int64(len(b))) + len(b)
}

// varintSize is the size of v as a zigzag varint.
func varintSize(v int64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutVarint(buf[:], v)
}

// plural is "1 record" or "n records".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatInt(n, 10) + " " + noun + "s"
}

// lineOrErr is one input record, or the error that ended the input.
type lineOrErr struct {
	line []byte
	err  error
}

// readRecords sends each record of in (a copy) to out and closes it at the
// end of the input or after an error. Records end at delim, or, when it is
// nil, at line ends ("\n" or "\r\n"); the last needs no end. One longer
// than limit bytes is an error.
func readRecords(ctx context.Context, in io.Reader, delim []byte, limit int, out chan<- lineOrErr) {
	defer close(out)
	unit := "line"
	split := bufio.ScanLines
	if delim != nil {
		unit = "record"
		split = func(data []byte, atEOF bool) (int, []byte, error) {
			if i := bytes.Index(data, delim); i >= 0 {
				return i + len(delim), data[:i], nil
			}
			if atEOF && len(data) > 0 {
				return len(data), data, nil
			}
			return 0, nil, nil
		}
	}
	tooLong := func(n int) error {
		return usageErrorf("%s %d is longer than the topic's max.message.bytes (%d bytes), which the broker refuses (RECORD_TOO_LARGE)", unit, n, limit)
	}
	sc := bufio.NewScanner(in)
	sc.Split(split)
	// Room for the longest record plus its end.
	sc.Buffer(make([]byte, 64<<10), limit+max(len(delim), 2)+1)
	n := 0
	for sc.Scan() {
		n++
		l := lineOrErr{line: bytes.Clone(sc.Bytes())}
		if len(l.line) > limit {
			l = lineOrErr{err: tooLong(n)}
		} else if l.line == nil {
			l.line = []byte{}
		}
		select {
		case out <- l:
		case <-ctx.Done():
			return
		}
		if l.err != nil {
			return
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = tooLong(n + 1)
		} else {
			err = usageErrorf("reading input: %v", err)
		}
		select {
		case out <- lineOrErr{err: err}:
		case <-ctx.Done():
		}
	}
}

// firstError keeps the first error set by any goroutine.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (e *firstError) set(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
}

func (e *firstError) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// recordTime is the time v gives (as parseTime reads it) for a record.
// A time before 1970 is refused here: the broker would refuse it
// (INVALID_TIMESTAMP), and with it the records batched beside it.
func recordTime(v string) (time.Time, error) {
	t, err := parseTime(v)
	if err == nil && t.UnixMilli() < 0 {
		return time.Time{}, fmt.Errorf("%q is before 1970, which a record's time cannot be", v)
	}
	return t, err
}

// jsonFieldTime is the time in field (a.b names a nested one) of the JSON
// object line: a string parseTime reads, or a number of epoch
// milliseconds.
func jsonFieldTime(line []byte, field string) (time.Time, error) {
	var obj map[string]any
	if err := json.Unmarshal(line, &obj); err != nil {
		return time.Time{}, fmt.Errorf("not a JSON object (--timestamp-field %s): %v", field, err)
	}
	var v any = obj
	for _, name := range strings.Split(field, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return time.Time{}, fmt.Errorf("no field %s: %s is not an object", field, name)
		}
		if v, ok = m[name]; !ok {
			return time.Time{}, fmt.Errorf("no field %s", field)
		}
	}
	switch t := v.(type) {
	case string:
		return recordTime(t)
	case float64:
		if t < 0 || t != float64(int64(t)) {
			return time.Time{}, fmt.Errorf("field %s is %v: want whole epoch milliseconds >= 0", field, t)
		}
		return time.UnixMilli(int64(t)), nil
	}
	return time.Time{}, fmt.Errorf("field %s holds %v: want a time string or epoch milliseconds", field, v)
}
