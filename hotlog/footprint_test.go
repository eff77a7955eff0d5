package hotlog

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/strata-log/strata/internal/testutil"
)

// TestIdleFootprint measures what idle partitions cost a process: it opens
// STRATA_FOOTPRINT_LOGS logs sharing one cache of STRATA_FOOTPRINT_FILES
// files (256 unless set; 0 keeps every file open, as before the cache),
// gives each two segments (one sealed, one active, each holding a batch,
// fsynced), and reports the descriptors and resident memory per log once
// they are idle. It is a measurement, run by hand:
//
//	STRATA_FOOTPRINT_LOGS=5000 go test -run TestIdleFootprint -v ./hotlog/
func TestIdleFootprint(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("STRATA_FOOTPRINT_LOGS"))
	if n <= 0 {
		t.Skip("set STRATA_FOOTPRINT_LOGS to measure")
	}
	files := 256
	if v := os.Getenv("STRATA_FOOTPRINT_FILES"); v != "" {
		files, _ = strconv.Atoi(v)
	}
	if files == 0 {
		files = 1 << 30
	}
	cache := NewFileCache(files)
	root := t.TempDir()
	fds0, rss0 := processFDs(t), residentBytes(t)

	logs := make([]*Log, n)
	var wg sync.WaitGroup
	work := make(chan int)
	errs := make(chan error, n)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				opts := testOptions(DiskFS{})
				opts.Files = cache
				l, err := Open(filepath.Join(root, strconv.Itoa(i)), opts)
				if err != nil {
					errs <- err
					continue
				}
				logs[i] = l
				for s := range 2 {
					if _, err := l.Append(testutil.SeqBatch(t, int64(s), 3, 0, 100, []byte("k")), 0); err != nil {
						errs <- err
					}
					if s == 0 {
						if err := l.Roll(); err != nil {
							errs <- err
						}
					}
				}
				if err := l.Checkpoint(); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	defer func() {
		for _, l := range logs {
			l.Close()
		}
	}()
	fds, rss := processFDs(t), residentBytes(t)
	st := cache.Stats()
	t.Logf("%d idle logs of 2 segments, cache bound %d: %d descriptors in all (%.3f per log), %d segment files open; resident memory +%.1f MiB (%.1f KiB per log, goroutines %d)",
		n, min(files, 1<<30), fds-fds0, float64(fds-fds0)/float64(n), st.Open,
		float64(rss-rss0)/(1<<20), float64(rss-rss0)/1024/float64(n), runtime.NumGoroutine())
}

func processFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(entries)
}

// residentBytes is VmRSS after a collection that returns freed memory to
// the operating system.
func residentBytes(t *testing.T) int64 {
	runtime.GC()
	debug.FreeOSMemory()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb)
			return kb << 10
		}
	}
	t.Skip("no VmRSS")
	return 0
}

// TestOpenOfASmallLogAllocatesLittle: a broker start opens every replica's
// log, thousands of them mostly idle, and recovery scans each one's tail.
// The scan's buffer is sized to the bytes it scans: a whole buffer per log
// (1 MiB, allocated and cleared) was most of the CPU a start took.
func TestOpenOfASmallLogAllocatesLittle(t *testing.T) {
	for _, clean := range []bool{true, false} {
		dir := filepath.Join(t.TempDir(), "log")
		l, err := Open(dir, testOptions(DiskFS{}))
		if err != nil {
			t.Fatal(err)
		}
		for s := range 2 {
			if _, err := l.Append(testutil.SeqBatch(t, int64(s), 3, 0, 100, []byte("k")), 0); err != nil {
				t.Fatal(err)
			}
		}
		if clean {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			crashClose(l) // a kill -9: no checkpoint covers the batches
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		l, err = Open(dir, testOptions(DiskFS{}))
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.LogEndOffset(); got != 6 {
			t.Fatalf("clean=%v: reopened log ends at %d, want 6", clean, got)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<10 {
			t.Fatalf("clean=%v: opening a log of two small batches allocated %d bytes; want under 256 KiB", clean, alloc)
		}
	}
}
