package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/config"
)

// fromHelp describes what --from accepts, for flag help and errors.
const fromHelp = "earliest, latest, an offset (42), an RFC 3339 time (2024-05-01T12:00:00Z) or a duration ago (15m, 2h30m, 1d)"

// startPosition is a parsed --from value.
type startPosition struct {
	spec client.OffsetSpec
	// offset is set when the value is an exact offset, which needs
	// clamping to each partition's range when several are read.
	offset   int64
	isOffset bool
}

// parseFrom reads --from: earliest, latest, an offset, an RFC 3339 time or
// a duration before now (Go syntax plus days: "15m", "2h30m", "1d").
// A plain number is an offset, never a duration.
func parseFrom(s string, now time.Time) (startPosition, error) {
	v := strings.TrimSpace(s)
	switch strings.ToLower(v) {
	case "earliest", "beginning", "start":
		return startPosition{spec: client.Earliest()}, nil
	case "latest", "end", "now":
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
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return startPosition{spec: client.AtTime(t)}, nil
	}
	if d, err := config.ParseDuration(v); err == nil {
		return startPosition{spec: client.AtTime(now.Add(-d))}, nil
	}
	return startPosition{}, usageErrorf("--from %q: want %s", s, fromHelp)
}
