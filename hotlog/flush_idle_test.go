package hotlog

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestIdleLogsRunNoGoroutine: a broker holds thousands of logs, most of
// them idle, so an idle log runs no flusher goroutine. 50 logs under each
// flush policy are opened and written; once the writes are durable (under
// FlushInterval, by the timer a write arms) every flusher has ended, and a
// write after that is fsynced as the policy says, by a flusher started for
// it.
func TestIdleLogsRunNoGoroutine(t *testing.T) {
	const perPolicy = 50
	before := runtime.NumGoroutine()
	var logs []*Log
	for _, policy := range []FlushPolicy{FlushAlways, FlushInterval, FlushNever} {
		for i := range perPolicy {
			opts := testOptions(DiskFS{})
			opts.FlushPolicy = policy
			opts.FlushInterval = 5 * time.Millisecond
			l := mustOpen(t, filepath.Join(t.TempDir(), strconv.Itoa(i)), opts)
			t.Cleanup(func() { l.Close() })
			logs = append(logs, l)
		}
	}
	durable := func() bool {
		for _, l := range logs {
			if l.Config().FlushPolicy != FlushNever && l.DurableOffset() < l.LogEndOffset() {
				return false
			}
		}
		return true
	}
	idle := func() bool { return runtime.NumGoroutine() <= before }
	eventually(t, 10*time.Second, "opened logs to run no goroutine", idle)

	for round := range 2 {
		for _, l := range logs {
			if _, err := l.Append(seqBatch(t, round*3, 3, 0, 100), 0); err != nil {
				t.Fatal(err)
			}
		}
		// FlushAlways: Append returned after the fsync. FlushInterval: the
		// timer the write armed fsyncs it.
		eventually(t, 10*time.Second, "every write to be fsynced", durable)
		eventually(t, 10*time.Second, "idle logs to run no goroutine", idle)
	}
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after closing every log, %d before opening them", n, before)
	}
}

// TestCheckpointSkipsAnUnchangedState: the broker checkpoints every log
// every few seconds; a log whose state did not change since its last
// checkpoint writes (and fsyncs) nothing, and one whose state moved writes
// it.
func TestCheckpointSkipsAnUnchangedState(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testOptions(DiskFS{}))
	defer l.Close()
	inode := func() uint64 {
		t.Helper()
		fi, err := os.Stat(filepath.Join(dir, stateFile))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	if _, err := l.Append(seqBatch(t, 0, 3, 0, 100), 0); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(3)
	if err := l.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	written := inode() // each write renames a new file into place
	for range 3 {
		if err := l.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	if inode() != written {
		t.Fatal("a checkpoint of an unchanged state rewrote the file")
	}
	if _, err := l.Append(seqBatch(t, 3, 3, 0, 100), 0); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(6)
	if err := l.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if inode() == written {
		t.Fatal("a checkpoint of a moved high watermark wrote nothing")
	}
	reopened := func() logState {
		data, err := os.ReadFile(filepath.Join(dir, stateFile))
		if err != nil {
			t.Fatal(err)
		}
		s, err := decodeState(data)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}()
	if reopened.highWatermark != 6 || reopened.recoveryPoint != 6 {
		t.Fatalf("checkpoint holds %+v, want high watermark and recovery point 6", reopened)
	}
}
