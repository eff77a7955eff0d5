package gossip

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
)

// logWriter turns memberlist's log lines into slog records. memberlist only
// takes a *log.Logger and writes lines such as
//
//	[WARN] memberlist: Refuting a suspect message (from: broker-2)
//
// so the level is parsed back out of the line instead of logging everything
// at one level: memberlist's DEBUG lines (every stream connection) would
// otherwise drown the warnings that matter.
type logWriter struct {
	logger *slog.Logger
}

// Write logs each line of p. A *log.Logger calls it once per message, but a
// message may span lines; each becomes its own record. It never fails, so
// memberlist never sees a logging error.
func (w logWriter) Write(p []byte) (int, error) {
	for line := range bytes.Lines(p) {
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			continue
		}
		level, msg := parseLogLine(string(line))
		w.logger.Log(context.Background(), level, msg)
	}
	return len(p), nil
}

// parseLogLine splits "[LEVEL] memberlist: text" into a slog level and text.
// A line without a known level tag is logged whole at info, so nothing is lost
// if memberlist changes its format.
func parseLogLine(line string) (slog.Level, string) {
	rest, ok := strings.CutPrefix(line, "[")
	if !ok {
		return slog.LevelInfo, line
	}
	tag, msg, ok := strings.Cut(rest, "] ")
	if !ok {
		return slog.LevelInfo, line
	}
	var level slog.Level
	switch tag {
	case "TRACE", "DEBUG":
		level = slog.LevelDebug
	case "INFO":
		level = slog.LevelInfo
	case "WARN", "WARNING":
		level = slog.LevelWarn
	case "ERR", "ERROR":
		level = slog.LevelError
	default:
		return slog.LevelInfo, line
	}
	msg, _ = strings.CutPrefix(msg, "memberlist: ")
	return level, msg
}
