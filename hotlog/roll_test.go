package hotlog

import (
	"errors"
	"github.com/strata-log/strata/hotlog/memfs"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
)

// gatedFS holds the fsync of chosen files until the test opens the gate,
// outside the file system's own lock, so everything else goes on meanwhile.
type gatedFS struct {
	*memfs.FS
	mu     sync.Mutex
	held   func(path string) bool
	gate   chan struct{}
	failed bool // the gate opened with a failure: the held syncs fail
	waits  int  // syncs waiting at the gate now
	// delay makes every fsync take this long, outside the file system's
	// lock, as a disk's does: writes go on meanwhile.
	delay time.Duration
}

var errAbandoned = errors.New("test: sync abandoned")

func newGatedFS() *gatedFS { return &gatedFS{FS: memfs.New(), gate: make(chan struct{})} }

func (g *gatedFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &gatedFile{File: f, fs: g, path: name}, nil
}

func (g *gatedFS) hold(match func(path string) bool) {
	g.mu.Lock()
	g.held, g.gate = match, make(chan struct{})
	g.mu.Unlock()
}

// open lets the held syncs go on (or fail, with fail).
func (g *gatedFS) open(fail bool) {
	g.mu.Lock()
	g.failed = fail
	g.held = nil
	close(g.gate)
	g.mu.Unlock()
}

func (g *gatedFS) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waits
}

type gatedFile struct {
	File
	fs   *gatedFS
	path string
}

func (f *gatedFile) Sync() error {
	g := f.fs
	time.Sleep(g.delay)
	g.mu.Lock()
	held, gate := g.held != nil && g.held(f.path), g.gate
	if held {
		g.waits++
	}
	g.mu.Unlock()
	if held {
		<-gate
		g.mu.Lock()
		g.waits--
		failed := g.failed
		g.mu.Unlock()
		if failed {
			return errAbandoned
		}
	}
	return f.File.Sync()
}

func firstSegment(path string) bool { return strings.HasSuffix(path, segmentName(0, logSuffix)) }

// An append that rolls the segment does not wait for the rolled segment's
// fsync: that happens in the background, and the segment counts as sealed
// (uploadable, deletable) only once it is done.
func TestRollDoesNotFsyncOnTheAppendPath(t *testing.T) {
	fsys := newGatedFS()
	opts := testOptions(fsys)
	opts.FlushPolicy = FlushInterval
	opts.FlushInterval = time.Hour
	l := mustOpen(t, "/log", opts)
	defer l.Close()
	fsys.hold(firstSegment)
	appended := make(chan error, 1)
	go func() {
		// 14 batches of ~600 bytes overflow the 8 KiB segment: a roll.
		for i := range 20 {
			if _, err := l.Append(testutil.SeqBatch(t, int64(i*3), 3, int64(i), 120, []byte("k")), 0); err != nil {
				appended <- err
				return
			}
		}
		appended <- nil
	}()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		fsys.open(false)
		t.Fatal("an append that rolled waited for the rolled segment's fsync")
	}
	segs := l.Segments()
	if len(segs) < 2 {
		t.Fatalf("no roll: %+v", segs)
	}
	if segs[0].Sealed {
		t.Fatal("the rolled segment counts as sealed before its fsync")
	}
	if n := l.DurableOffset(); n != 0 {
		t.Fatalf("durable offset %d before any fsync", n)
	}
	fsys.open(false)
	testutil.WaitFor(t, 10*time.Second, "the rolled segment sealed", func() bool { return l.Segments()[0].Sealed })
	if n, end := l.DurableOffset(), l.Segments()[0].LastOffset+1; n < end {
		t.Fatalf("durable offset %d below the end %d of the sealed segment", n, end)
	}
}

// A crash while a rolled segment is not yet fsynced, after a checkpoint has
// made the next segment's file durable: recovery cuts the torn segment
// after its last whole batch and drops what followed it, instead of
// refusing to open; what remains reads back in order.
func TestCrashBeforeTheRolledSegmentIsSynced(t *testing.T) {
	for seed := range uint64(20) {
		fsys := newGatedFS()
		opts := testOptions(fsys)
		opts.FlushPolicy = FlushInterval
		opts.FlushInterval = time.Hour
		l := mustOpen(t, "/log", opts)
		fsys.hold(firstSegment)
		filled := make(chan struct{})
		go func() { fillLog(t, l, 20); close(filled) }() // rolls once; the first segment's fsync is held
		select {
		case <-filled:
		case <-time.After(10 * time.Second):
			fsys.open(false)
			t.Fatal("an append that rolled waited for the rolled segment's fsync")
		}
		if len(l.Segments()) < 2 {
			t.Fatal("no roll")
		}
		if err := l.Checkpoint(); err != nil { // syncs the directory: the new segment's file survives
			t.Fatal(err)
		}
		testutil.WaitFor(t, 10*time.Second, "the flusher at the gate", func() bool { return fsys.waiting() == 1 })
		fsys.open(true) // the held fsync fails: the log stops, as a crash would stop it
		crashClose(l)
		rng := rand.New(rand.NewPCG(seed, 7))
		fsys.Crash(func(path string, synced, current []byte) []byte {
			if len(current) <= len(synced) {
				return synced
			}
			return append([]byte(nil), current[:len(synced)+rng.IntN(len(current)-len(synced)+1)]...)
		})
		l, err := Open("/log", opts)
		if err != nil {
			t.Fatalf("seed %d: open after a crash with the rolled segment unsynced: %v", seed, err)
		}
		checkSeq(t, readRecords(t, l, 0, l.LogEndOffset()), 0, 0)
		// The log goes on from where it ends.
		next := l.LogEndOffset()
		if _, err := l.Append(testutil.SeqBatch(t, int64(int(next)), 3, 100, 120, []byte("k")), 0); err != nil {
			t.Fatal(err)
		}
		checkSeq(t, readRecords(t, l, 0, l.LogEndOffset()), 0, 0)
		l.Close()
	}
}

// A checkpoint (every few seconds per partition) writes and fsyncs its file
// without holding appends up.
func TestCheckpointDoesNotStopAppends(t *testing.T) {
	fsys := newGatedFS()
	opts := testOptions(fsys)
	opts.FlushPolicy = FlushInterval
	opts.FlushInterval = time.Hour
	l := mustOpen(t, "/log", opts)
	defer l.Close()
	// A state that moved since open, so the checkpoint has something to
	// write (one of an unchanged state writes nothing).
	if _, err := l.Append(testutil.SeqBatch(t, 0, 3, 0, 120, []byte("k")), 0); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(3)
	fsys.hold(func(path string) bool { return strings.HasSuffix(path, stateFile+tmpSuffix) })
	checkpointed := make(chan error, 1)
	go func() { checkpointed <- l.Checkpoint() }()
	testutil.WaitFor(t, 10*time.Second, "the checkpoint at its fsync", func() bool { return fsys.waiting() == 1 })
	appended := make(chan error, 1)
	go func() {
		_, err := l.Append(testutil.SeqBatch(t, 3, 3, 0, 120, []byte("k")), 0)
		appended <- err
	}()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		fsys.open(false)
		t.Fatal("an append waited for a checkpoint's fsync")
	}
	fsys.open(false)
	if err := <-checkpointed; err != nil {
		t.Fatal(err)
	}
}

// With SyncRollsInline (a simulation's setting) the append that rolls
// fsyncs the sealed segment itself: it is sealed when the append returns.
func TestSyncRollsInline(t *testing.T) {
	fsys := memfs.New()
	opts := testOptions(fsys)
	opts.FlushPolicy = FlushNever
	opts.SyncRollsInline = true
	var durable []int64
	opts.OnDurable = func(d int64) { durable = append(durable, d) } // no lock: the appender's goroutine only
	l := mustOpen(t, "/log", opts)
	defer l.Close()
	fillLog(t, l, 20)
	segs := l.Segments()
	if len(segs) < 2 || !segs[0].Sealed {
		t.Fatalf("segments right after the rolling append: %+v", segs)
	}
	if len(durable) == 0 || durable[len(durable)-1] != segs[len(segs)-1].BaseOffset {
		t.Fatalf("durable offsets %v, want the last at %d", durable, segs[len(segs)-1].BaseOffset)
	}
}

// With FlushInline (a simulation's setting) no timer fsyncs: under
// FlushInterval the log stays unsynced until its owner calls Flush, which
// fsyncs everything written on the caller's goroutine, and a crash before
// it keeps only what an earlier Flush covered.
func TestFlushInline(t *testing.T) {
	fsys := memfs.New()
	opts := testOptions(fsys)
	opts.FlushPolicy = FlushInterval
	opts.FlushInterval = time.Millisecond
	opts.FlushInline = true
	var durable []int64
	opts.OnDurable = func(d int64) { durable = append(durable, d) } // no lock: the caller's goroutine only
	l := mustOpen(t, "/log", opts)
	defer l.Close()
	fillLog(t, l, 3)
	time.Sleep(20 * time.Millisecond) // twenty intervals: a timer, were there one, would have fsynced
	if d := l.DurableOffset(); d != 0 || len(durable) != 0 {
		t.Fatalf("durable end %d (%v) before any Flush", d, durable)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	end := l.LogEndOffset()
	if d := l.DurableOffset(); d != end || len(durable) == 0 || durable[len(durable)-1] != end {
		t.Fatalf("durable end %d (%v) after Flush, want %d", d, durable, end)
	}
	fillLog(t, l, 3)
	// A power cut now: the appends after the Flush are gone, not the rest.
	cut := fsys.Fork()
	cut.Crash(nil)
	again := mustOpen(t, "/log", testOptions(cut))
	defer again.Close()
	if got := again.LogEndOffset(); got != end {
		t.Fatalf("log end %d after a power cut, want the %d Flush made durable", got, end)
	}
}
