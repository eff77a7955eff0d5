package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestRecordTimeFromAJSONField(t *testing.T) {
	for _, tc := range []struct {
		line  string
		field string
		want  time.Time
	}{
		{`{"ts":"2024-05-01T12:00:00Z","v":1}`, "ts", time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)},
		{`{"ts":"2024-05-01"}`, "ts", time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)},
		{`{"ts":1714564800000}`, "ts", time.UnixMilli(1714564800000)},
		{`{"meta":{"at":"@1714564800000"}}`, "meta.at", time.UnixMilli(1714564800000)},
	} {
		got, err := jsonFieldTime([]byte(tc.line), tc.field)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("jsonFieldTime(%s, %s) = %v, %v; want %v", tc.line, tc.field, got, err, tc.want)
		}
	}
	for _, bad := range []struct{ line, field string }{
		{`not json`, "ts"}, {`{"v":1}`, "ts"}, {`{"ts":true}`, "ts"}, {`{"ts":"yesterday"}`, "ts"},
		{`{"ts":-5}`, "ts"}, {`{"meta":"x"}`, "meta.at"}, {`[1,2]`, "ts"},
		{`{"ts":"1969-12-31T23:59:59Z"}`, "ts"}, {`{"ts":"1066-10-14"}`, "ts"},
	} {
		if _, err := jsonFieldTime([]byte(bad.line), bad.field); err == nil {
			t.Errorf("jsonFieldTime(%s, %s) accepted", bad.line, bad.field)
		}
	}
}

// runWithInput runs the command line in this process with stdin.
func runWithInput(t testing.TB, in string, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCommand()
	var out, errOut bytes.Buffer
	root.SetIn(strings.NewReader(in))
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

func TestProduceWithTheRecordsOwnTimes(t *testing.T) {
	addr := startACLBroker(t)
	mustStrataCmd(t, "topic", "create", "history", "--broker", addr)
	in := `{"at":"2024-05-01T10:00:00Z","n":1}` + "\n" + `{"at":"2024-05-02","n":2}` + "\n"
	if _, errOut, err := runWithInput(t, in, "produce", "history", "--broker", addr, "--timestamp-field", "at"); err != nil {
		t.Fatalf("produce --timestamp-field: %v\n%s", err, errOut)
	}
	if _, errOut, err := runWithInput(t, "fixed\n", "produce", "history", "--broker", addr, "--timestamp", "2024-05-03T00:00:00Z"); err != nil {
		t.Fatalf("produce --timestamp: %v\n%s", err, errOut)
	}
	out := mustStrataCmd(t, "consume", "history", "--broker", addr, "--from", "earliest", "--format", "json")
	for _, want := range []string{`"timestamp":"2024-05-01T10:00:00.000Z"`, `"timestamp":"2024-05-02T00:00:00.000Z"`, `"timestamp":"2024-05-03T00:00:00.000Z"`} {
		if !strings.Contains(out, want) {
			t.Errorf("consume printed\n%s\nwithout %s", out, want)
		}
	}
	// A time range read back: --from a date finds the second record on.
	out = mustStrataCmd(t, "consume", "history", "--broker", addr, "--from", "2024-05-02", "--format", "json")
	if strings.Contains(out, "2024-05-01T10") || !strings.Contains(out, "2024-05-02T00") {
		t.Errorf("consume --from 2024-05-02 printed\n%s", out)
	}
	// Bad input names the line and changes nothing more.
	_, _, err := runWithInput(t, `{"n":3}`+"\n", "produce", "history", "--broker", addr, "--timestamp-field", "at")
	if err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a line without the field: %v, want an error naming line 1", err)
	}
	if _, _, err := runWithInput(t, "x\n", "produce", "history", "--broker", addr, "--timestamp", "soon"); err == nil {
		t.Error("--timestamp soon accepted")
	}
	if _, _, err := runWithInput(t, "x\n", "produce", "history", "--broker", addr, "--timestamp", "@1", "--timestamp-field", "at"); err == nil {
		t.Error("--timestamp with --timestamp-field accepted")
	}
	// Times the broker refuses: before 1970, said before anything is
	// sent; further ahead than message.timestamp.after.max.ms (an hour),
	// the broker's INVALID_TIMESTAMP.
	if _, _, err := runWithInput(t, "x\n", "produce", "history", "--broker", addr, "--timestamp", "1960-01-01"); err == nil || !strings.Contains(err.Error(), "before 1970") {
		t.Errorf("--timestamp 1960-01-01: %v, want an error saying it is before 1970", err)
	}
	if _, _, err := runWithInput(t, "x\n", "produce", "history", "--broker", addr, "--timestamp", "3000-01-01"); err == nil || !strings.Contains(err.Error(), "INVALID_TIMESTAMP") {
		t.Errorf("--timestamp 3000-01-01: %v, want INVALID_TIMESTAMP", err)
	}
	out = mustStrataCmd(t, "consume", "history", "--broker", addr, "--from", "earliest", "--format", "json")
	if n := strings.Count(out, `"timestamp"`); n != 3 {
		t.Errorf("history holds %d records after the refused ones, want 3:\n%s", n, out)
	}
}
