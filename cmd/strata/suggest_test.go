package main

import (
	"strings"
	"testing"
)

// TestSuggestions: a mistyped command or flag is refused in one line that
// suggests the near one, before any broker is contacted.
func TestSuggestions(t *testing.T) {
	nowhere := "127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"topc"}, `unknown command "topc" for "strata"; did you mean "topic"? (see strata --help)`},
		{[]string{"topic", "lsit"}, `unknown command "lsit" for "strata topic"; did you mean "list"? (see strata topic --help)`},
		{[]string{"group", "decsribe", "g"}, `unknown command "decsribe" for "strata group"; did you mean "describe"?`},
		{[]string{"cluster", "stauts"}, `did you mean "status"?`},
		{[]string{"topic", "list", "--fromat", "json"}, "unknown flag: --fromat; did you mean --format? (see strata topic list --help)"},
		{[]string{"topic", "create", "t", "--partitons", "3"}, "unknown flag: --partitons; did you mean --partitions?"},
		{[]string{"topic", "list", "--brokr", "x"}, "unknown flag: --brokr; did you mean --broker?"},
		{[]string{"topic", "list", "--zzzzzz"}, "unknown flag: --zzzzzz (see strata topic list --help)"},
	} {
		args := tc.args
		if len(args) > 1 {
			args = append(args, "--broker", nowhere)
		}
		out, err := strataCmd(t, args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") || out != "" {
			t.Errorf("strata %s: %v (printed %q); want one line with %q", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}
	// strata bucket keeps its exit status 2 for usage errors.
	if _, stderr, code := bucketCmd(t, "bucket", "ls", "--confg", "x.yaml"); code != exitUsage || !strings.Contains(stderr, "did you mean --config?") {
		t.Errorf("bucket ls --confg: status %d, %q", code, stderr)
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"list", "list", 0}, {"lsit", "list", 1}, {"fromat", "format", 1}, {"partitons", "partitions", 1}, {"", "ab", 2}, {"abc", "xyz", 3}} {
		if d := editDistance(tc.a, tc.b); d != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, d, tc.d)
		}
	}
}
