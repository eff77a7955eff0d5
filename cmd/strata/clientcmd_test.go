package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/human"
)

func TestParseFrom(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want client.OffsetSpec
	}{
		{"earliest", client.Earliest()},
		{"EARLIEST", client.Earliest()},
		{"latest", client.Latest()},
		{"0", client.AtOffset(0)},
		{"1042", client.AtOffset(1042)},
		{"2026-04-30T10:00:00Z", client.AtTime(time.Date(2026, 4, 30, 10, 0, 0, 0, time.UTC))},
		{"2026-04-30T12:00:00.250+02:00", client.AtTime(time.Date(2026, 4, 30, 10, 0, 0, 250e6, time.UTC))},
		{"15m", client.AtTime(now.Add(-15 * time.Minute))},
		{"2h30m", client.AtTime(now.Add(-150 * time.Minute))},
		{"1d", client.AtTime(now.Add(-24 * time.Hour))},
		// A date is its first instant in UTC; a date-time without a zone is
		// read as UTC too (the help says so).
		{"2026-04-30", client.AtTime(time.Date(2026, 4, 30, 0, 0, 0, 0, time.UTC))},
		{"2026-04-30T10:15", client.AtTime(time.Date(2026, 4, 30, 10, 15, 0, 0, time.UTC))},
		{"2026-04-30T10:15:30", client.AtTime(time.Date(2026, 4, 30, 10, 15, 30, 0, time.UTC))},
		{"2026-04-30 10:15:30.5", client.AtTime(time.Date(2026, 4, 30, 10, 15, 30, 500e6, time.UTC))},
		// Epoch milliseconds carry a marker: a bare number stays an offset.
		{"@1717200000000", client.AtTime(time.UnixMilli(1717200000000))},
		{"@0", client.AtTime(time.UnixMilli(0))},
	} {
		got, err := parseFrom(tc.in, now)
		if err != nil {
			t.Errorf("parseFrom(%q): %v", tc.in, err)
			continue
		}
		if got.spec != tc.want {
			t.Errorf("parseFrom(%q) = %v, want %v", tc.in, got.spec, tc.want)
		}
		if got.isOffset != strings.HasPrefix(tc.want.String(), "AtOffset") {
			t.Errorf("parseFrom(%q).isOffset = %v", tc.in, got.isOffset)
		}
	}
	for _, bad := range []string{"", "-1", "yesterday", "2026-13-01", "2026-04-31", "1M", "-5m", "@", "@-5", "@12x", "2026-04-30T25:00"} {
		_, err := parseFrom(bad, now)
		if err == nil || !strings.Contains(err.Error(), "--from") {
			t.Errorf("parseFrom(%q) = %v, want an error naming --from", bad, err)
		}
	}
}

func TestRecordJSON(t *testing.T) {
	ts := time.Date(2026, 5, 1, 12, 0, 0, 123e6, time.FixedZone("x", 3600))
	r := &client.Record{
		Topic: "t", Partition: 2, Offset: 7, Timestamp: ts,
		Key: []byte("k<&>"), Value: []byte{0xff, 0x00, 'a'},
		Headers: []client.Header{{Key: "h", Value: []byte("v\n")}, {Key: "n", Value: nil}},
	}
	line := string(appendRecordJSON(nil, r))
	want := `{"topic":"t","partition":2,"offset":7,"timestamp":"2026-05-01T11:00:00.123Z","key":"k<&>","value_b64":"/wBh","headers":[{"key":"h","value":"v\n"},{"key":"n","value":null}]}`
	if line != want {
		t.Fatalf("got  %s\nwant %s", line, want)
	}
	var decoded map[string]any
	if err := json.Unmarshal([]byte(line), &decoded); err != nil {
		t.Fatal(err)
	}
	null := string(appendRecordJSON(nil, &client.Record{Topic: "t"}))
	if !strings.Contains(null, `"key":null,"value":null,"headers":[]`) {
		t.Fatalf("null key and value: %s", null)
	}
}

func TestRecordFormats(t *testing.T) {
	r := &client.Record{Key: []byte("k"), Value: []byte("v")}
	for _, tc := range []struct{ format, sep, want string }{
		{"value", "=", "v\n"},
		{"kv", "=", "k=v\n"},
		{"kv", " -> ", "k -> v\n"},
	} {
		f, err := newRecordFormat(tc.format, tc.sep, "\n")
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		f(w, r)
		w.Flush()
		if buf.String() != tc.want {
			t.Errorf("%s %q: %q, want %q", tc.format, tc.sep, buf.String(), tc.want)
		}
	}
	if _, err := newRecordFormat("yaml", "=", "\n"); err == nil {
		t.Error("format yaml accepted")
	}
}

func TestParseKeyValues(t *testing.T) {
	got, err := parseKeyValues("--config", []string{"retention.ms=7d,segment.bytes=1GiB", "flush.policy = never"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"retention.ms": "7d", "segment.bytes": "1GiB", "flush.policy": "never"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// A list value keeps its commas, bare or in Kafka's brackets.
	for _, in := range [][]string{{"cleanup.policy=compact,delete,segment.ms=1h"}, {"cleanup.policy=[compact, delete]", "segment.ms=1h"}} {
		got, err := parseKeyValues("--config", in)
		if err != nil || len(got) != 2 || got["cleanup.policy"] != "compact,delete" || got["segment.ms"] != "1h" {
			t.Errorf("%q: %v, %v", in, got, err)
		}
	}
	for _, bad := range [][]string{{"retention.ms"}, {"=1"}, {"a=1", "a=2"}, {"compact,cleanup.policy=delete"}} {
		if _, err := parseKeyValues("--config", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestExplain(t *testing.T) {
	notFound := &client.Error{Code: codes.NotFound, Reason: "TOPIC_NOT_FOUND", Message: `broker: topic "x" not found`}
	wrapped := fmt.Errorf("strata: describe topic \"x\": %w", notFound)
	if got := explain(wrapped).Error(); got != `topic "x" not found (TOPIC_NOT_FOUND)` {
		t.Errorf("explain = %q", got)
	}
	deadline := errors.Join(context.DeadlineExceeded, notFound)
	if got := explain(deadline).Error(); !strings.HasPrefix(got, "timed out") || !strings.Contains(got, "TOPIC_NOT_FOUND") {
		t.Errorf("explain(deadline) = %q", got)
	}
	if got := explain(errors.New("strata: config: bad")).Error(); got != "bad" {
		t.Errorf("explain(plain) = %q", got)
	}
	if explain(nil) != nil {
		t.Error("explain(nil) != nil")
	}
}

func TestLatencies(t *testing.T) {
	l := newLatencies()
	if s := l.summary(); s.Count != 0 || s.Max != 0 {
		t.Fatalf("empty: %+v", s)
	}
	for i := 1; i <= 1000; i++ {
		l.record(time.Duration(i) * 1234 * time.Microsecond)
	}
	s := l.summary()
	if !(s.P50 <= s.P99 && s.P99 <= s.P999 && s.P999 <= s.Max) || s.Count != 1000 {
		t.Fatalf("unordered: %+v", s)
	}
	if s.Max != 1234.0 || s.P50 < 616 || s.P50 > 618 {
		t.Fatalf("summary %+v: want max 1234 ms, p50 about 617 ms", s)
	}
}

func TestPayloadsDiffer(t *testing.T) {
	p := newPayloads(1024)
	a, b := p.next(1024), p.next(1024)
	if len(a) != 1024 || bytes.Equal(a, b) || bytes.Count(a, []byte{0}) > 0 {
		t.Fatalf("payloads not distinct letters: %q / %q", a[:16], b[:16])
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 64 << 20: "64.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := human.Bytes(n); got != want {
			t.Errorf("human.Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
