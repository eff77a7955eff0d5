package hotlog

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
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
	testutil.WaitFor(t, 10*time.Second, "opened logs to run no goroutine", idle)

	for round := range 2 {
		for _, l := range logs {
			if _, err := l.Append(testutil.SeqBatch(t, int64(round*3), 3, 0, 100, []byte("k")), 0); err != nil {
				t.Fatal(err)
			}
		}
		// FlushAlways: Append returned after the fsync. FlushInterval: the
		// timer the write armed fsyncs it.
		testutil.WaitFor(t, 10*time.Second, "every write to be fsynced", durable)
		testutil.WaitFor(t, 10*time.Second, "idle logs to run no goroutine", idle)
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
	t.Cleanup(func() { l.Close() })
	inode := func() uint64 {
		t.Helper()
		fi, err := os.Stat(filepath.Join(dir, stateFile))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	if _, err := l.Append(testutil.SeqBatch(t, 0, 3, 0, 100, []byte("k")), 0); err != nil {
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
	if _, err := l.Append(testutil.SeqBatch(t, 3, 3, 0, 100, []byte("k")), 0); err != nil {
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
	// Close of a log whose checkpoint is current writes none either: a
	// broker stopping thousands of idle logs pays no fsync for them.
	written = inode()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if inode() != written {
		t.Fatal("closing a log with a current checkpoint rewrote it")
	}
}

// TestOpenAfterACleanCloseWritesNothing: a clean close leaves every batch
// fsynced and a current checkpoint, so the next open fsyncs and rewrites
// nothing (a broker of thousands of logs starts without thousands of
// fsyncs), leaves no file it must keep open (two such logs under a cache
// of one file hold one), and the log still serves every record and takes
// appends.
func TestOpenAfterACleanCloseWritesNothing(t *testing.T) {
	root := t.TempDir()
	files := NewFileCache(1)
	opts := testOptions(DiskFS{})
	opts.Files = files
	inodes := map[string]uint64{}
	for _, name := range []string{"a", "b"} {
		dir := filepath.Join(root, name)
		l := mustOpen(t, dir, opts)
		for i := range 5 {
			if _, err := l.Append(testutil.SeqBatch(t, int64(i*3), 3, 0, 100, []byte("k")), 1); err != nil {
				t.Fatal(err)
			}
		}
		l.SetHighWatermark(15)
		// A leader's epoch begun at the log end, with no batch yet.
		if err := l.BeginEpoch(3); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		for _, file := range []string{stateFile, epochFile} {
			fi, err := os.Stat(filepath.Join(dir, file))
			if err != nil {
				t.Fatal(err)
			}
			inodes[name+file] = fi.Sys().(*syscall.Stat_t).Ino
		}
	}
	var logs []*Log
	for _, name := range []string{"a", "b"} {
		dir := filepath.Join(root, name)
		l := mustOpen(t, dir, opts)
		t.Cleanup(func() { l.Close() })
		logs = append(logs, l)
		// The leader takes its epoch again, as a broker does at start.
		if err := l.BeginEpoch(3); err != nil {
			t.Fatal(err)
		}
		for _, file := range []string{stateFile, epochFile} {
			if fi, err := os.Stat(filepath.Join(dir, file)); err != nil || fi.Sys().(*syscall.Stat_t).Ino != inodes[name+file] {
				t.Fatalf("open of %s after a clean close rewrote %s (%v)", name, file, err)
			}
		}
		if e := l.Epochs(); len(e) != 2 || e[1].Epoch != 3 || e[1].StartOffset != 15 {
			t.Fatalf("epochs of %s after open and BeginEpoch: %+v, want epoch 3 from 15 last", name, e)
		}
		if l.DurableOffset() != 15 || l.HighWatermark() != 15 || l.LogEndOffset() != 15 {
			t.Fatalf("reopened %s: durable %d, high watermark %d, end %d; want 15", name, l.DurableOffset(), l.HighWatermark(), l.LogEndOffset())
		}
	}
	if st := files.Stats(); st.Open > 1 {
		t.Fatalf("%d files open under a cache of one after opening two cleanly closed logs: a file was left unsynced", st.Open)
	}
	for _, l := range logs {
		checkSeq(t, readRecords(t, l, 0, 15), 0, 0)
		if _, err := l.Append(testutil.SeqBatch(t, 15, 3, 0, 100, []byte("k")), 3); err != nil {
			t.Fatal(err)
		}
		checkSeq(t, readRecords(t, l, 0, 18), 0, 0)
	}
}
