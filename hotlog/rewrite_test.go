package hotlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/strata-log/strata/hotlog/memfs"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
)

// keepEven is a rewrite as the cleaner makes one: it keeps the records
// whose sequence number is even, at their offsets; a batch left with none
// becomes an empty batch over its range.
func keepEven(_ SegmentInfo, batches Batches, emit func(record.Batch) error) error {
	for b, err := range batches {
		if err != nil {
			return err
		}
		recs, err := b.Records()
		if err != nil {
			return err
		}
		opts := record.DefaultBatchOptions()
		opts.BaseOffset, opts.LeaderEpoch = b.BaseOffset(), b.LeaderEpoch()
		bld := record.NewBuilder(opts)
		for _, r := range recs {
			if seqOf(r)%2 == 0 {
				bld.AddAt(int32(r.Offset-b.BaseOffset()), r)
			}
		}
		var out record.Batch
		switch {
		case bld.Len() == len(recs):
			out = b
		case bld.Len() == 0:
			out, err = record.EmptyBatch(opts, b.LastOffsetDelta(), b.MaxTimestamp())
		default:
			bld.SetLastOffsetDelta(b.LastOffsetDelta())
			out, err = bld.Build()
		}
		if err != nil {
			return err
		}
		if err := emit(out); err != nil {
			return err
		}
	}
	return nil
}

// rewriteLog writes n records (seq = offset) in batches of 1 to 3, over
// several segments, and returns the log with its sealed segments fsynced.
func rewriteLog(t *testing.T, fsys FS, dir string, n int) *Log {
	t.Helper()
	l := mustOpen(t, dir, testOptions(fsys))
	for off := 0; off < n; {
		k := min(1+off%3, n-off)
		if _, err := l.Append(testutil.SeqBatch(t, int64(off), k, int64(off), 200, []byte("k")), 0); err != nil {
			t.Fatal(err)
		}
		off += k
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	return l
}

// sealedBases are the bases of the log's sealed segments.
func sealedBases(l *Log) []int64 {
	var bases []int64
	for _, s := range l.Segments() {
		if s.Sealed {
			bases = append(bases, s.BaseOffset)
		}
	}
	return bases
}

// expectEven is what keepEven leaves: below activeBase the even sequence
// numbers, from it on every one.
func expectEven(n int, activeBase int64) []int {
	var want []int
	for i := range n {
		if int64(i) >= activeBase || i%2 == 0 {
			want = append(want, i)
		}
	}
	return want
}

func seqsOf(t *testing.T, recs []record.Record) []int {
	t.Helper()
	out := make([]int, len(recs))
	for i, r := range recs {
		if r.Offset != int64(seqOf(r)) {
			t.Fatalf("record %d at offset %d", seqOf(r), r.Offset)
		}
		out[i] = seqOf(r)
	}
	return out
}

// TestRewriteSegments: a rewrite of the sealed segments keeps every
// surviving record at its offset, leaves the active segment and the log's
// offsets alone, survives a reopen, and leaves no staging file behind.
func TestRewriteSegments(t *testing.T) {
	fsys := memfs.New()
	const n = 300
	l := rewriteLog(t, fsys, "/log", n)
	bases := sealedBases(l)
	if len(bases) < 3 {
		t.Fatalf("%d sealed segments, want several", len(bases))
	}
	active, leo, before := l.ActiveBaseOffset(), l.LogEndOffset(), l.Size()
	res, err := l.RewriteSegments(bases, keepEven)
	if err != nil {
		t.Fatal(err)
	}
	if res.Segments != len(bases) || res.BytesOut >= res.BytesIn || l.Size() >= before {
		t.Fatalf("result %+v, size %d then %d", res, before, l.Size())
	}
	want := expectEven(n, active)
	if got := seqsOf(t, readRecords(t, l, 0, leo)); !slices.Equal(got, want) {
		t.Fatalf("after the rewrite: %v\nwant %v", got, want)
	}
	if l.LogEndOffset() != leo || l.LogStartOffset() != 0 || l.ActiveBaseOffset() != active {
		t.Fatal("the rewrite moved the log's offsets")
	}
	// A read at an offset whose record went lands on the batch holding it.
	res2, err := l.Read(1, 1, leo)
	if err != nil || len(res2.Data) == 0 || record.Batch(res2.Data).BaseOffset() > 1 {
		t.Fatalf("read at a removed offset: %v", err)
	}
	// Appends go on.
	if _, err := l.Append(testutil.SeqBatch(t, leo, 1, 0, 200, []byte("k")), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	checkNoStaging(t, fsys, "/log")
	l = mustOpen(t, "/log", testOptions(fsys))
	defer l.Close()
	if len(l.Recovery().RebuiltIndexes) != 0 {
		t.Fatalf("indexes rebuilt after a clean rewrite: %+v", l.Recovery())
	}
	if got := seqsOf(t, readRecords(t, l, 0, leo)); !slices.Equal(got, want) {
		t.Fatalf("after reopen: %v", got)
	}
}

func checkNoStaging(t *testing.T, fsys FS, dir string) {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, cleanedSuffix) || strings.HasPrefix(name, swapFile) {
			t.Fatalf("%s left in %s", name, dir)
		}
	}
}

// stepFS is a memfs that takes a copy of itself after every change a
// rewrite makes (create, write, fsync, rename, remove, directory fsync)
// while armed: each copy is the disk a crash at that step leaves.
type stepFS struct {
	*memfs.FS
	armed bool
	snaps []*memfs.FS
}

func (s *stepFS) step() {
	if s.armed {
		s.snaps = append(s.snaps, s.FS.Fork())
	}
}

func (s *stepFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		s.step()
	}
	return stepFile{f, s}, nil
}

func (s *stepFS) Remove(name string) error {
	defer s.step()
	return s.FS.Remove(name)
}

func (s *stepFS) Rename(oldpath, newpath string) error {
	defer s.step()
	return s.FS.Rename(oldpath, newpath)
}

func (s *stepFS) SyncDir(dir string) error {
	defer s.step()
	return s.FS.SyncDir(dir)
}

type stepFile struct {
	File
	fs *stepFS
}

func (f stepFile) WriteAt(p []byte, off int64) (int, error) {
	defer f.fs.step()
	return f.File.WriteAt(p, off)
}

func (f stepFile) Sync() error {
	defer f.fs.step()
	return f.File.Sync()
}

func (f stepFile) Truncate(size int64) error {
	defer f.fs.step()
	return f.File.Truncate(size)
}

// TestRewriteCrashAtEveryStep: a crash after any single step of a rewrite,
// whether the process dies with its page cache intact (kill -9) or the
// machine loses everything unsynced (power cut), leaves after reopening
// either the whole old log or the whole new one, never a mix, never
// neither, and no staging file.
func TestRewriteCrashAtEveryStep(t *testing.T) {
	fsys := &stepFS{FS: memfs.New()}
	const n = 200
	l := rewriteLog(t, fsys, "/log", n)
	bases := sealedBases(l)
	active, leo := l.ActiveBaseOffset(), l.LogEndOffset()
	old := make([]int, n)
	for i := range old {
		old[i] = i
	}
	fresh := expectEven(n, active)
	fsys.armed = true
	if _, err := l.RewriteSegments(bases, keepEven); err != nil {
		t.Fatal(err)
	}
	fsys.armed = false
	l.Close()
	if len(fsys.snaps) < 10 {
		t.Fatalf("only %d steps recorded", len(fsys.snaps))
	}
	sawOld, sawNew := false, false
	for i, snap := range fsys.snaps {
		for _, power := range []bool{false, true} {
			disk := snap.Fork()
			if power {
				disk.Crash(nil)
			}
			l, err := Open("/log", testOptions(disk))
			if err != nil {
				t.Fatalf("step %d (power cut %v): open: %v", i, power, err)
			}
			got := seqsOf(t, readRecords(t, l, 0, l.LogEndOffset()))
			switch {
			case l.LogEndOffset() != leo:
				t.Fatalf("step %d (power cut %v): log end %d, want %d", i, power, l.LogEndOffset(), leo)
			case slices.Equal(got, old):
				sawOld = true
			case slices.Equal(got, fresh):
				sawNew = true
			default:
				t.Fatalf("step %d (power cut %v): neither the old log nor the new: %v (recovery %+v)", i, power, got, l.Recovery())
			}
			l.Close()
			checkNoStaging(t, disk, "/log")
		}
	}
	if !sawOld || !sawNew {
		t.Fatalf("crash points saw the old log %v, the new %v: both must occur", sawOld, sawNew)
	}
}

// TestRewriteFailureChangesNothing: a failed fsync while staging, or a
// rewrite that would lose offsets, leaves the old segments and no staging
// file, and the log keeps working.
func TestRewriteFailureChangesNothing(t *testing.T) {
	fsys := memfs.New()
	const n = 200
	l := rewriteLog(t, fsys, "/log", n)
	defer l.Close()
	bases := sealedBases(l)
	leo := l.LogEndOffset()
	all := seqsOf(t, readRecords(t, l, 0, leo))

	boom := errors.New("disk says no")
	fsys.FailSync = func(path string) error {
		if strings.HasSuffix(path, cleanedSuffix) {
			return boom
		}
		return nil
	}
	if _, err := l.RewriteSegments(bases, keepEven); !errors.Is(err, boom) {
		t.Fatalf("failed fsync: %v", err)
	}
	fsys.FailSync = nil
	dropLast := func(info SegmentInfo, batches Batches, emit func(record.Batch) error) error {
		for b, err := range batches {
			if err != nil {
				return err
			}
			if b.LastOffset() == info.LastOffset {
				return nil // the segment's last batch goes: offsets lost
			}
			if err := emit(b); err != nil {
				return err
			}
		}
		return nil
	}
	if _, err := l.RewriteSegments(bases, dropLast); err == nil {
		t.Fatal("a rewrite losing offsets was accepted")
	}
	checkNoStaging(t, fsys, "/log")
	if got := seqsOf(t, readRecords(t, l, 0, leo)); !slices.Equal(got, all) {
		t.Fatal("a failed rewrite changed the log")
	}
	if _, err := l.Append(testutil.SeqBatch(t, leo, 1, 0, 200, []byte("k")), 0); err != nil {
		t.Fatalf("append after a failed rewrite: %v", err)
	}
}

// TestRewriteAfterRetention: segments removed by retention while their
// rewrite is staged are not brought back: the rewrite reports it and
// leaves no file.
func TestRewriteAfterRetention(t *testing.T) {
	fsys := memfs.New()
	l := rewriteLog(t, fsys, "/log", 200)
	defer l.Close()
	bases := sealedBases(l)
	racing := func(info SegmentInfo, batches Batches, emit func(record.Batch) error) error {
		if info.BaseOffset == bases[len(bases)-1] {
			if _, err := l.DeleteSegmentsBefore(bases[1]); err != nil {
				return err
			}
		}
		return keepEven(info, batches, emit)
	}
	if _, err := l.RewriteSegments(bases, racing); !errors.Is(err, ErrSegmentsChanged) {
		t.Fatalf("got %v, want ErrSegmentsChanged", err)
	}
	checkNoStaging(t, fsys, "/log")
	if l.Segments()[0].BaseOffset != bases[1] {
		t.Fatal("retention's deletion was undone")
	}
}

// TestRewriteReaderInFlight: a reader holding an old segment open (an
// upload to the cold tier) reads the old bytes to the end after the swap.
func TestRewriteReaderInFlight(t *testing.T) {
	for _, disk := range []string{"memfs", "disk"} {
		t.Run(disk, func(t *testing.T) {
			var fsys FS = memfs.New()
			dir := "/log"
			if disk == "disk" {
				fsys, dir = DiskFS{}, t.TempDir()
			}
			l := rewriteLog(t, fsys, dir, 200)
			defer l.Close()
			bases := sealedBases(l)
			info := l.Segments()[0]
			oldBytes := make([]byte, info.Size)
			r, err := l.OpenSegment(bases[0])
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := r.ReadAt(oldBytes[:10], 0); err != nil {
				t.Fatal(err)
			}
			if _, err := l.RewriteSegments(bases, keepEven); err != nil {
				t.Fatal(err)
			}
			if _, err := r.ReadAt(oldBytes, 0); err != nil {
				t.Fatalf("reading the old segment after the swap: %v", err)
			}
			var seqs []int
			for rest := oldBytes; len(rest) > 0; {
				b, next, err := record.Next(rest)
				if err != nil {
					t.Fatal(err)
				}
				recs, _ := b.Records()
				for _, rec := range recs {
					seqs = append(seqs, seqOf(rec))
				}
				rest = next
			}
			if len(seqs) != int(info.LastOffset+1) {
				t.Fatalf("the old segment read %d records, it had %d", len(seqs), info.LastOffset+1)
			}
			if filepath.Base(info.Path) != segmentName(bases[0], logSuffix) {
				t.Fatal(info.Path)
			}
		})
	}
}

// TestRewriteUnderReadsAndAppends: readers and an appender run while
// segments are rewritten again and again; every read returns whole, valid
// batches whose records sit at their own offsets (old or rewritten, never
// torn), and the appends all land.
func TestRewriteUnderReadsAndAppends(t *testing.T) {
	fsys := memfs.New()
	l := rewriteLog(t, fsys, "/log", 300)
	defer l.Close()
	done := make(chan struct{})
	errs := make(chan error, 8)
	var readers sync.WaitGroup
	for range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				for off := int64(0); off < 300; {
					res, err := l.Read(off, 700, 300)
					if err != nil {
						errs <- err
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
								errs <- fmt.Errorf("record %d at offset %d", seqOf(r), r.Offset)
								return
							}
						}
						rest = next
					}
					off = res.NextOffset
				}
			}
		}()
	}
	leo := l.LogEndOffset()
	for i := range 5 {
		if _, err := l.Append(testutil.SeqBatch(t, leo, 2, 0, 200, []byte("k")), 0); err != nil {
			t.Fatal(err)
		}
		leo += 2
		if _, err := l.RewriteSegments(sealedBases(l), keepEven); err != nil {
			t.Fatalf("rewrite %d: %v", i, err)
		}
	}
	close(done)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("log end %d, want %d", l.LogEndOffset(), leo)
	}
}
