package config

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// checkParseError asserts err is an *Error about value that matches
// ErrInvalid and whose message names the value and what is allowed.
func checkParseError(t *testing.T, err error, value, wantReason string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *Error", err, err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("error %v does not match ErrInvalid", err)
	}
	if e.Value != value {
		t.Errorf("Value = %q, want %q", e.Value, value)
	}
	if e.Allowed == "" {
		t.Errorf("Allowed is empty in %v", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "config: ") || !strings.Contains(msg, strconv.Quote(value)) || !strings.Contains(msg, e.Allowed) {
		t.Errorf("message %q must start with config: and name the value and %q", msg, e.Allowed)
	}
	if !strings.Contains(e.Reason, wantReason) {
		t.Errorf("Reason = %q, want it to contain %q", e.Reason, wantReason)
	}
}

func TestParseDuration(t *testing.T) {
	valid := []struct {
		in   string
		want time.Duration
	}{
		{"30m", 30 * time.Minute},
		{"6h", 6 * time.Hour},
		{"500ms", 500 * time.Millisecond},
		{"1h30m", 90 * time.Minute},
		{"90d", 90 * 24 * time.Hour},
		{"2w", 14 * 24 * time.Hour},
		{"1d12h", 36 * time.Hour},
		{"1.5h", 90 * time.Minute},
		{"0.5d", 12 * time.Hour},
		{".5s", 500 * time.Millisecond},
		{"1us", time.Microsecond},
		{"1µs", time.Microsecond},
		{"1μs", time.Microsecond},
		{"7ns", 7},
		{"1h1h", 2 * time.Hour},
		{"500", 500 * time.Millisecond}, // a plain number is milliseconds
		{"0", 0},
		{"0s", 0},
		{" 7d ", 7 * 24 * time.Hour},
		{"106751d23h47m16s854ms775us807ns", math.MaxInt64},
		{"9223372036854", 9223372036854 * time.Millisecond},
	}
	for _, tc := range valid {
		got, err := ParseDuration(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	invalid := []struct{ in, reason string }{
		{"", "empty"},
		{"   ", "empty"},
		{"abc", ""},
		{"-5m", "negative"},
		{"-1", "negative"},
		{"+5m", ""},
		{"5x", `unknown unit "x"`},
		{"1D", `unknown unit "D"`},
		{"1h 30m", `unknown unit "h "`},
		{"1.5", "missing unit"},
		{"1h30", "missing unit"},
		{"1..5h", "malformed number"},
		{".h", "malformed number"},
		{"106752d", "too large"},
		{"106751d23h47m16s854ms775us808ns", "too large"},
		{"9223372036855", "too large"},
		{"99999999999999999999", "too large"},
		{"99999999999999999999h", "too large"},
	}
	for _, tc := range invalid {
		t.Run(tc.in, func(t *testing.T) {
			_, err := ParseDuration(tc.in)
			checkParseError(t, err, tc.in, tc.reason)
		})
	}
}

func TestParseMillis(t *testing.T) {
	valid := []struct {
		in   string
		want int64
	}{
		{"-1", Unbounded},
		{" -1 ", Unbounded},
		{"7d", 604800000},
		{"604800000", 604800000},
		{"1ms", 1},
		{"1.5s", 1500},
		{"0", 0},
		{"9223372036854775807", math.MaxInt64}, // Kafka's Long.MAX_VALUE
	}
	for _, tc := range valid {
		got, err := ParseMillis(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseMillis(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	invalid := []struct{ in, reason string }{
		{"-2", "negative"},
		{"-1ms", "negative"},
		{"1500us", "finer than a millisecond"},
		{"abc", ""},
		{"9223372036854775808", "too large"},
		{"", "empty"},
	}
	for _, tc := range invalid {
		t.Run(tc.in, func(t *testing.T) {
			_, err := ParseMillis(tc.in)
			checkParseError(t, err, tc.in, tc.reason)
			if !strings.Contains(err.Error(), "-1 for unbounded") {
				t.Errorf("%v: should mention -1", err)
			}
		})
	}
}

func TestParseBytes(t *testing.T) {
	valid := []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"1024", 1024},
		{"-1", Unbounded},
		{"1B", 1},
		{"1KiB", 1024},
		{"1kib", 1024},
		{"1KIB", 1024},
		{"512 MiB", 512 << 20},
		{"512\tMiB", 512 << 20},
		{"4GiB", 4 << 30},
		{"2TiB", 2 << 40},
		{"64KB", 64000},
		{"1mb", 1000000},
		{"1GB", 1000000000},
		{"1TB", 1000000000000},
		{"1.5KiB", 1536},
		{"0.5MiB", 512 << 10},
		{"1.000KB", 1000},
		{".5KiB", 512},
		{" 128MiB ", 128 << 20},
		{"9223372036854775807", math.MaxInt64},
		{"8388607TiB", 8388607 << 40},
	}
	for _, tc := range valid {
		got, err := ParseBytes(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseBytes(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	invalid := []struct{ in, reason string }{
		{"", ""},
		{"abc", ""},
		{"MiB", ""},
		{"-2", "negative"},
		{"-1KiB", "negative"},
		{"1.5", "not a whole number of bytes"},
		{"0.1B", "not a whole number of bytes"},
		{"1 XB", `unknown unit "XB"`},
		{"1K", `unknown unit "K"`},
		{"1..5MiB", "malformed number"},
		{"9223372036854775808", "too large"},
		{"8388608TiB", "too large"},
		{"99999999999999999999", "too large"},
		{"1.00000000000000000001KiB", "too many decimal places"},
	}
	for _, tc := range invalid {
		t.Run(tc.in, func(t *testing.T) {
			_, err := ParseBytes(tc.in)
			checkParseError(t, err, tc.in, tc.reason)
		})
	}
}

func TestFormat(t *testing.T) {
	millis := []struct {
		in   int64
		want string
	}{
		{604800000, "7d"},
		{5400000, "1h30m"},
		{129600000, "1d12h"},
		{100, "100ms"},
		{1001, "1s1ms"},
		{0, "0s"},
		{Unbounded, "-1"},
		{math.MaxInt64, "9223372036854775807"},
	}
	for _, tc := range millis {
		if got := FormatMillis(tc.in); got != tc.want {
			t.Errorf("FormatMillis(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
	sizes := []struct {
		in   int64
		want string
	}{
		{134217728, "128MiB"},
		{1048588, "1048588"},
		{4 << 30, "4GiB"},
		{1 << 40, "1TiB"},
		{3 << 10, "3KiB"},
		{1000, "1000"},
		{0, "0"},
		{Unbounded, "-1"},
	}
	for _, tc := range sizes {
		if got := FormatBytes(tc.in); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
	durations := []struct {
		in   time.Duration
		want string
	}{
		{1500 * time.Microsecond, "1ms500us"},
		{-90 * time.Minute, "-1h30m"},
		{math.MinInt64, "-106751d23h47m16s854ms775us808ns"},
	}
	for _, tc := range durations {
		if got := FormatDuration(tc.in); got != tc.want {
			t.Errorf("FormatDuration(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseBool(t *testing.T) {
	for in, want := range map[string]bool{"true": true, "TRUE": true, "True": true, " false ": false, "FALSE": false} {
		if got, err := parseBool(in); err != nil || got != want {
			t.Errorf("parseBool(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "yes", "no", "1", "0", "on", "off", "t"} {
		_, err := parseBool(in)
		checkParseError(t, err, in, "")
	}
}

func TestParseInt(t *testing.T) {
	if n, err := parseInt(" 42 ", 32); err != nil || n != 42 {
		t.Errorf("parseInt = %d, %v", n, err)
	}
	_, err := parseInt("2147483648", 32)
	checkParseError(t, err, "2147483648", "out of range")
	_, err = parseInt("4.5", 32)
	checkParseError(t, err, "4.5", "")
}

func TestErrorFormat(t *testing.T) {
	cases := []struct {
		err  *Error
		want string
	}{
		{&Error{Key: "retention.ms", Value: "abc", Allowed: "a duration"},
			`config: invalid value "abc" for retention.ms: want a duration`},
		{&Error{Key: "local.retention.ms", Value: "2d", Reason: "must not exceed retention.ms (1d)", Allowed: "x"},
			`config: invalid value "2d" for local.retention.ms: must not exceed retention.ms (1d); want x`},
		{&Error{Key: "node_id", Value: "abc", Allowed: "an integer", Source: "STRATA_NODE_ID"},
			`config: invalid value "abc" for node_id (from STRATA_NODE_ID): want an integer`},
		{&Error{Value: "abc", Allowed: "a size"},
			`config: invalid value "abc": want a size`},
		{unknownKey("retention.msx", []string{"retention.ms", "retention.bytes"}),
			`config: unknown key "retention.msx": want one of retention.ms, retention.bytes`},
	}
	for _, tc := range cases {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
	if errors.Is(cases[0].err, ErrUnknownKey) {
		t.Error("an invalid value must not match ErrUnknownKey")
	}
	if !errors.Is(cases[4].err, ErrUnknownKey) || !errors.Is(cases[4].err, ErrInvalid) {
		t.Error("an unknown key must match ErrUnknownKey and ErrInvalid")
	}
}
