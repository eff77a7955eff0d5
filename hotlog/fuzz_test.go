package hotlog

import (
	"github.com/strata-log/strata/hotlog/memfs"
	"github.com/strata-log/strata/internal/testutil"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-log/strata/record"
)

// FuzzRecoverSegment opens a log whose only segment and index hold arbitrary
// bytes. Recovery must not panic, must keep only whole valid batches that
// start at or after the segment's base and the end of the batch before
// (gaps are a compacted log's), and the log must then take appends.
func FuzzRecoverSegment(f *testing.F) {
	var valid []byte
	for i := range 4 {
		b := testutil.SeqBatch(f, int64(i*2), 2, int64(i), 30, []byte("k"))
		b.SetBaseOffset(int64(i * 2))
		valid = append(valid, b...)
	}
	f.Add(valid, []byte(nil))
	f.Add(valid[:len(valid)-9], []byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(append(append([]byte(nil), valid...), 0xde, 0xad), []byte{0, 0, 0, 2, 0, 0, 0, 40})
	f.Fuzz(func(t *testing.T, logBytes, indexBytes []byte) {
		fsys := memfs.New()
		writeMemFile(t, fsys, filepath.Join("/log", segmentName(0, logSuffix)), logBytes)
		writeMemFile(t, fsys, filepath.Join("/log", segmentName(0, indexSuffix)), indexBytes)
		fsys.SyncDir("/log")
		l, err := Open("/log", testOptions(fsys))
		if err != nil {
			t.Fatalf("open of a damaged active segment must repair, not fail: %v", err)
		}
		defer l.Close()
		kept := fsys.ReadFile(filepath.Join("/log", segmentName(0, logSuffix)))
		if len(kept) > len(logBytes) || string(kept) != string(logBytes[:len(kept)]) {
			t.Fatalf("recovery kept %d bytes that are not a prefix of the %d given", len(kept), len(logBytes))
		}
		expect := int64(0)
		for rest := kept; len(rest) > 0; {
			b, next, err := record.Next(rest)
			if err != nil || b.BaseOffset() < expect {
				t.Fatalf("kept bytes hold an invalid or misplaced batch: %v", err)
			}
			expect, rest = b.NextOffset(), next
		}
		if l.LogEndOffset() != expect {
			t.Fatalf("LEO %d, the kept batches end at %d", l.LogEndOffset(), expect)
		}
		if _, err := l.Append(testutil.SeqBatch(t, 0, 1, 0, 10, []byte("k")), 0); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
	})
}

func writeMemFile(t *testing.T, fsys *memfs.FS, path string, data []byte) {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}
