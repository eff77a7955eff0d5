package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/config"
)

// fromHelp describes what --from accepts, for flag help and errors.
const fromHelp = "earliest (or oldest, beginning), latest (or newest, end), an offset (42), an RFC 3339 time (2024-05-01T12:00:00Z; a date 2024-05-01 or a date-time without a zone is read as UTC), " +
	"epoch milliseconds after @ or s@ (@1714564800000) or a duration ago (15m, 2h30m, 1d)"

// startHelp is fromHelp with the offsets counted back from the end that
// consume, replay and bench consume take.
const startHelp = fromHelp + "; -N starts N records before each partition's end"

// zonelessLayouts are the times --from reads without a zone, as UTC.
var zonelessLayouts = []string{
	"2006-01-02",
	"2006-01-02T15:04",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04",
	"2006-01-02 15:04:05.999999999",
}

// startPosition is a parsed --from value.
type startPosition struct {
	spec client.OffsetSpec
	// offset is set when the value is an exact offset, which needs
	// clamping to each partition's range when several are read.
	offset   int64
	isOffset bool
	// at is the time asked for when the value is a time (or a duration
	// ago), else zero.
	at time.Time
	// back is N of -N: start N records before each partition's high
	// watermark (at its log start when it holds fewer); spec is then
	// Latest(), what each partition's position is resolved from.
	back int64
}

// parseStart reads the --from of consume, replay and bench consume: what
// parseFrom reads, and -N for N records before each partition's end (as
// kcat's -o -N).
func parseStart(s string, now time.Time) (startPosition, error) {
	v := strings.TrimSpace(s)
	if strings.HasPrefix(v, "-") {
		if n, err := strconv.ParseInt(v[1:], 10, 64); err == nil && n > 0 && v[1] != '+' && v[1] != '-' {
			return startPosition{spec: client.Latest(), back: n}, nil
		}
		return startPosition{}, usageErrorf("--from %q: want %s", s, startHelp)
	}
	return parseFrom(s, now)
}

// parseFrom reads --from: earliest (oldest, beginning), latest (newest,
// end), an offset, an RFC 3339 time, a date or a date-time without a zone
// (UTC), epoch milliseconds after "@" (or kcat's "s@"),
// or a duration before now (Go syntax plus days: "15m", "2h30m", "1d").
// A plain number is an offset, never a duration or a time.
func parseFrom(s string, now time.Time) (startPosition, error) {
	v := strings.TrimSpace(s)
	switch strings.ToLower(v) {
	case "earliest", "oldest", "beginning", "start":
		return startPosition{spec: client.Earliest()}, nil
	case "latest", "newest", "end", "now":
		return startPosition{spec: client.Latest()}, nil
	case "":
		return startPosition{}, usageErrorf("--from is empty: want %s", fromHelp)
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return startPosition{}, usageErrorf("--from %q: an offset cannot be negative; want %s", s, fromHelp)
		}
		return startPosition{spec: client.AtOffset(n), offset: n, isOffset: true}, nil
	}
	if ms, ok := strings.CutPrefix(v, "s@"); ok { // kcat's spelling
		v = "@" + ms
	}
	if strings.HasPrefix(v, "@") {
		t, err := parseTime(v)
		if err != nil {
			return startPosition{}, usageErrorf("--from %q: after @ or s@ come epoch milliseconds (@1714564800000); want %s", s, fromHelp)
		}
		return startPosition{spec: client.AtTime(t), at: t}, nil
	}
	if t, err := parseTime(v); err == nil {
		return startPosition{spec: client.AtTime(t), at: t}, nil
	}
	if d, err := config.ParseDuration(v); err == nil {
		t := now.Add(-d)
		return startPosition{spec: client.AtTime(t), at: t}, nil
	}
	return startPosition{}, usageErrorf("--from %q: want %s", s, fromHelp)
}

// timeHelp describes the times parseTime reads.
const timeHelp = "an RFC 3339 time (2024-05-01T12:00:00Z), a date (2024-05-01) or a date-time without a zone (read as UTC), or epoch milliseconds after @ (@1714564800000)"

// parseTime reads a point in time: RFC 3339, a date or a date-time without
// a zone (UTC), or epoch milliseconds after "@".
func parseTime(v string) (time.Time, error) {
	if ms, ok := strings.CutPrefix(v, "@"); ok {
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil || n < 0 {
			return time.Time{}, fmt.Errorf("%q: want epoch milliseconds after @", v)
		}
		return time.UnixMilli(n), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	for _, layout := range zonelessLayouts {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want %s", v, timeHelp)
}
