package gossip

import (
	"context"
	"log"
	"log/slog"
	"sync"
	"testing"
)

func TestParseLogLine(t *testing.T) {
	cases := []struct {
		line  string
		level slog.Level
		msg   string
	}{
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:1", slog.LevelDebug, "Stream connection from=127.0.0.1:1"},
		{"[INFO] memberlist: Suspect broker-2 has failed", slog.LevelInfo, "Suspect broker-2 has failed"},
		{"[WARN] memberlist: Refuting a suspect message", slog.LevelWarn, "Refuting a suspect message"},
		{"[ERR] memberlist: Failed to receive", slog.LevelError, "Failed to receive"},
		{"[ERR] Failed to shutdown transport: x", slog.LevelError, "Failed to shutdown transport: x"},
		{"[TRACE] memberlist: x", slog.LevelDebug, "x"},
		{"no tag at all", slog.LevelInfo, "no tag at all"},
		{"[NOTICE] memberlist: x", slog.LevelInfo, "[NOTICE] memberlist: x"},
		{"[WARN]no space", slog.LevelInfo, "[WARN]no space"},
	}
	for _, c := range cases {
		level, msg := parseLogLine(c.line)
		if level != c.level || msg != c.msg {
			t.Errorf("parseLogLine(%q) = %v, %q; want %v, %q", c.line, level, msg, c.level, c.msg)
		}
	}
}

// captureHandler keeps every record it is given.
type captureHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *captureHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *captureHandler) WithGroup(string) slog.Handler      { return h }

func (h *captureHandler) find(level slog.Level, msg string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records {
		if r.Level == level && r.Message == msg {
			return true
		}
	}
	return false
}

func TestLogWriterThroughStdLogger(t *testing.T) {
	h := &captureHandler{}
	l := log.New(logWriter{logger: slog.New(h)}, "", 0)
	l.Printf("[WARN] memberlist: one")
	l.Printf("[DEBUG] memberlist: two\n[ERR] memberlist: three")
	for _, want := range []struct {
		level slog.Level
		msg   string
	}{{slog.LevelWarn, "one"}, {slog.LevelDebug, "two"}, {slog.LevelError, "three"}} {
		if !h.find(want.level, want.msg) {
			t.Errorf("no %v record %q in %d records", want.level, want.msg, len(h.records))
		}
	}
}

// memberlist's own lines reach the slog logger at their level.
func TestMemberlistLogsReachSlog(t *testing.T) {
	h := &captureHandler{}
	cfg := testConfig(t, 1)
	cfg.Logger = slog.New(h)
	g, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	// memberlist logs the port it picked for port 0 at DEBUG.
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records {
		if r.Level == slog.LevelDebug && len(r.Message) > 23 && r.Message[:23] == "Using dynamic bind port" {
			return
		}
	}
	t.Fatalf("no debug record from memberlist among %d records", len(h.records))
}
