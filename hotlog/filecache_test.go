package hotlog

import (
	"errors"
	"fmt"
	"github.com/strata-log/strata/hotlog/memfs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
)

// watchFS wraps a file system to see what the log does with its files: how
// many segment log files are open, whether any was closed with writes no
// fsync covered, and to fail opens of existing log files on demand.
type watchFS struct {
	FS
	failReopen atomic.Bool // fail opens of existing .log files (not creates)

	mu            sync.Mutex
	open          map[string]int // open handles of .log files, by path
	unsyncedClose []string       // .log files closed with unsynced writes
}

func newWatchFS(inner FS) *watchFS { return &watchFS{FS: inner, open: map[string]int{}} }

var errInjectedOpen = errors.New("injected open failure")

func (w *watchFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	isLog := strings.HasSuffix(name, logSuffix)
	if isLog && flag&os.O_CREATE == 0 && w.failReopen.Load() {
		return nil, errInjectedOpen
	}
	f, err := w.FS.OpenFile(name, flag, perm)
	if err != nil || !isLog {
		return f, err
	}
	w.mu.Lock()
	w.open[name]++
	w.mu.Unlock()
	return &watchFile{File: f, w: w, path: name}, nil
}

// openLogFiles is how many .log handles are open.
func (w *watchFS) openLogFiles() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.open {
		n += c
	}
	return n
}

func (w *watchFS) openHandles(path string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.open[path]
}

type watchFile struct {
	File
	w       *watchFS
	path    string
	mu      sync.Mutex
	pending bool // written since the last fsync
}

func (f *watchFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.mu.Lock()
	f.pending = true
	f.mu.Unlock()
	return n, err
}

func (f *watchFile) Truncate(size int64) error {
	err := f.File.Truncate(size)
	f.mu.Lock()
	f.pending = true
	f.mu.Unlock()
	return err
}

func (f *watchFile) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.File.Sync()
	if err == nil {
		f.pending = false
	}
	return err
}

func (f *watchFile) Close() error {
	f.mu.Lock()
	pending := f.pending
	f.mu.Unlock()
	f.w.mu.Lock()
	f.w.open[f.path]--
	if pending {
		f.w.unsyncedClose = append(f.w.unsyncedClose, f.path)
	}
	f.w.mu.Unlock()
	return f.File.Close()
}

// procFDsUnder counts this process's descriptors open on files under dir,
// from /proc/self/fd: what the operating system sees, not what the log
// thinks it holds.
func procFDsUnder(t testing.TB, dir string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		if runtime.GOOS == "linux" { // Linux always has it: a failure, not a skip
			t.Fatalf("read /proc/self/fd: %v", err)
		}
		t.Skipf("no /proc/self/fd on %s: %v", runtime.GOOS, err)
	}
	n := 0
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			n++
		}
	}
	return n
}

// fdsWithin waits, up to a deadline, for the descriptors open under dir to
// come down to bound, and fails t with tooMany of the last count if they do
// not: a flusher may still hold an index file for a moment after the
// append it fsynced returned.
func fdsWithin(t testing.TB, dir string, bound int, tooMany func(n int) error) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, "the descriptors to come down", func() error {
		if n := procFDsUnder(t, dir); n > bound {
			return tooMany(n)
		}
		return nil
	})
}

// fillSegments appends 3-record batches of ~600 bytes (sequence numbers
// 0, 1, 2, ...) to a log of 8 KiB segments until it has at least segs
// segments, and returns the log end.
func fillSegments(t testing.TB, l *Log, segs int) int64 {
	t.Helper()
	seq := int(l.LogEndOffset())
	for len(l.Segments()) < segs {
		if _, err := l.Append(testutil.SeqBatch(t, int64(seq), 3, int64(seq), 180, []byte("k")), 0); err != nil {
			t.Fatal(err)
		}
		seq += 3
	}
	return l.LogEndOffset()
}

// A log with many sealed segments holds no more descriptors than its cache
// allows, while it is written, read from end to end and reopened; every
// record reads back exactly after the evictions.
func TestManySealedSegmentsHoldAtMostTheCacheBound(t *testing.T) {
	const bound, segments = 3, 40
	dir := t.TempDir()
	opts := testOptions(DiskFS{})
	opts.Files = NewFileCache(bound)
	l := mustOpen(t, dir, opts)
	end := fillSegments(t, l, segments)
	l.SetHighWatermark(end)
	fdsWithin(t, dir, bound, func(n int) error {
		return fmt.Errorf("after writing %d segments %d descriptors are open in the log directory, want at most %d", segments, n, bound)
	})
	checkSeq(t, readRecords(t, l, 0, end), 0, 0)
	fdsWithin(t, dir, bound, func(n int) error {
		return fmt.Errorf("after reading every segment %d descriptors are open, want at most %d", n, bound)
	})
	st := opts.Files.Stats()
	if st.Open > bound || st.Evictions == 0 {
		t.Fatalf("cache stats %+v: want at most %d open and some evictions", st, bound)
	}
	// Reads in a different order (newest segment first) reopen what was
	// evicted.
	segs := l.Segments()
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		checkSeq(t, readRecords(t, l, s.BaseOffset, s.LastOffset+1), s.BaseOffset, int(s.BaseOffset))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := procFDsUnder(t, dir); n != 0 {
		t.Fatalf("%d descriptors left open after close", n)
	}

	// Recovery opens every segment, and still keeps within the bound.
	l = mustOpen(t, dir, opts)
	defer l.Close()
	fdsWithin(t, dir, bound, func(n int) error {
		return fmt.Errorf("after reopening %d descriptors are open, want at most %d", n, bound)
	})
	checkSeq(t, readRecords(t, l, 0, end), 0, 0)
}

// Logs sharing a cache: once their appends are fsynced, idle logs hold no
// descriptors beyond the shared bound, active segments and index files
// included.
func TestIdleLogsHoldNoFilesBeyondTheSharedBound(t *testing.T) {
	const bound, logs = 2, 25
	root := t.TempDir()
	files := NewFileCache(bound)
	var open []*Log
	for i := range logs {
		opts := testOptions(DiskFS{})
		opts.Files = files
		l := mustOpen(t, filepath.Join(root, fmt.Sprint(i)), opts)
		open = append(open, l)
		fillSegments(t, l, 3) // FlushAlways: returns once fsynced
	}
	defer func() {
		for _, l := range open {
			l.Close()
		}
	}()
	// The last log's sealed segments are fsynced by its flusher after the
	// roll; wait for that, not for time.
	for _, l := range open {
		testutil.WaitFor(t, 5*time.Second, "sealed segments fsynced", func() bool {
			segs := l.Segments()
			return segs[len(segs)-2].Sealed
		})
	}
	fdsWithin(t, root, bound, func(n int) error {
		return fmt.Errorf("%d idle logs hold %d descriptors, want at most the shared bound %d", logs, n, bound)
	})
	// And every one of them still reads back whole.
	for _, l := range open {
		checkSeq(t, readRecords(t, l, 0, l.LogEndOffset()), 0, 0)
	}
	// Closing the logs gives every file back: the cache's count agrees
	// with the operating system's.
	for _, l := range open {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if st, n := files.Stats(), procFDsUnder(t, root); st.Open != 0 || n != 0 {
		t.Fatalf("after closing every log the cache counts %d open files and %d descriptors are open", st.Open, n)
	}
}

// A file with writes no fsync has covered is never closed to make room:
// under FlushNever the active segment stays open however hard other logs
// press on the cache, until a roll seals and fsyncs it.
func TestUnsyncedFilesAreNeverEvicted(t *testing.T) {
	w := newWatchFS(memfs.New())
	files := NewFileCache(1)
	opts := testOptions(w)
	opts.Files = files
	opts.FlushPolicy = FlushNever
	writer := mustOpen(t, "/w", opts)
	defer writer.Close()
	ropts := testOptions(w)
	ropts.Files = files
	reader := mustOpen(t, "/r", ropts)
	defer reader.Close()
	rend := fillSegments(t, reader, 6)
	reader.SetHighWatermark(rend)

	for i := range 20 {
		if _, err := writer.Append(testutil.SeqBatch(t, int64(i), 1, 0, 50, []byte("k")), 0); err != nil {
			t.Fatal(err)
		}
		// Read all of the other log: every segment of it passes through the
		// one-file cache.
		checkSeq(t, readRecords(t, reader, 0, rend), 0, 0)
		if got := w.openHandles(activePath("/w", writer)); got != 1 {
			t.Fatalf("after append %d the unsynced active segment has %d open handles, want 1", i, got)
		}
	}
	if err := writer.Roll(); err != nil { // seals and fsyncs it
		t.Fatal(err)
	}
	checkSeq(t, readRecords(t, reader, 0, rend), 0, 0)
	if got := w.openHandles(filepath.Join("/w", segmentName(0, logSuffix))); got != 0 {
		t.Fatalf("the sealed, fsynced segment still has %d handles after the cache needed room", got)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.unsyncedClose) > 0 {
		t.Fatalf("files closed with unsynced writes: %v", w.unsyncedClose)
	}
}

// A reopen that fails fails the read, not the log: the next read, once the
// file system lets it, succeeds. An append whose active segment cannot be
// reopened is refused without writing anything.
func TestFailedReopenFailsTheCallNotTheLog(t *testing.T) {
	w := newWatchFS(memfs.New())
	opts := testOptions(w)
	opts.Files = NewFileCache(1)
	l := mustOpen(t, "/l", opts)
	defer l.Close()
	end := fillSegments(t, l, 4)
	l.SetHighWatermark(end)
	if _, err := l.Read(0, 1<<20, end); err != nil { // segment 0 now cached, the rest evicted
		t.Fatal(err)
	}
	w.failReopen.Store(true)
	if _, err := l.Read(end-1, 1<<20, end); !errors.Is(err, errInjectedOpen) {
		t.Fatalf("read of an evicted segment whose reopen fails: %v, want the open error", err)
	}
	if _, err := l.Append(testutil.SeqBatch(t, int64(int(end)), 1, 0, 50, []byte("k")), 0); !errors.Is(err, errInjectedOpen) {
		t.Fatalf("append to an evicted active segment whose reopen fails: %v, want the open error", err)
	}
	if l.LogEndOffset() != end {
		t.Fatalf("log end %d after a refused append, want %d", l.LogEndOffset(), end)
	}
	w.failReopen.Store(false)
	if _, err := l.Append(testutil.SeqBatch(t, int64(int(end)), 1, 0, 50, []byte("k")), 0); err != nil {
		t.Fatalf("append after the file system recovered: %v", err)
	}
	l.SetHighWatermark(end + 1)
	checkSeq(t, readRecords(t, l, 0, end+1), 0, 0)
}

// Readers of two logs that share a one-file cache race appends, rolls,
// truncations and retention deletes: every read returns exactly the
// records at its offsets (a record's value is its offset, whatever was
// truncated and written again), and none fails on a file closed under it.
func TestConcurrentReadsEvictionTruncationAndDeletion(t *testing.T) {
	files := NewFileCache(1)
	root := t.TempDir()
	var logs []*Log
	for i := range 2 {
		opts := testOptions(DiskFS{})
		opts.Files = files
		opts.SegmentBytes = 2048
		l := mustOpen(t, filepath.Join(root, fmt.Sprint(i)), opts)
		defer l.Close()
		logs = append(logs, l)
	}
	appendUpTo := func(l *Log, end int64) error {
		for off := l.LogEndOffset(); off < end; off = l.LogEndOffset() {
			if _, err := l.Append(testutil.SeqBatch(t, int64(int(off)), 2, off, 100, []byte("k")), 0); err != nil {
				return err
			}
			l.SetHighWatermark(l.LogEndOffset())
		}
		return nil
	}
	deadline := time.Now().Add(3 * time.Second)
	if testing.Short() {
		deadline = time.Now().Add(time.Second)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for _, l := range logs {
		wg.Add(1)
		go func() { // the writer: grow, cut back, drop old segments
			defer wg.Done()
			defer stop.Store(true)
			for round := 0; time.Now().Before(deadline); round++ {
				if err := appendUpTo(l, l.LogEndOffset()+60); err != nil {
					errs <- err
					return
				}
				if round%3 == 1 {
					if _, err := l.TruncateTo(l.LogEndOffset() - 21); err != nil {
						errs <- fmt.Errorf("truncate: %w", err)
						return
					}
				}
				if round%4 == 3 {
					if _, err := l.DeleteSegmentsBefore(l.HighWatermark() - 40); err != nil {
						errs <- fmt.Errorf("delete: %w", err)
						return
					}
				}
			}
		}()
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stop.Load(); i++ {
					start, hw := l.LogStartOffset(), l.HighWatermark()
					if hw <= start {
						runtime.Gosched()
						continue
					}
					off := start + int64(i*7)%(hw-start)
					res, err := l.Read(off, 1500, hw)
					var rerr *RangeError
					if errors.As(err, &rerr) {
						continue // retention or truncation moved the range meanwhile
					}
					if err != nil {
						errs <- fmt.Errorf("read at %d: %w", off, err)
						return
					}
					for rest := res.Data; len(rest) > 0; {
						b, next, err := record.Next(rest)
						if err != nil {
							errs <- fmt.Errorf("read at %d: %w", off, err)
							return
						}
						recs, err := b.Records()
						if err != nil {
							errs <- err
							return
						}
						for _, r := range recs {
							if int64(seqOf(r)) != r.Offset {
								errs <- fmt.Errorf("offset %d holds record %d", r.Offset, seqOf(r))
								return
							}
						}
						rest = next
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := files.Stats(); st.Evictions == 0 {
		t.Fatalf("no evictions (%+v): the test did not race anything", st)
	}
	for _, l := range logs {
		checkSeq(t, readRecords(t, l, l.LogStartOffset(), l.HighWatermark()), l.LogStartOffset(), int(l.LogStartOffset()))
	}
}

// A process killed with a small cache leaves a log that recovers, within
// the bound, with every record it had fsynced.
func TestRecoveryAfterKillWithASmallCache(t *testing.T) {
	m := memfs.New()
	opts := testOptions(m)
	opts.Files = NewFileCache(2)
	l := mustOpen(t, "/k", opts)
	end := fillSegments(t, l, 12)
	l.SetHighWatermark(end)
	if err := l.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	killed := m.Fork() // kill -9: the page cache survives, no final fsync
	l.Close()

	w := newWatchFS(killed)
	ropts := testOptions(w)
	ropts.Files = NewFileCache(2)
	r := mustOpen(t, "/k", ropts)
	defer r.Close()
	if n := w.openLogFiles(); n > 2 {
		t.Fatalf("recovery left %d log files open, want at most 2", n)
	}
	if r.LogEndOffset() != end {
		t.Fatalf("log end %d after recovery, want %d (all was fsynced)", r.LogEndOffset(), end)
	}
	checkSeq(t, readRecords(t, r, 0, end), 0, 0)
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.unsyncedClose) > 0 {
		t.Fatalf("recovery closed files with unsynced writes: %v", w.unsyncedClose)
	}
}
