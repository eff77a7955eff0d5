package hotlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
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
	testutil.WaitFor(t, 10*time.Second, "nine callers waiting for the next round", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.next != nil && g.next.callers == 9
	})
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

// A caller that joins while a file-system sync runs is answered by the next
// one, which starts after it joined: the running one may have passed its
// write already.
func TestSyncGroupCallerJoiningDuringARoundWaitsForTheNext(t *testing.T) {
	fs := newSyncAllGate()
	g := NewSyncGroup(fs.syncAll, nil, 1)
	blocker := newHeldFile()
	blockerDone := goSync(g, blocker)
	waitOwn(t, g, 1)

	first := goSync(g, newHeldFile())
	waitStarted(t, fs)
	second := goSync(g, newHeldFile())
	testutil.WaitFor(t, 10*time.Second, "the second caller waiting for the next round", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.next != nil
	})
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
	close(blocker.gate)
	<-blockerDone
}

// A failed file-system sync turns sharing off for good: its callers, and
// the ones waiting for the next round, get their own file's fsync and its
// answer, and every later caller fsyncs its own file however many run.
func TestSyncGroupFailureFallsBackToEachFilesOwnFsync(t *testing.T) {
	fs := newSyncAllGate()
	g := NewSyncGroup(fs.syncAll, nil, 1)
	blocker := newHeldFile()
	blockerDone := goSync(g, blocker)
	waitOwn(t, g, 1)

	failing, healthy, later := newHeldFile(), newHeldFile(), newHeldFile()
	failing.err = errors.New("EIO on this file")
	close(failing.gate)
	close(healthy.gate)
	close(later.gate)
	failingDone := goSync(g, failing)
	waitStarted(t, fs)
	laterDone := goSync(g, later) // waits for a second round that never runs
	testutil.WaitFor(t, 10*time.Second, "a caller waiting for the next round", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.next != nil
	})
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
	close(blocker.gate)
	<-blockerDone
}

// Logs sharing a cache whose fsyncs go through a group keep every record
// acknowledged under FlushAlways across a crash, including those a
// file-system sync answered; without that sync (a group whose sync does
// nothing) the crash loses them, so the test can fail.
func TestSharedSyncsKeepAcknowledgedRecordsAcrossACrash(t *testing.T) {
	for _, tc := range []struct {
		name     string
		syncAll  func(*memfs.FS) func() error
		wantLoss bool
	}{
		{"file-system sync", func(m *memfs.FS) func() error { return m.SyncAll }, false},
		{"a sync that does nothing", func(*memfs.FS) func() error { return func() error { return nil } }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := memfs.New()
			// Every fsync but the first of a burst waits, so callers pile up
			// past the bound of one and share.
			var slow atomic.Bool
			fsys.FailSync = func(string) error {
				if slow.Load() {
					time.Sleep(time.Millisecond)
				}
				return nil
			}
			cache := NewFileCache(1000)
			g := NewSyncGroup(tc.syncAll(fsys), nil, 1)
			cache.ShareSyncs(g)
			opts := testOptions(fsys)
			opts.Files = cache
			const logs, batches = 40, 5
			ls := make([]*Log, logs)
			for i := range ls {
				ls[i] = mustOpen(t, fmt.Sprintf("/p%d", i), opts)
			}
			slow.Store(true)
			var wg sync.WaitGroup
			errs := make(chan error, logs)
			for i, l := range ls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := range batches {
						if _, err := l.Append(testutil.SeqBatch(t, int64(j*3), 3, 0, 100, []byte("k")), 0); err != nil {
							errs <- fmt.Errorf("log %d: %w", i, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if g.Stats().Shared == 0 {
				t.Fatal("no fsync was shared: the test did not reach the group")
			}
			fsys.Crash(nil)
			lost := 0
			for i := range ls {
				l := mustOpen(t, fmt.Sprintf("/p%d", i), testOptions(fsys))
				if end := l.LogEndOffset(); end != batches*3 {
					lost++
				} else {
					checkSeq(t, readRecords(t, l, 0, end), 0, 0)
				}
				l.Close()
			}
			if tc.wantLoss != (lost > 0) {
				t.Fatalf("%d of %d logs lost acknowledged records in the crash (want loss: %v); shared %d",
					lost, logs, tc.wantLoss, g.Stats().Shared)
			}
		})
	}
}

// On the real disk: many logs appending at once share syncfs rounds, and
// everything acknowledged is there to read.
func TestDiskSyncGroupSharesSyncfs(t *testing.T) {
	dir, g := diskSyncGroup(t)
	defer g.Close()
	cache := NewFileCache(1000)
	cache.ShareSyncs(g)
	opts := testOptions(DiskFS{})
	opts.Files = cache
	const logs = 50
	var wg sync.WaitGroup
	for i := range logs {
		l := mustOpen(t, filepath.Join(dir, fmt.Sprint(i)), opts)
		defer l.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 10 {
				if _, err := l.Append(testutil.SeqBatch(t, int64(j), 1, 0, 2000, []byte("k")), 0); err != nil {
					t.Error(err)
					return
				}
			}
			checkSeq(t, readRecords(t, l, 0, l.LogEndOffset()), 0, 0)
		}()
	}
	wg.Wait()
	if st := g.Stats(); st.Rounds == 0 || st.Shared == 0 || st.Off {
		t.Fatalf("stats %+v: want shared syncfs rounds from 50 logs appending at once", st)
	}
}

// A directory on another file system is not covered by the data directory's
// syncfs, so its files keep their own fsyncs.
func TestDiskSyncGroupCoversOnlyItsFileSystem(t *testing.T) {
	dir, g := diskSyncGroup(t)
	defer g.Close()
	if !g.covers(filepath.Join(dir, "00000000000000000000.log")) {
		t.Fatal("a file in the group's own directory is not covered")
	}
	other := "/proc/self" // procfs: always another file system than a test's temp dir
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("stat %s: %v", other, err)
	}
	if g.covers(filepath.Join(other, "status")) {
		t.Fatalf("%s is covered by the syncfs of %s", other, dir)
	}
}

// diskSyncGroup returns a directory on a file system where DiskSyncGroup
// shares syncs, and its group: the test's temp dir, or else one beside the
// package's sources (on the disk the checkout is on). A machine with
// neither on ext4, XFS or Btrfs cannot run the test.
func diskSyncGroup(t *testing.T) (string, *SyncGroup) {
	t.Helper()
	for _, parent := range []string{"", "."} {
		dir, err := os.MkdirTemp(parent, "syncgroup-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		g, err := DiskSyncGroup(dir, 1)
		if err != nil {
			t.Fatal(err)
		}
		if g != nil {
			return dir, g
		}
	}
	t.Skip("neither the temp dir nor the checkout is on ext4, XFS or Btrfs, where syncs are shared")
	return "", nil
}

// Where syncfs may not reach storage (here tmpfs, standing for any file
// system not known to write every dirty page on syncfs), fsyncs stay per
// file.
func TestDiskSyncGroupOnlyOnKnownFileSystems(t *testing.T) {
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Skip("no /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", "syncgroup-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	g, err := DiskSyncGroup(dir, 1)
	if err != nil || g != nil {
		t.Fatalf("DiskSyncGroup on tmpfs: %v, %v; want no group", g, err)
	}
}
