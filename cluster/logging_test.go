package cluster

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHclogAdapter(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug - 4}))
	a := newHclogAdapter(logger, "raft", slog.LevelWarn)

	a.Info("chatty", "k", 1)
	a.Debug("chattier")
	if buf.Len() != 0 {
		t.Fatalf("below-threshold records written: %s", buf.String())
	}
	if a.IsInfo() || !a.IsWarn() || !a.IsError() {
		t.Fatal("Is* do not follow the threshold")
	}
	a.Warn("heartbeat timeout", "peer", "2")
	out := buf.String()
	for _, want := range []string{"level=WARN", `msg="heartbeat timeout"`, "component=raft", "peer=2"} {
		if !strings.Contains(out, want) {
			t.Fatalf("record %q lacks %q", out, want)
		}
	}

	buf.Reset()
	named := a.Named("net").With("node", 3)
	named.Error("dial failed")
	if out := buf.String(); !strings.Contains(out, "component=raft.net") || !strings.Contains(out, "node=3") || !strings.Contains(out, "level=ERROR") {
		t.Fatalf("named record: %q", out)
	}
	if named.Name() != "raft.net" || a.ResetNamed("x").Name() != "x" {
		t.Fatal("names")
	}

	// The level is shared with derived loggers, as in hclog.
	buf.Reset()
	a.SetLevel(hclog.Trace)
	named.Trace("fine detail")
	if !strings.Contains(buf.String(), "level=DEBUG-4") || a.GetLevel() != hclog.Trace {
		t.Fatalf("trace record: %q", buf.String())
	}
	a.SetLevel(hclog.Off)
	buf.Reset()
	a.Error("silenced")
	if buf.Len() != 0 {
		t.Fatal("Off did not silence")
	}

	// The standard library bridge infers levels from prefixes.
	a.SetLevel(hclog.Warn)
	buf.Reset()
	std := a.StandardLogger(nil)
	std.Print("[INFO] dropped")
	std.Print("[WARN] kept")
	if out := buf.String(); strings.Contains(out, "dropped") || !strings.Contains(out, "msg=kept") {
		t.Fatalf("standard logger: %q", out)
	}
	buf.Reset()
	w := a.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Error})
	w.Write([]byte("forced\n"))
	if out := buf.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "msg=forced") {
		t.Fatalf("forced level: %q", out)
	}
}

// TestHclogAdapterRespectsHandler: the slog handler's own level still
// applies.
func TestHclogAdapterRespectsHandler(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError}))
	a := newHclogAdapter(logger, "raft", slog.LevelDebug)
	a.Warn("below the handler")
	if buf.Len() != 0 {
		t.Fatalf("written: %s", buf.String())
	}
}

// TestFirstElectionIsNotAWarning: raft's election timeout is a warning
// only when a leader was known before; at start, with none ever known,
// it is info, so that a broker starting alone logs no warning.
func TestFirstElectionIsNotAWarning(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := newHclogAdapter(logger, "raft", slog.LevelWarn)
	const msg = "heartbeat timeout reached, starting election"
	a.Warn(msg, "last-leader-addr", "", "last-leader-id", "")
	if buf.Len() != 0 {
		t.Fatalf("the first election was logged at warn: %s", buf.String())
	}
	a.Warn(msg, "last-leader-addr", "127.0.0.1:7401", "last-leader-id", "2")
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "last-leader-id=2") {
		t.Fatalf("losing a known leader is not a warning: %q", out)
	}
	buf.Reset()
	a.Warn("something else", "last-leader-addr", "")
	if !strings.Contains(buf.String(), "level=WARN") {
		t.Fatalf("another warning was lowered: %q", buf.String())
	}
}
