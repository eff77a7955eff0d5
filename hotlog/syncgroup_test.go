package hotlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/hotlog/memfs"
	"github.com/strata-log/strata/internal/testutil"
)

// heldFile is a File whose Sync blocks until its gate opens, so a test can
// hold per-file fsyncs under way, and counts its calls.
type heldFile struct {
	File
	gate  chan struct{}
	syncs atomic.Int32
	err   error
}

func newHeldFile() *heldFile { return &heldFile{gate: make(chan struct{})} }

func (f *heldFile) Sync() error {
	f.syncs.Add(1)
	<-f.gate
	return f.err
}

// syncAllGate is a file-system sync that counts its calls and blocks on each
// until the test lets it go.
type syncAllGate struct {
	calls   atomic.Int32
	started chan struct{}
	release chan error
}

func newSyncAllGate() *syncAllGate {
	return &syncAllGate{started: make(chan struct{}, 100), release: make(chan error)}
}

func (s *syncAllGate) syncAll() error {
	s.calls.Add(1)
	s.started <- struct{}{}
	return <-s.release
}

func goSync(g *SyncGroup, f File) <-chan error {
	done := make(chan error, 1)
	go func() { done <- g.sync(f) }()
	return done
}

func waitStarted(t *testing.T, s *syncAllGate) {
	t.Helper()
	select {
	case <-s.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no file-system sync started")
	}
}

func waitOwn(t *testing.T, g *SyncGroup, n int) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("%d per-file fsyncs under way", n), func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.own == n
	})
}

// waitNextRound waits until callers wait for the next file-system sync.
func waitNextRound(t *testing.T, g *SyncGroup, callers int) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("%d callers waiting for the next round", callers), func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.next != nil && g.next.callers == callers
	})
}

// firstSyncHeld wraps a file system so that, once armed, the first fsync
// of a segment log file waits until release closes: it holds the one
// per-file fsync a group of bound 1 allows, so every other caller shares.
type firstSyncHeld struct {
	FS
	armed   atomic.Bool
	release chan struct{}
}

func holdFirstSync(inner FS) *firstSyncHeld {
	return &firstSyncHeld{FS: inner, release: make(chan struct{})}
}

type heldSyncFile struct {
	File
	h *firstSyncHeld
}

func (h *firstSyncHeld) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := h.FS.OpenFile(name, flag, perm)
	if err != nil || filepath.Ext(name) != logSuffix {
		return f, err
	}
	return &heldSyncFile{File: f, h: h}, nil
}

func (f *heldSyncFile) Sync() error {
	if f.h.armed.CompareAndSwap(true, false) {
		<-f.h.release
	}
	return f.File.Sync()
}

// appendOnceHeld opens logs under dir on fsys, has each append one batch
// at once while the first fsync is held, and lets it go once every other
// log's append was answered by the group: all but one are answered by a
// file-system sync.
func appendOnceHeld(t *testing.T, dir string, fsys *firstSyncHeld, g *SyncGroup, logs int) []*Log {
	t.Helper()
	cache := NewFileCache(2 * logs)
	cache.ShareSyncs(g)
	opts := testOptions(fsys)
	opts.Files = cache
	ls := make([]*Log, logs)
	for i := range ls {
		ls[i] = mustOpen(t, filepath.Join(dir, fmt.Sprint(i)), opts)
	}
	fsys.armed.Store(true)
	errs := make(chan error, logs)
	for i, l := range ls {
		go func() {
			_, err := l.Append(testutil.SeqBatch(t, 0, 3, 0, 100, []byte("k")), 0)
			if err != nil {
				err = fmt.Errorf("log %d: %w", i, err)
			}
			errs <- err
		}()
	}
	testutil.WaitFor(t, 10*time.Second, "every append but one answered by a shared sync", func() bool {
		return g.Stats().Shared == int64(logs-1)
	})
	close(fsys.release)
	for range logs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return ls
}

// Below the bound each caller fsyncs its own file; past it, callers share
// one file-system sync and their files see no fsync.
func TestSyncGroupSharesOneFileSystemSyncPastItsBound(t *testing.T) {
	fs := newSyncAllGate()
	g := NewSyncGroup(fs.syncAll, nil, 2)
	own := []*heldFile{newHeldFile(), newHeldFile()}
	var ownDone []<-chan error
	for _, f := range own {
		ownDone = append(ownDone, goSync(g, f))
	}
	waitOwn(t, g, 2)

	// One caller starts a file-system sync; the nine that come while it
	// runs share the next.
	shared := make([]*heldFile, 10)
	var sharedDone []<-chan error
	for i := range shared {
		shared[i] = newHeldFile()
		sharedDone = append(sharedDone, goSync(g, shared[i]))
		if i == 0 {
			waitStarted(t, fs)
		}
	}
	waitNextRound(t, g, 9)
	fs.release <- nil
	waitStarted(t, fs)
	fs.release <- nil
	for i, done := range sharedDone {
		if err := <-done; err != nil {
			t.Fatalf("shared sync %d: %v", i, err)
		}
		if n := shared[i].syncs.Load(); n != 0 {
			t.Fatalf("file %d answered by the file-system sync was fsynced %d times itself", i, n)
		}
	}
	if n := fs.calls.Load(); n != 2 {
		t.Fatalf("%d file-system syncs for 10 callers, want 2", n)
	}
	for i, f := range own {
		close(f.gate)
		if err := <-ownDone[i]; err != nil || f.syncs.Load() != 1 {
			t.Fatalf("own fsync %d: err %v, %d calls", i, err, f.syncs.Load())
		}
	}
	if st := g.Stats(); st.Shared != 10 || st.Off {
		t.Fatalf("stats %+v, want 10 shared and the group on", st)
	}
}

// groupPastItsBound returns a group of bound 1 whose one per-file fsync
// is held, so that every other caller shares a file-system sync of fs;
// unblock lets the held fsync end and waits for it.
func groupPastItsBound(t *testing.T) (fs *syncAllGate, g *SyncGroup, unblock func()) {
	t.Helper()
	fs = newSyncAllGate()
	g = NewSyncGroup(fs.syncAll, nil, 1)
	blocker := newHeldFile()
	blockerDone := goSync(g, blocker)
	waitOwn(t, g, 1)
	return fs, g, func() {
		close(blocker.gate)
		<-blockerDone
	}
}

// A caller that joins while a file-system sync runs is answered by the next
// one, which starts after it joined: the running one may have passed its
// write already.
func TestSyncGroupCallerJoiningDuringARoundWaitsForTheNext(t *testing.T) {
	fs, g, unblock := groupPastItsBound(t)
	defer unblock()

	first := goSync(g, newHeldFile())
	waitStarted(t, fs)
	second := goSync(g, newHeldFile())
	waitNextRound(t, g, 1)
	fs.release <- nil
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-second:
		t.Fatalf("the caller that joined during the first round returned (%v) before a second began", err)
	default:
	}
	waitStarted(t, fs)
	fs.release <- nil
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if n := fs.calls.Load(); n != 2 {
		t.Fatalf("%d file-system syncs, want 2", n)
	}
}

// A failed file-system sync turns sharing off for good: its callers, and
// the ones waiting for the next round, get their own file's fsync and its
// answer, and every later caller fsyncs its own file however many run.
func TestSyncGroupFailureFallsBackToEachFilesOwnFsync(t *testing.T) {
	fs, g, unblock := groupPastItsBound(t)
	defer unblock()

	failing, healthy, later := newHeldFile(), newHeldFile(), newHeldFile()
	failing.err = errors.New("EIO on this file")
	close(failing.gate)
	close(healthy.gate)
	close(later.gate)
	failingDone := goSync(g, failing)
	waitStarted(t, fs)
	laterDone := goSync(g, later) // waits for a second round that never runs
	waitNextRound(t, g, 1)
	fs.release <- errors.New("syncfs: EIO")
	if err := <-failingDone; err == nil || err.Error() != "EIO on this file" {
		t.Fatalf("caller of the failed round got %v, want its own file's error", err)
	}
	if err := <-laterDone; err != nil || later.syncs.Load() != 1 {
		t.Fatalf("caller of the round that never ran: err %v, %d own fsyncs, want nil after 1", err, later.syncs.Load())
	}
	if err := g.sync(healthy); err != nil || healthy.syncs.Load() != 1 {
		t.Fatalf("caller after the failure, past the bound: err %v, %d own fsyncs", err, healthy.syncs.Load())
	}
	if n := fs.calls.Load(); n != 1 {
		t.Fatalf("%d file-system syncs, want 1: none after the failure", n)
	}
	if st := g.Stats(); !st.Off || st.Shared != 0 {
		t.Fatalf("stats %+v, want off and nothing shared", st)
	}
}

// Logs sharing a cache whose fsyncs go through a group keep every record
// acknowledged under FlushAlways across a crash, including those a
// file-system sync answered; without that sync (a group whose sync does
// nothing) the crash loses exactly those, so the test can fail.
func TestSharedSyncsKeepAcknowledgedRecordsAcrossACrash(t *testing.T) {
	const logs = 40
	for _, tc := range []struct {
		name     string
		syncAll  func(*memfs.FS) func() error
		wantLost int
	}{
		{"file-system sync", func(m *memfs.FS) func() error { return m.SyncAll }, 0},
		{"a sync that does nothing", func(*memfs.FS) func() error { return func() error { return nil } }, logs - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memfs.New()
			g := NewSyncGroup(tc.syncAll(mem), nil, 1)
			ls := appendOnceHeld(t, "/p", holdFirstSync(mem), g, logs)
			mem.Crash(nil)
			lost := 0
			for i := range ls {
				l := mustOpen(t, filepath.Join("/p", fmt.Sprint(i)), testOptions(mem))
				if end := l.LogEndOffset(); end != 3 {
					lost++
				} else {
					checkSeq(t, readRecords(t, l, 0, end), 0, 0)
				}
				l.Close()
			}
			if lost != tc.wantLost {
				t.Fatalf("%d of %d logs lost their acknowledged records in the crash, want %d", lost, logs, tc.wantLost)
			}
		})
	}
}
