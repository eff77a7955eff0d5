package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter lets hashicorp/raft, which logs through hclog, log through
// the broker's slog.Logger. Raft is chatty at info level (every election,
// every snapshot, every connection), so the adapter has its own threshold,
// warn unless configured, on top of whatever the slog handler filters.
type hclogAdapter struct {
	logger *slog.Logger
	name   string
	// level is shared by a logger and everything derived from it with With
	// and Named, as hclog's own loggers share theirs.
	level   *atomic.Int32 // an hclog.Level
	implied []any
}

var _ hclog.Logger = (*hclogAdapter)(nil)

// newHclogAdapter returns an hclog.Logger that writes to logger at level and
// above.
func newHclogAdapter(logger *slog.Logger, name string, level slog.Level) *hclogAdapter {
	a := &hclogAdapter{logger: logger, name: name, level: new(atomic.Int32)}
	a.level.Store(int32(hclogLevel(level)))
	return a
}

// slogLevel maps an hclog level to slog's. Trace sits below Debug.
func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// hclogLevel maps a slog level to the nearest hclog level at or below it.
func hclogLevel(l slog.Level) hclog.Level {
	switch {
	case l >= slog.LevelError:
		return hclog.Error
	case l >= slog.LevelWarn:
		return hclog.Warn
	case l >= slog.LevelInfo:
		return hclog.Info
	case l >= slog.LevelDebug:
		return hclog.Debug
	}
	return hclog.Trace
}

func (a *hclogAdapter) enabled(l hclog.Level) bool {
	threshold := hclog.Level(a.level.Load())
	return l != hclog.Off && threshold != hclog.Off && l >= threshold
}

// Log writes one record. hclog arguments are alternating keys and values,
// which slog takes as they are.
func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	level = expectedLevel(level, msg, args)
	if !a.enabled(level) {
		return
	}
	sl := slogLevel(level)
	ctx := context.Background()
	if !a.logger.Enabled(ctx, sl) {
		return
	}
	attrs := make([]any, 0, 2+len(a.implied)+len(args))
	if a.name != "" {
		attrs = append(attrs, "component", a.name)
	}
	attrs = append(attrs, a.implied...)
	attrs = append(attrs, args...)
	a.logger.Log(ctx, sl, msg, attrs...)
}

// expectedLevel lowers to info raft's warning that it starts an election
// when no leader was ever known: every broker starting, a single one
// above all, goes through it, and nothing is wrong. With a leader known
// before, the timeout means it was lost, and stays a warning.
func expectedLevel(level hclog.Level, msg string, args []any) hclog.Level {
	if level != hclog.Warn || msg != "heartbeat timeout reached, starting election" {
		return level
	}
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == "last-leader-addr" && fmt.Sprint(args[i+1]) != "" {
			return level
		}
	}
	return hclog.Info
}

// Trace logs at trace level.
func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }

// Debug logs at debug level.
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }

// Info logs at info level.
func (a *hclogAdapter) Info(msg string, args ...any) { a.Log(hclog.Info, msg, args...) }

// Warn logs at warn level.
func (a *hclogAdapter) Warn(msg string, args ...any) { a.Log(hclog.Warn, msg, args...) }

// Error logs at error level.
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

// IsTrace reports whether trace records are written.
func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }

// IsDebug reports whether debug records are written.
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }

// IsInfo reports whether info records are written.
func (a *hclogAdapter) IsInfo() bool { return a.enabled(hclog.Info) }

// IsWarn reports whether warn records are written.
func (a *hclogAdapter) IsWarn() bool { return a.enabled(hclog.Warn) }

// IsError reports whether error records are written.
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

// ImpliedArgs returns the arguments added by With.
func (a *hclogAdapter) ImpliedArgs() []any { return a.implied }

// With returns a logger that adds args to every record.
func (a *hclogAdapter) With(args ...any) hclog.Logger {
	b := *a
	b.implied = append(append([]any(nil), a.implied...), args...)
	return &b
}

// Name returns the logger's name.
func (a *hclogAdapter) Name() string { return a.name }

// Named returns a logger whose name has name appended ("raft.net").
func (a *hclogAdapter) Named(name string) hclog.Logger {
	b := *a
	if b.name != "" {
		b.name += "." + name
	} else {
		b.name = name
	}
	return &b
}

// ResetNamed returns a logger named name.
func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	b := *a
	b.name = name
	return &b
}

// SetLevel changes the threshold of this logger and those derived from it.
func (a *hclogAdapter) SetLevel(level hclog.Level) { a.level.Store(int32(level)) }

// GetLevel returns the threshold.
func (a *hclogAdapter) GetLevel() hclog.Level { return hclog.Level(a.level.Load()) }

// StandardLogger returns a *log.Logger that writes through this logger.
func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

// StandardWriter returns a writer that logs each write as one record, at
// opts.ForceLevel or else at the level its "[WARN]"-style prefix names
// (info when it names none).
func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	w := &stdWriter{a: a, level: hclog.NoLevel}
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		w.level = opts.ForceLevel
	}
	return w
}

// stdWriter is the io.Writer behind StandardLogger.
type stdWriter struct {
	a     *hclogAdapter
	level hclog.Level
}

func (w *stdWriter) Write(p []byte) (int, error) {
	msg := string(bytes.TrimRight(p, " \t\n"))
	level := w.level
	if level == hclog.NoLevel {
		level = hclog.Info
		for _, pl := range []struct {
			prefix string
			level  hclog.Level
		}{{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info}, {"[WARN]", hclog.Warn}, {"[ERR]", hclog.Error}, {"[ERROR]", hclog.Error}} {
			if rest, ok := strings.CutPrefix(msg, pl.prefix); ok {
				level, msg = pl.level, strings.TrimSpace(rest)
				break
			}
		}
	}
	w.a.Log(level, msg)
	return len(p), nil
}
