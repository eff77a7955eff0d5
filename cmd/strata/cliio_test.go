package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
)

func TestBrokerAddresses(t *testing.T) {
	for in, want := range map[string]string{
		"localhost":                   "localhost:7400",
		"broker-1.example":            "broker-1.example:7400",
		"10.0.0.7":                    "10.0.0.7:7400",
		"::1":                         "[::1]:7400",
		"[::1]":                       "[::1]:7400",
		"[::1]:9000":                  "[::1]:9000",
		"localhost:7401":              "localhost:7401",
		" a , b:7500 ,":               "a:7400,b:7500",
		"127.0.0.1:7400,127.0.0.2":    "127.0.0.1:7400,127.0.0.2:7400",
		"fe80::1,[fe80::2]:1":         "[fe80::1]:7400,[fe80::2]:1",
		"localhost:65535,localhost:1": "localhost:65535,localhost:1",
	} {
		got, err := parseBrokers(in)
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("parseBrokers(%q) = %q, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"", " , ", ":7400", "localhost:", "localhost:http", "localhost:0", "localhost:70000", "a:b:c", "[::1", "host/path"} {
		if got, err := parseBrokers(bad); err == nil || !strings.Contains(err.Error(), "--broker") {
			t.Errorf("parseBrokers(%q) = %q, %v; want an error naming --broker", bad, got, err)
		}
	}
	// Every client command reads --broker this way: a host alone that
	// nothing listens on is named with the default port.
	_, _, err := runWithInput(t, "", "topic", "list", "--broker", "localhost.invalid", "--timeout", "2s")
	if err == nil || !strings.Contains(err.Error(), "localhost.invalid:7400") {
		t.Errorf("topic list --broker localhost.invalid: %v, want it to name localhost.invalid:7400", err)
	}
}

func TestParseStart(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]startPosition{
		"oldest":           {spec: client.Earliest()},
		"beginning":        {spec: client.Earliest()},
		"newest":           {spec: client.Latest()},
		"end":              {spec: client.Latest()},
		"-5":               {spec: client.Latest(), back: 5},
		"7":                {spec: client.AtOffset(7), offset: 7, isOffset: true},
		"s@1714564800000":  {spec: client.AtTime(time.UnixMilli(1714564800000)), at: time.UnixMilli(1714564800000)},
		" @1714564800000 ": {spec: client.AtTime(time.UnixMilli(1714564800000)), at: time.UnixMilli(1714564800000)},
	} {
		got, err := parseStart(in, now)
		if err != nil || got != want {
			t.Errorf("parseStart(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"-", "-0", "--5", "-+5", "-5m", "-x", "s@", "s@x", "s@-1"} {
		if _, err := parseStart(bad, now); err == nil || !strings.Contains(err.Error(), "--from") {
			t.Errorf("parseStart(%q) = %v, want an error naming --from", bad, err)
		}
	}
	// Where -N puts partitions of [lo, hi).
	for _, tc := range []struct{ back, lo, hi, want int64 }{{5, 0, 10, 5}, {5, 0, 3, 0}, {5, 8, 10, 8}, {1, 0, 0, 0}} {
		if got := startOffset(startPosition{back: tc.back}, tc.lo, tc.hi); got != tc.want {
			t.Errorf("-%d of [%d, %d) starts at %d, want %d", tc.back, tc.lo, tc.hi, got, tc.want)
		}
	}
}

func TestFormatString(t *testing.T) {
	r := &client.Record{
		Topic: "t", Partition: 3, Offset: 42, Timestamp: time.UnixMilli(1714564800123),
		Key: nil, Value: []byte("v\x00al"),
		Headers: []client.Header{{Key: "a", Value: []byte("1")}, {Key: "b", Value: []byte("2")}},
	}
	for spec, want := range map[string]string{
		`%k %o %T %s\n`:                    " 42 1714564800123 v\x00al\n",
		`%t/%p@%o K%K S%S [%h] 100%%\t|\\`: "t/3@42 K-1 S4 [a=1,b=2] 100%\t|\\",
		`%s`:                               "v\x00al",
		`no directive but a %% sign\0`:     "no directive but a % sign\x00",
	} {
		f, err := newRecordFormat(spec, "=", "\n")
		if err != nil {
			t.Errorf("--format %q: %v", spec, err)
			continue
		}
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		f(w, r)
		w.Flush()
		if got := buf.String(); got != want {
			t.Errorf("--format %q wrote %q, want %q", spec, got, want)
		}
	}
	for spec, want := range map[string]string{
		`%x`:      "unknown directive %x",
		`%s%`:     "lone %",
		`%s\q`:    `unknown escape \q`,
		`%s\`:     `lone \`,
		`yaml`:    "want value, kv, json",
		`json %s`: "", // a format string with a % in it, not the json format
	} {
		_, err := newRecordFormat(spec, "=", "\n")
		if want == "" {
			if err != nil {
				t.Errorf("--format %q: %v", spec, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--format") {
			t.Errorf("--format %q: %v, want an error naming --format with %q", spec, err, want)
		}
	}
}

// TestProduceConsumeAsKcat writes and reads records the way kcat users do:
// -K and -D with escapes, -H headers, -o with oldest, newest, -N and s@ms,
// -f format strings; and values that are not text survive JSON.
func TestProduceConsumeAsKcat(t *testing.T) {
	addr := startACLBroker(t)
	mustStrataCmd(t, "topic", "create", "kc", "--partitions", "2", "--broker", addr)
	// Records split at NUL, keys at a tab; one value holds a newline.
	in := "user-1\thello\x00user-2\tmulti\nline\x00user-1\tagain\x00"
	_, errOut, err := runWithInput(t, in, "produce", "kc", "--broker", addr, "-K", `\t`, "-D", `\0`, "-H", "src=cli", "-H", "n=1",
		"--timestamp", "@1714564800000")
	if err != nil || errOut != "produced 3 records to kc\n" {
		t.Fatalf("produce -K -D: %v, stderr %q", err, errOut)
	}
	_, errOut, err = runWithInput(t, "x\n", "produce", "kc", "--broker", addr, "--key", "user-3", "--partition", "0")
	if err != nil || errOut != "produced 1 record to kc\n" {
		t.Fatalf("produce one: %v, stderr %q", err, errOut)
	}

	consume := func(args ...string) string {
		t.Helper()
		out, errOut, err := runWithInput(t, "", append([]string{"consume", "kc", "--broker", addr}, args...)...)
		if err != nil {
			t.Fatalf("consume %q: %v\n%s", args, err, errOut)
		}
		return out
	}
	// One partition at a time, so the order is the log's.
	var all []string
	for p := range 2 {
		out := consume("-p", strconv.Itoa(p), "-o", "oldest", "-f", `%p|%o|%k|%K|%S|%T|%h|%s\n`)
		all = append(all, strings.SplitAfter(out, "\n")...)
	}
	joined := strings.Join(all, "")
	for _, want := range []string{
		"|user-1|6|5|1714564800000|src=cli,n=1|hello\n",
		"|user-2|6|10|1714564800000|src=cli,n=1|multi\nline\n",
		"|user-1|6|5|1714564800000|src=cli,n=1|again\n",
		"0|", "|user-3|6|1|",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("consume -f printed\n%s\nwithout %q", joined, want)
		}
	}
	// -o -1: the last record of each partition; newest: none; -D between
	// records of --format value.
	last := consume("-p", "0", "-o", "-1", "-D", "|")
	if last != "x|" {
		t.Errorf("consume -p 0 -o -1 -D '|' printed %q, want %q", last, "x|")
	}
	if out := consume("-o", "newest"); out != "" {
		t.Errorf("consume -o newest printed %q", out)
	}
	if out := consume("-o", "-100", "-n", "10"); strings.Count(out, "\n") != 5 {
		t.Errorf("consume -o -100 printed %q, want all 4 records (5 lines)", out)
	}
	// s@ms: from that time on: the three records stamped then; the one
	// stamped now is after it too.
	if out := consume("-o", "s@1714564800001", "-f", `%s\n`); out != "x\n" {
		t.Errorf("consume -o s@1714564800001 printed %q, want x", out)
	}
	// kv with -K, and -f json with the delimiter.
	if out := consume("-p", "0", "-f", "kv", "-K", `\t`, "-o", "-1"); out != "user-3\tx\n" {
		t.Errorf("consume -f kv -K '\\t' printed %q", out)
	}
	// Bad flags change nothing and say which.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "-5m"}, `--from "-5m"`},
		{[]string{"-f", "%q"}, "unknown directive %q"},
		{[]string{"-D", `\y`}, `--delimiter "\\y"`},
		{[]string{"-o", "-1", "--group", "g"}, "cannot be used with --group"},
	} {
		_, _, err := runWithInput(t, "", append([]string{"consume", "kc", "--broker", addr}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("consume %q: %v, want an error with %q", tc.args, err, tc.want)
		}
	}

	// Binary values come back whole in JSON, as base64.
	mustStrataCmd(t, "topic", "create", "bin", "--broker", addr)
	value := []byte{0xff, 0xfe, 0x00, '\n', 0x80}
	if _, errOut, err := runWithInput(t, string(value)+"|", "produce", "bin", "--broker", addr, "-D", "|"); err != nil {
		t.Fatalf("produce binary: %v %s", err, errOut)
	}
	out := consume2(t, addr, "bin", "-f", "json")
	if want := `"value_b64":"` + base64.StdEncoding.EncodeToString(value) + `"`; !strings.Contains(out, want) {
		t.Errorf("consume --format json of a binary value: %s, want %s", out, want)
	}
}

func consume2(t *testing.T, addr, topic string, args ...string) string {
	t.Helper()
	out, errOut, err := runWithInput(t, "", append([]string{"consume", topic, "--broker", addr}, args...)...)
	if err != nil {
		t.Fatalf("consume %s %q: %v\n%s", topic, args, err, errOut)
	}
	return out
}

// TestProduceFollowsTheTopicsLimit: lines as long as the topic's
// max.message.bytes are records; a record the broker would refuse is
// refused first, naming the limit; the count is printed only when records
// were written.
func TestProduceFollowsTheTopicsLimit(t *testing.T) {
	addr := startACLBroker(t)
	mustStrataCmd(t, "topic", "create", "big", "--config", "max.message.bytes=4MiB", "--broker", addr)
	mustStrataCmd(t, "topic", "create", "small", "--broker", addr)

	// 2 MiB and 3 MiB lines on a topic of 4 MiB.
	in := strings.Repeat("a", 2<<20) + "\n" + strings.Repeat("b", 3<<20) + "\n"
	if _, errOut, err := runWithInput(t, in, "produce", "big", "--broker", addr); err != nil || errOut != "produced 2 records to big\n" {
		t.Fatalf("produce of 2 and 3 MiB lines to a 4 MiB topic: %v, stderr %q", err, errOut)
	}
	if out := consume2(t, addr, "big", "-f", `%S\n`); out != fmt.Sprintf("%d\n%d\n", 2<<20, 3<<20) {
		t.Errorf("consumed lengths %q", out)
	}
	// The default limit: a 1.5 MiB line is refused, naming the limit,
	// and nothing is written; the count is not printed.
	_, errOut, err := runWithInput(t, strings.Repeat("c", 3<<19)+"\n", "produce", "small", "--broker", addr)
	if err == nil || !strings.Contains(err.Error(), "line 1") || !strings.Contains(err.Error(), "max.message.bytes (1048588") || errOut != "" {
		t.Errorf("a 1.5 MiB line on a default topic: %v, stderr %q; want an error naming line 1 and max.message.bytes (1048588), no count", err, errOut)
	}

	// The exact bound: a record whose batch is the limit goes through
	// the broker; one byte more is refused here, after the records before
	// it were written.
	const limit = 1048588
	fit := fitValue(t, limit, []byte("k"))
	in = "k:" + strings.Repeat("d", fit) + "\n" + "k:" + strings.Repeat("e", fit+1) + "\n"
	_, errOut, err = runWithInput(t, in, "produce", "small", "--broker", addr, "-K", ":", "--acks", "all")
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "RECORD_TOO_LARGE") || errOut != "produced 1 record to small\n" {
		t.Errorf("records at the limit and one byte over: %v, stderr %q", err, errOut)
	}
	if out := consume2(t, addr, "small", "-f", `%K %S\n`); out != fmt.Sprintf("1 %d\n", fit) {
		t.Errorf("small holds %q, want the one record of %d bytes", out, fit)
	}

	// Small records on a topic with a small limit: batches stay under it.
	mustStrataCmd(t, "topic", "create", "tiny", "--config", "max.message.bytes=1000", "--broker", addr)
	in = strings.Repeat(strings.Repeat("f", 100)+"\n", 200)
	if _, errOut, err := runWithInput(t, in, "produce", "tiny", "--broker", addr, "--partition", "0"); err != nil || errOut != "produced 200 records to tiny\n" {
		t.Errorf("200 records of 100 bytes to a topic of max.message.bytes=1000: %v, stderr %q", err, errOut)
	}
}

// fitValue is the value length whose record, with key, alone in an
// uncompressed batch, is exactly limit bytes, as the record package
// encodes it.
func fitValue(t *testing.T, limit int, key []byte) int {
	t.Helper()
	size := func(n int) int {
		b := record.NewBuilder(record.DefaultBatchOptions())
		b.Add(record.Record{Key: key, Value: make([]byte, n)})
		return b.EstimatedSize()
	}
	n := limit - record.HeaderSize - len(key) - 8
	for size(n+1) <= limit {
		n++
	}
	for size(n) > limit {
		n--
	}
	if size(n) != limit {
		t.Fatalf("no value length makes a batch of exactly %d bytes (%d gives %d)", limit, n, size(n))
	}
	if got := loneBatchSize(&client.Record{Key: key, Value: make([]byte, n)}, record.CompressionNone); got != int64(limit) {
		t.Fatalf("loneBatchSize = %d, the record package encodes %d", got, limit)
	}
	return n
}

// syncBuffer is a bytes.Buffer safe for a command's goroutines and the
// test's.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestConsumeFollowSaysWhenItReconnects stops the broker under a consume
// --follow and starts it again: stderr says once that it is reconnecting
// and once that it is back, and records written after come through.
func TestConsumeFollowSaysWhenItReconnects(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.ObjectStore.Type = config.ObjectStoreNone
	b, srv := startInProcess(t, cfg)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			srv.Stop()
			b.Close()
		}
	})
	addr := cfg.Listen
	mustStrataCmd(t, "topic", "create", "live", "--partitions", "2", "--broker", addr)
	if _, errOut, err := runWithInput(t, "before\n", "produce", "live", "--broker", addr); err != nil {
		t.Fatalf("produce: %v %s", err, errOut)
	}

	root := newRootCommand()
	var out, errOut syncBuffer
	root.SetIn(strings.NewReader(""))
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"consume", "live", "--follow", "--broker", addr, "--timeout", "5s"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	stopConsume := sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stopConsume)

	testutil.WaitFor(t, 20*time.Second, "the record written before", func() bool { return out.String() == "before\n" })
	srv.Stop()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	testutil.WaitFor(t, 20*time.Second, "stderr saying it reconnects", func() bool { return strings.Contains(errOut.String(), "reconnecting") })

	b2, srv2 := startInProcess(t, cfg)
	t.Cleanup(func() {
		stopConsume()
		srv2.Stop()
		b2.Close()
	})
	if _, eo, err := runWithInput(t, "after-1\nafter-2\n", "produce", "live", "--broker", addr, "--timeout", "20s"); err != nil {
		t.Fatalf("produce after the restart: %v %s", err, eo)
	}
	testutil.WaitFor(t, 30*time.Second, "the records written after the restart", func() bool {
		return strings.Count(out.String(), "after-") == 2
	})
	testutil.WaitFor(t, 10*time.Second, "stderr saying it is back", func() bool { return strings.Contains(errOut.String(), "reconnected") })
	if got := errOut.String(); strings.Count(got, "reconnecting") != 1 || strings.Count(got, "reconnected") != 1 ||
		!strings.HasPrefix(got, "strata: ") || !strings.Contains(got, "; reconnecting\nstrata: reconnected\n") {
		t.Errorf("stderr %q: want one line saying why it is reconnecting, one saying it reconnected", got)
	}
	t.Logf("stderr of consume --follow: %q", errOut.String())
	select {
	case err := <-done:
		t.Fatalf("consume --follow ended: %v", err)
	default:
	}
}

// BenchmarkRecordFormats is the cost of writing one record of a 100-byte
// value and 8-byte key in each --format, to compare a format string with
// the fixed formats:
//
//	go test ./cmd/strata/ -run '^$' -bench RecordFormats -benchmem
func BenchmarkRecordFormats(b *testing.B) {
	r := &client.Record{
		Topic: "bench", Partition: 3, Offset: 123456789, Timestamp: time.UnixMilli(1714564800123),
		Key: []byte("user-123"), Value: bytes.Repeat([]byte("v"), 100),
		Headers: []client.Header{{Key: "src", Value: []byte("cli")}},
	}
	for _, spec := range []string{"value", "kv", "json", `%s\n`, `%k=%s\n`, `%t %p %o %T %k %K %S %h %s\n`} {
		b.Run(spec, func(b *testing.B) {
			f, err := newRecordFormat(spec, "=", "\n")
			if err != nil {
				b.Fatal(err)
			}
			w := bufio.NewWriterSize(io.Discard, 64<<10)
			b.SetBytes(int64(len(r.Key) + len(r.Value)))
			b.ReportAllocs()
			for b.Loop() {
				f(w, r)
			}
		})
	}
}
