package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
)

// cliResult is what one strata client command did.
type cliResult struct {
	stdout, stderr string
	code           int
}

// strata runs a client command against b and returns its output and exit
// code, whatever they are; t is the calling (sub)test.
func strata(t *testing.T, b *brokerProc, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, strataBin(t), append(args, "--broker", b.addr)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("strata %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// mustStrata is strata that fails the test on a non-zero exit and returns
// standard output.
func mustStrata(t *testing.T, b *brokerProc, stdin string, args ...string) string {
	t.Helper()
	res := strata(t, b, stdin, args...)
	if res.code != 0 {
		t.Fatalf("strata %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
	}
	return res.stdout
}

// wantFailure checks that a command exits 1 with exactly one line on
// standard error, "strata: ..." containing every want.
func wantFailure(t *testing.T, res cliResult, want ...string) {
	t.Helper()
	msg := strings.TrimSuffix(res.stderr, "\n")
	if res.code != 1 || !strings.HasPrefix(msg, "strata: ") || strings.Contains(msg, "\n") {
		t.Fatalf("want exit 1 and one line \"strata: ...\" on stderr; got exit %d, stderr %q", res.code, res.stderr)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("stderr %q lacks %q", msg, w)
		}
	}
}

// squeeze collapses runs of spaces so table rows compare without their
// alignment.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }

// rowsOf returns the squeezed non-empty lines of a table.
func rowsOf(s string) []string {
	var out []string
	for _, l := range lines(s) {
		if l = squeeze(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func TestCLITopics(t *testing.T) {
	b := newBroker(t, 1)
	b.start()

	out := mustStrata(t, b, "", "topic", "create", "orders", "--partitions", "2", "--config", "retention.ms=90d")
	rows := rowsOf(out)
	for _, want := range []string{
		"Topic: orders",
		"Partitions: 2",
		"SETTING VALUE",
		"retention.ms 7776000000 (90d) *override",
		"segment.bytes 134217728 (128MiB)",
		"PARTITION LEADER EPOCH REPLICAS ISR LOG-START HIGH-WATERMARK LOG-END LOCAL-START LOCAL-SIZE SEGMENTS COLD-SIZE COLD-SEGMENTS UPLOAD-LAG RECOVERY-POINT",
		"0 1 0 1 1 0 0 0 0 0 B 1 0 B 0 0 -", // no object store: no recovery point
		"1 1 0 1 1 0 0 0 0 0 B 1 0 B 0 0 -",
	} {
		if !slices.Contains(rows, want) {
			t.Errorf("topic create output lacks row %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^ID:\s+[0-9a-f]{8,}$`).MatchString(out) {
		t.Errorf("topic create output lacks the topic id:\n%s", out)
	}
	mustStrata(t, b, "", "topic", "create", "audit")

	if got, want := rowsOf(mustStrata(t, b, "", "topic", "list")), []string{"NAME PARTITIONS REPLICATION", "audit 1 1", "orders 2 1"}; !slices.Equal(got, want) {
		t.Errorf("topic list: %q, want %q", got, want)
	}

	// Records show in the log figures of describe.
	mustStrata(t, b, "a\nb\nc\n", "produce", "orders", "--partition", "1")
	rows = rowsOf(mustStrata(t, b, "", "topic", "describe", "orders"))
	var p1 string
	for _, r := range rows {
		if strings.HasPrefix(r, "1 ") {
			p1 = r
		}
	}
	if f := strings.Fields(p1); len(f) < 8 || f[5] != "0" || f[6] != "3" || f[7] != "3" {
		t.Errorf("partition 1 after 3 records: %q, want log start 0, high watermark 3, log end 3", p1)
	}

	// alter prints the settings after the change.
	out = mustStrata(t, b, "", "topic", "alter", "orders", "--set", "segment.ms=2h", "--delete", "retention.ms")
	rows = rowsOf(out)
	for _, want := range []string{"segment.ms 7200000 (2h) *override", "retention.ms 604800000 (7d)"} {
		if !slices.Contains(rows, want) {
			t.Errorf("topic alter output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "PARTITION") {
		t.Errorf("topic alter prints partitions:\n%s", out)
	}
	rows = rowsOf(mustStrata(t, b, "", "topic", "describe", "orders"))
	if !slices.Contains(rows, "segment.ms 7200000 (2h) *override") || slices.Contains(rows, "retention.ms 7776000000 (90d) *override") {
		t.Errorf("describe after alter:\n%s", strings.Join(rows, "\n"))
	}

	if out := mustStrata(t, b, "", "topic", "delete", "orders"); out != "deleted topic orders\n" {
		t.Errorf("topic delete: %q", out)
	}
	if got, want := rowsOf(mustStrata(t, b, "", "topic", "list")), []string{"NAME PARTITIONS REPLICATION", "audit 1 1"}; !slices.Equal(got, want) {
		t.Errorf("topic list after delete: %q, want %q", got, want)
	}
	wantFailure(t, strata(t, b, "", "topic", "describe", "orders"), `topic "orders" not found (TOPIC_NOT_FOUND)`)
}

// jsonRecord is one line of consume --format json.
type jsonRecord struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp string
	Key       *string
	Value     *string
	KeyB64    string `json:"key_b64"`
	ValueB64  string `json:"value_b64"`
	Headers   []struct {
		Key   string
		Value *string
	}
}

func decodeJSONLines(t *testing.T, out string) []jsonRecord {
	t.Helper()
	var recs []jsonRecord
	for _, l := range lines(out) {
		var r jsonRecord
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("consume --format json line %q: %v", l, err)
		}
		recs = append(recs, r)
	}
	return recs
}

func TestCLIProduceConsumeJSON(t *testing.T) {
	b := newBroker(t, 1)
	b.start()
	mustStrata(t, b, "", "topic", "create", "users", "--partitions", "3")

	input := "user-1:logged in\r\nuser-2:a:b\nuser-3:\nuser-1:logged out\nuser-4:\xff\xfe\n"
	res := strata(t, b, input, "produce", "users", "--key-separator", ":", "--header", "source=cli", "--header", "trace=t=1")
	if res.code != 0 || res.stderr != "produced 5 records to users\n" {
		t.Fatalf("produce: exit %d, stderr %q", res.code, res.stderr)
	}

	before := time.Now().Add(-time.Minute)
	recs := decodeJSONLines(t, mustStrata(t, b, "", "consume", "users", "--format", "json"))
	if len(recs) != 5 {
		t.Fatalf("consumed %d records, want 5: %+v", len(recs), recs)
	}
	want := map[string]string{"user-2": "a:b", "user-3": "", "user-4": "\xff\xfe"}
	var user1 []string
	for _, r := range recs {
		if r.Key == nil || r.Topic != "users" {
			t.Fatalf("record %+v: want topic users and a key", r)
		}
		key := *r.Key
		if p := client.KeyPartition([]byte(key), 3); r.Partition != p {
			t.Errorf("key %q in partition %d, want %d (KeyPartition)", key, r.Partition, p)
		}
		var value string
		switch {
		case key == "user-4":
			if r.Value != nil || r.ValueB64 != "//4=" {
				t.Errorf("binary value: %+v, want value_b64 //4=", r)
			}
			value = "\xff\xfe"
		case r.Value == nil:
			t.Fatalf("record %+v has no value", r)
		default:
			value = *r.Value
		}
		if key == "user-1" {
			user1 = append(user1, value)
		} else if value != want[key] {
			t.Errorf("key %s: value %q, want %q", key, value, want[key])
		}
		if len(r.Headers) != 2 || r.Headers[0].Key != "source" || *r.Headers[0].Value != "cli" ||
			r.Headers[1].Key != "trace" || *r.Headers[1].Value != "t=1" {
			t.Errorf("headers %+v, want source=cli, trace=t=1", r.Headers)
		}
		ts, err := time.Parse("2006-01-02T15:04:05.000Z07:00", r.Timestamp)
		if err != nil || ts.Before(before) || ts.After(time.Now().Add(time.Minute)) {
			t.Errorf("timestamp %q: want RFC 3339 with ms, about now (%v)", r.Timestamp, err)
		}
	}
	// One key, one partition: order holds, and "\r\n" lost its "\r".
	if !slices.Equal(user1, []string{"logged in", "logged out"}) {
		t.Errorf("user-1 values %q, want [logged in, logged out] in order", user1)
	}

	// kv with a chosen separator, one partition.
	p := client.KeyPartition([]byte("user-1"), 3)
	var kv []string
	for _, l := range lines(mustStrata(t, b, "", "consume", "users", "--partition", fmt.Sprint(p), "--format", "kv", "--key-separator", " => ")) {
		if strings.HasPrefix(l, "user-1 ") {
			kv = append(kv, l)
		}
	}
	if !slices.Equal(kv, []string{"user-1 => logged in", "user-1 => logged out"}) {
		t.Errorf("kv output of user-1 in partition %d: %q", p, kv)
	}

	// --key gives every record one key; a line without the separator is an
	// error naming it.
	mustStrata(t, b, "x\ny\n", "produce", "users", "--key", "same")
	// What was read before the bad line is still sent, and counted.
	res = strata(t, b, "k:v\nno separator here\n", "produce", "users", "--key-separator", ":")
	if want := "produced 1 record to users\nstrata: line 2 has no key separator \":\"\n"; res.code != 1 || res.stderr != want {
		t.Errorf("produce with a line without separator: exit %d, stderr %q; want exit 1, %q", res.code, res.stderr, want)
	}
	// Nothing sent: the error alone, no count of 0.
	wantFailure(t, strata(t, b, "no separator here\n", "produce", "users", "--key-separator", ":"), "line 1 has no key separator")
	if res := strata(t, b, "", "produce", "users"); res.code != 0 || res.stderr != "produced 0 records to users\n" {
		t.Errorf("empty input: exit %d, stderr %q", res.code, res.stderr)
	}
}

func TestCLIConsumeFrom(t *testing.T) {
	b := newBroker(t, 1)
	b.start()
	mustStrata(t, b, "", "topic", "create", "log")

	// An old record (3 hours ago) through the Go client, then new ones
	// through the CLI.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := c.NewProducer()
	old := time.Now().Add(-3 * time.Hour)
	if err := p.ProduceSync(ctx, &client.Record{Topic: "log", Partition: 0, Value: []byte("old"), Timestamp: old}); err != nil {
		t.Fatal(err)
	}
	p.Close()
	mustStrata(t, b, "r1\nr2\nr3\nr4\n", "produce", "log")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", "earliest"}, "old r1 r2 r3 r4"},
		{nil, "old r1 r2 r3 r4"},
		{[]string{"--from", "latest"}, ""},
		{[]string{"--from", "2"}, "r2 r3 r4"},
		{[]string{"--from", "99"}, ""}, // all partitions: past the end is the end
		{[]string{"--partition", "0", "--from", "3", "--max", "1"}, "r3"},
		{[]string{"--max", "2"}, "old r1"},
		{[]string{"--from", "1h"}, "r1 r2 r3 r4"},
		{[]string{"--from", "2h30m"}, "r1 r2 r3 r4"},
		{[]string{"--from", "1d"}, "old r1 r2 r3 r4"},
		{[]string{"--from", time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)}, "r1 r2 r3 r4"},
		{[]string{"--from", old.Add(-time.Second).Format(time.RFC3339Nano)}, "old r1 r2 r3 r4"},
		{[]string{"--from", time.Now().Add(time.Hour).Format(time.RFC3339)}, ""},
	} {
		got := strings.Join(lines(mustStrata(t, b, "", append([]string{"consume", "log"}, tc.args...)...)), " ")
		if got != tc.want {
			t.Errorf("consume log %s: %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	wantFailure(t, strata(t, b, "", "consume", "log", "--partition", "0", "--from", "99"), "offset 99", "OFFSET_OUT_OF_RANGE")
}

// lineReader delivers the lines a process writes, as they come, and
// closes done once the output has ended (then cmd.Wait may run).
func lineReader(r io.Reader) (lines <-chan string, done <-chan struct{}) {
	ch := make(chan string, 100)
	end := make(chan struct{})
	go func() {
		defer close(end)
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch, end
}

// expectLine waits for the next line from ch and checks it.
func expectLine(t *testing.T, ch <-chan string, want string, within time.Duration) {
	t.Helper()
	select {
	case got, ok := <-ch:
		if !ok {
			t.Fatalf("output ended while waiting for %q", want)
		}
		if got != want {
			t.Fatalf("got line %q, want %q", got, want)
		}
	case <-time.After(within):
		t.Fatalf("no line %q within %s", want, within)
	}
}

func TestCLIConsumeFollow(t *testing.T) {
	b := newBroker(t, 1)
	b.start()
	mustStrata(t, b, "", "topic", "create", "live", "--partitions", "2")
	mustStrata(t, b, "before\n", "produce", "live")

	cmd := exec.Command(strataBin(t), "consume", "live", "--follow", "--group", "tail", "--broker", b.addr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	got, outputEnded := lineReader(stdout)
	exited := make(chan error, 1)
	go func() {
		<-outputEnded
		exited <- cmd.Wait()
	}()

	expectLine(t, got, "before", 15*time.Second)
	mustStrata(t, b, "after\n", "produce", "live", "--key", "k")
	expectLine(t, got, "after", 15*time.Second)

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("follow consume after SIGINT: %v\nstderr: %s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("follow consume still running 15s after SIGINT")
	}

	// The group committed what it printed: it resumes after "after".
	if out := mustStrata(t, b, "", "consume", "live", "--group", "tail"); out != "" {
		t.Errorf("group resumed with %q, want nothing", out)
	}
	mustStrata(t, b, "later\n", "produce", "live")
	if out := mustStrata(t, b, "", "consume", "live", "--group", "tail"); out != "later\n" {
		t.Errorf("group resumed with %q, want later", out)
	}
}

// TestCLIJSON: the listings of the real binary against a real broker
// decode as the JSON docs/CLI.md describes.
func TestCLIJSON(t *testing.T) {
	b := newBroker(t, 1)
	b.start()
	mustStrata(t, b, "", "topic", "create", "events", "--partitions", "2")
	mustStrata(t, b, "a\nb\nc\n", "produce", "events")

	var topics []struct {
		Name              string `json:"name"`
		Partitions        int32  `json:"partitions"`
		ReplicationFactor int32  `json:"replication_factor"`
	}
	if err := json.Unmarshal([]byte(mustStrata(t, b, "", "topic", "list", "--format", "json")), &topics); err != nil ||
		len(topics) != 1 || topics[0].Name != "events" || topics[0].Partitions != 2 || topics[0].ReplicationFactor != 1 {
		t.Fatalf("topic list --format json: %+v %v", topics, err)
	}
	var topic struct {
		Name       string `json:"name"`
		Partitions []struct {
			Partition     int32 `json:"partition"`
			HighWatermark int64 `json:"high_watermark"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(mustStrata(t, b, "", "topic", "describe", "events", "--format", "json")), &topic); err != nil ||
		topic.Name != "events" || len(topic.Partitions) != 2 || topic.Partitions[0].HighWatermark+topic.Partitions[1].HighWatermark != 3 {
		t.Fatalf("topic describe --format json: %+v %v", topic, err)
	}
	var status struct {
		BrokerID int32 `json:"broker_id"`
		Brokers  []struct {
			ID       int32 `json:"id"`
			Answered bool  `json:"answered"`
		} `json:"brokers"`
	}
	if err := json.Unmarshal([]byte(mustStrata(t, b, "", "cluster", "status", "--format", "json")), &status); err != nil ||
		status.BrokerID != 1 || len(status.Brokers) != 1 || !status.Brokers[0].Answered {
		t.Fatalf("cluster status --format json: %+v %v", status, err)
	}
}

func TestCLIErrors(t *testing.T) {
	b := newBroker(t, 1)
	b.start()
	mustStrata(t, b, "", "topic", "create", "there")

	const notFound = `strata: topic "nope" not found (TOPIC_NOT_FOUND)` + "\n"
	for _, args := range [][]string{
		{"topic", "describe", "nope"},
		{"topic", "delete", "nope"},
		{"topic", "alter", "nope", "--set", "retention.ms=1d"},
		{"consume", "nope"},
		{"produce", "nope"},
		{"bench", "consume", "--topic", "nope"},
	} {
		res := strata(t, b, "x\n", args...)
		if res.code != 1 || res.stderr != notFound {
			t.Errorf("strata %s: exit %d, stderr %q; want exit 1, %q", strings.Join(args, " "), res.code, res.stderr, notFound)
		}
	}

	wantFailure(t, strata(t, b, "", "consume", "there", "--from", "yesterday"), `--from "yesterday"`, "earliest", "RFC 3339")
	wantFailure(t, strata(t, b, "", "topic", "create", "bad", "--config", "retention.ms=forever"), `"forever"`, "retention.ms", "INVALID_CONFIG")
	wantFailure(t, strata(t, b, "", "topic", "create", "bad", "--config", "retention.msx=1d"), `"retention.msx"`, "INVALID_CONFIG")
	wantFailure(t, strata(t, b, "", "topic", "alter", "there", "--set", "segment.bytes=1KiB"), "segment.bytes", "INVALID_CONFIG")
	wantFailure(t, strata(t, b, "", "topic", "create", "bad", "--config", "retention.ms"), "--config", "key=value")
	wantFailure(t, strata(t, b, "", "topic", "create", "there"), "there", "TOPIC_ALREADY_EXISTS")
	wantFailure(t, strata(t, b, "", "consume", "there", "--partition", "4"), "partition 4", "PARTITION_NOT_FOUND")
	wantFailure(t, strata(t, b, "", "consume", "there", "--format", "xml"), `--format "xml"`)
	wantFailure(t, strata(t, b, "", "topic", "describe"), "missing NAME")
	wantFailure(t, strata(t, b, "", "topic", "lsit"), `unknown command "lsit" for "strata topic"; did you mean "list"?`)
	wantFailure(t, strata(t, b, "", "topic", "list", "--fromat", "json"), "unknown flag: --fromat; did you mean --format?")
	wantFailure(t, strata(t, b, "", "topic", "list", "--format", "yaml"), `--format "yaml": want text or json`)

	// No broker at the address: says so at once.
	dead := &brokerProc{addr: freeport.Loopback(t)}
	start := time.Now()
	wantFailure(t, strata(t, dead, "", "topic", "list"), "cannot reach a broker at "+dead.addr, "connection refused")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("an unreachable broker took %s to report", d)
	}
}
