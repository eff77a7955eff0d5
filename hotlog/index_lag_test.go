package hotlog

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/strata-log/strata/hotlog/memfs"
	"github.com/strata-log/strata/internal/testutil"
)

// indexOpensFS counts opens of index files.
type indexOpensFS struct {
	FS
	opens atomic.Int64
}

func (c *indexOpensFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if filepath.Ext(name) == indexSuffix || filepath.Ext(name) == timeIndexSuffix {
		c.opens.Add(1)
	}
	return c.FS.OpenFile(name, flag, perm)
}

// A flush round writes the active segment's index entries indexLag at a
// time, not on every round: one small batch per fsync used to open and
// close both index files each time. A crash loses only unwritten hints:
// recovery rebuilds them and every acknowledged record reads back.
func TestFlushRoundsWriteIndexEntriesInGroups(t *testing.T) {
	mem := memfs.New()
	fsys := &indexOpensFS{FS: mem}
	opts := testOptions(fsys)
	opts.SegmentBytes = 1 << 20
	l := mustOpen(t, "/log", opts)
	const batches = 128
	for i := range batches { // each batch is past IndexIntervalBytes: one entry each
		if _, err := l.Append(testutil.SeqBatch(t, int64(i), 1, 0, opts.IndexIntervalBytes, []byte("k")), 0); err != nil {
			t.Fatal(err)
		}
	}
	// Each write of the two indexes opens two files: a write per round
	// would be 2 * batches.
	if n := fsys.opens.Load(); n > batches/4 {
		t.Fatalf("%d index file opens for %d fsynced batches, want at most %d", n, batches, batches/4)
	}
	mem.Crash(nil)
	l = mustOpen(t, "/log", testOptions(mem))
	defer l.Close()
	if l.LogEndOffset() != batches {
		t.Fatalf("log end %d after the crash, want %d", l.LogEndOffset(), batches)
	}
	checkSeq(t, readRecords(t, l, 0, batches), 0, 0)
	if off, _, found, err := l.OffsetForTimestamp(0); err != nil || !found || off != 0 {
		t.Fatalf("offset for time 0 after recovery: %d, found %v, err %v; want 0", off, found, err)
	}
}
