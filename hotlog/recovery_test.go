package hotlog

import (
	"errors"
	"github.com/strata-log/strata/hotlog/memfs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
)

// fillLog appends batches of 3 records until the log has n batches and
// returns the size of one batch.
func fillLog(t *testing.T, l *Log, n int) int {
	t.Helper()
	size := 0
	for i := range n {
		b := testutil.SeqBatch(t, int64(i*3), 3, int64(i), 120, []byte("k"))
		size = len(b)
		if _, err := l.Append(b, 0); err != nil {
			t.Fatal(err)
		}
	}
	return size
}

func activePath(dir string, l *Log) string {
	segs := l.Segments()
	return filepath.Join(dir, segmentName(segs[len(segs)-1].BaseOffset, logSuffix))
}

// TestRecoveryRepairsTornTails damages the files of a closed log in each way a
// crash or a bad disk can, reopens it, and checks what survives, in the
// manner of etcd's WAL repair tests.
func TestRecoveryRepairsTornTails(t *testing.T) {
	const batches = 12 // all in one segment: 12 * ~500 bytes < 8 KiB
	cases := []struct {
		name string
		// damage changes the files; it gets the directory, the active log file
		// and the size of one batch.
		damage func(t *testing.T, dir, path string, bsize int)
		// wantBatches survive; wantTruncated says whether bytes were cut.
		wantBatches   int
		wantTruncated bool
		// wantRebuilt: the indexes lacked entries or disagreed with the log.
		// After a crash the active segment's index files are short (a
		// flush round writes entries indexLag at a time), so they are
		// rebuilt from the log.
		wantRebuilt bool
		// crash stops the log as a killed process would, with no final fsync
		// or checkpoint, so recovery must check every batch it has not seen
		// fsynced.
		crash bool
	}{
		{"clean", func(*testing.T, string, string, int) {}, batches, false, false, false},
		{"cut mid last batch", func(t *testing.T, _, p string, bs int) {
			truncateFile(t, p, int64(bs*batches-bs/2))
		}, batches - 1, true, false, false},
		{"cut inside the header", func(t *testing.T, _, p string, bs int) {
			truncateFile(t, p, int64(bs*(batches-1)+7))
		}, batches - 1, true, false, false},
		{"flipped byte in the last batch", func(t *testing.T, _, p string, bs int) {
			flipByte(t, p, int64(bs*batches-10))
		}, batches - 1, true, false, false},
		{"flipped byte in a middle batch after a crash", func(t *testing.T, _, p string, bs int) {
			flipByte(t, p, int64(bs*5+bs/2))
		}, 5, true, true, true},
		{"zeroed page in the middle after a crash", func(t *testing.T, _, p string, bs int) {
			zeroRange(t, p, int64(bs*3), 512)
		}, 3, true, true, true},
		{"cut mid last batch after a crash", func(t *testing.T, _, p string, bs int) {
			truncateFile(t, p, int64(bs*batches-bs/2))
		}, batches - 1, true, true, true},
		{"garbage appended", func(t *testing.T, _, p string, _ int) {
			appendBytes(t, p, []byte("this is not a batch, just noise after a crash"))
		}, batches, true, false, false},
		{"zeros appended", func(t *testing.T, _, p string, _ int) {
			appendBytes(t, p, make([]byte, 4096))
		}, batches, true, false, false},
		{"batch length points past the end", func(t *testing.T, _, p string, bs int) {
			b := testutil.SeqBatch(t, 0, 1, 0, 10, []byte("k"))
			b.SetBaseOffset(int64(batches * 3))
			appendBytes(t, p, b[:len(b)-3])
		}, batches, true, false, false},
		{"index missing", func(t *testing.T, d, p string, _ int) {
			os.Remove(strings.TrimSuffix(p, logSuffix) + indexSuffix)
		}, batches, false, true, false},
		{"time index missing", func(t *testing.T, d, p string, _ int) {
			os.Remove(strings.TrimSuffix(p, logSuffix) + timeIndexSuffix)
		}, batches, false, true, false},
		{"index is noise", func(t *testing.T, d, p string, _ int) {
			noise := make([]byte, 64)
			for i := range noise {
				noise[i] = byte(i*37 + 11)
			}
			os.WriteFile(strings.TrimSuffix(p, logSuffix)+indexSuffix, noise, 0o644)
		}, batches, false, true, false},
		{"index points past the log", func(t *testing.T, d, p string, bs int) {
			idx := strings.TrimSuffix(p, logSuffix) + indexSuffix
			e := make([]byte, offsetEntryWidth)
			putOffsetEntry(e, offsetEntry{rel: 1000, pos: 1 << 20})
			appendBytes(t, idx, e)
		}, batches, false, true, false},
		{"torn index entry", func(t *testing.T, d, p string, _ int) {
			appendBytes(t, strings.TrimSuffix(p, logSuffix)+indexSuffix, []byte{0, 0, 1})
		}, batches, false, false, false},
		{"temp checkpoint left behind", func(t *testing.T, d, _ string, _ int) {
			os.WriteFile(filepath.Join(d, stateFile+tmpSuffix), []byte("half"), 0o644)
		}, batches, false, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions(DiskFS{})
			opts.SegmentBytes = 1 << 20
			l := mustOpen(t, dir, opts)
			bsize := fillLog(t, l, batches)
			path := activePath(dir, l)
			if c.crash {
				crashClose(l)
			} else if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			c.damage(t, dir, path, bsize)

			l = mustOpen(t, dir, opts)
			defer l.Close()
			r := l.Recovery()
			if got := l.LogEndOffset(); got != int64(c.wantBatches*3) {
				t.Fatalf("LEO %d, want %d (report %+v)", got, c.wantBatches*3, r)
			}
			if (r.TruncatedBytes > 0) != c.wantTruncated || (c.wantTruncated && r.TruncateReason == "") {
				t.Fatalf("truncated %d bytes (%q), want truncation %v", r.TruncatedBytes, r.TruncateReason, c.wantTruncated)
			}
			if (len(r.RebuiltIndexes) > 0) != c.wantRebuilt {
				t.Fatalf("rebuilt %v, want rebuilt %v", r.RebuiltIndexes, c.wantRebuilt)
			}
			if st, _ := os.Stat(path); st.Size() != int64(c.wantBatches*bsize) {
				t.Fatalf("log file is %d bytes, want %d", st.Size(), c.wantBatches*bsize)
			}
			checkSeq(t, readRecords(t, l, 0, l.LogEndOffset()), 0, 0)
			// The repaired log takes appends at its new end and keeps them.
			if _, err := l.Append(testutil.SeqBatch(t, int64(c.wantBatches*3), 3, 0, 120, []byte("k")), 0); err != nil {
				t.Fatal(err)
			}
			checkSeq(t, readRecords(t, l, 0, l.LogEndOffset()), 0, 0)
			if files, _ := filepath.Glob(filepath.Join(dir, "*"+tmpSuffix)); len(files) != 0 {
				t.Fatalf("temp files left: %v", files)
			}
		})
	}
}

func TestSealedSegmentDamageIsReported(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testOptions(DiskFS{}))
	fillLog(t, l, 40)
	first := l.Segments()[0]
	l.Close()
	flipByte(t, first.Path, first.Size-5)
	_, err := Open(dir, testOptions(DiskFS{}))
	wantErr(t, err, ErrCorrupt)
	if !strings.Contains(err.Error(), first.Path) {
		t.Fatalf("error %q does not name the damaged segment", err)
	}
}

func TestCorruptCheckpointIsReported(t *testing.T) {
	for _, name := range []string{stateFile, epochFile} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			l := mustOpen(t, dir, testOptions(DiskFS{}))
			fillLog(t, l, 3)
			l.Close()
			flipByte(t, filepath.Join(dir, name), 8)
			_, err := Open(dir, testOptions(DiskFS{}))
			wantErr(t, err, ErrCorrupt)
		})
	}
}

func TestCheckpointCodecs(t *testing.T) {
	s := logState{logStart: 42, highWatermark: 99, recoveryPoint: 120}
	if got, err := decodeState(encodeState(s)); err != nil || got != s {
		t.Fatalf("state round trip: %+v %v", got, err)
	}
	e := []EpochEntry{{0, 0}, {3, 10}, {4, 10}}
	got, err := decodeEpochs(encodeEpochs(e))
	if err != nil || len(got) != 3 || got[2] != e[2] {
		t.Fatalf("epochs round trip: %v %v", got, err)
	}
	for _, bad := range [][]byte{nil, []byte("SLST"), encodeState(s)[:20], append(encodeState(s), 0)} {
		if _, err := decodeState(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeState(%x) = %v, want ErrCorrupt", bad, err)
		}
	}
	outOfOrder := encodeEpochs([]EpochEntry{{3, 10}, {2, 20}})
	if _, err := decodeEpochs(outOfOrder); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("out-of-order epochs: %v", err)
	}
}

func FuzzCheckpointDecode(f *testing.F) {
	f.Add(encodeState(logState{1, 2, 3}))
	f.Add(encodeEpochs([]EpochEntry{{1, 0}, {2, 5}}))
	f.Add([]byte("SLEP\x00\x01\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if s, err := decodeState(data); err == nil {
			if again, err := decodeState(encodeState(s)); err != nil || again != s {
				t.Fatalf("state %+v does not round trip", s)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeState error %v is not ErrCorrupt", err)
		}
		if e, err := decodeEpochs(data); err == nil {
			if again, err := decodeEpochs(encodeEpochs(e)); err != nil || len(again) != len(e) {
				t.Fatalf("epochs %v do not round trip", e)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeEpochs error %v is not ErrCorrupt", err)
		}
	})
}

// TestCrashKeepsAcknowledgedAppends appends with FlushAlways on a file system
// that loses every unsynced byte (and keeps a random, possibly torn part of
// them) at each crash, across rolls and reopens: every acknowledged record
// must come back, in order, and the log must stay valid.
func TestCrashKeepsAcknowledgedAppends(t *testing.T) {
	fsys := memfs.New()
	dir := "/log"
	rng := rand.New(rand.NewPCG(1, 2))
	acked := 0 // records acknowledged so far; the log holds seq == offset
	for round := range 30 {
		l := mustOpen(t, dir, testOptions(fsys))
		if got := l.LogEndOffset(); got < int64(acked) {
			t.Fatalf("round %d: LEO %d after crash, but %d records were acknowledged", round, got, acked)
		}
		checkSeq(t, readRecords(t, l, 0, l.LogEndOffset()), 0, 0)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for w := range 3 {
			wg.Add(1)
			n := 5 + rng.IntN(10)
			go func() {
				defer wg.Done()
				for range n {
					mu.Lock() // seq must equal offset, so assign both under one lock
					b := testutil.SeqBatch(t, l.LogEndOffset(), 1+w, 0, 200, []byte("k"))
					_, err := l.Append(b, 0)
					mu.Unlock()
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		acked = int(l.LogEndOffset())
		// Unacknowledged, unsynced tail: written with no fsync before the crash.
		l.Reconfigure(withFlush(l.Config(), FlushNever))
		for range rng.IntN(4) {
			if _, err := l.Append(testutil.SeqBatch(t, l.LogEndOffset(), 2, 0, 200, []byte("k")), 0); err != nil {
				t.Fatal(err)
			}
		}
		fsys.Crash(func(path string, synced, current []byte) []byte {
			if len(current) <= len(synced) || rng.IntN(2) == 0 {
				return synced
			}
			// Keep a random prefix of the unsynced bytes, maybe with a bit
			// flipped: a torn write.
			keep := append([]byte(nil), current[:len(synced)+rng.IntN(len(current)-len(synced)+1)]...)
			if len(keep) > len(synced) && rng.IntN(3) == 0 {
				keep[len(synced)+rng.IntN(len(keep)-len(synced))] ^= 0x40
			}
			return keep
		})
	}
}

func withFlush(c Config, p FlushPolicy) Config { c.FlushPolicy = p; return c }

func TestFlushNeverLosesOnlyTheUnsyncedTail(t *testing.T) {
	fsys := memfs.New()
	opts := testOptions(fsys)
	opts.FlushPolicy = FlushNever
	l := mustOpen(t, "/log", opts)
	fillLog(t, l, 40) // several rolls: sealed segments are fsynced, in the background
	segs := l.Segments()
	sealedEnd := segs[len(segs)-1].BaseOffset
	testutil.WaitFor(t, 10*time.Second, "the rolled segments fsynced", func() bool {
		segs := l.Segments()
		return segs[len(segs)-2].Sealed
	})
	if l.DurableOffset() != sealedEnd {
		t.Fatalf("durable offset %d, want the end of the sealed segments %d", l.DurableOffset(), sealedEnd)
	}
	fsys.Crash(nil)
	l = mustOpen(t, "/log", opts)
	defer l.Close()
	if l.LogEndOffset() != sealedEnd {
		t.Fatalf("LEO after crash %d, want %d", l.LogEndOffset(), sealedEnd)
	}
	checkSeq(t, readRecords(t, l, 0, l.LogEndOffset()), 0, 0)
}

func TestFlushIntervalSyncsInTheBackground(t *testing.T) {
	fsys := memfs.New()
	opts := testOptions(fsys)
	opts.FlushPolicy = FlushInterval
	opts.FlushInterval = 5 * 1e6 // 5ms
	l := mustOpen(t, "/log", opts)
	if _, err := l.Append(testutil.SeqBatch(t, 0, 3, 0, 10, []byte("k")), 0); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*1e9, "the interval flush", func() bool { return l.DurableOffset() == 3 })
	fsys.Crash(nil)
	l = mustOpen(t, "/log", opts)
	defer l.Close()
	if l.LogEndOffset() != 3 {
		t.Fatalf("LEO %d after crash, want 3", l.LogEndOffset())
	}
}

// With FlushAlways, concurrent appenders share fsyncs.
func TestGroupCommitSharesFsyncs(t *testing.T) {
	// Slow fsyncs make appenders pile up behind each round, as on a disk.
	fsys := newGatedFS()
	fsys.delay = time.Millisecond
	opts := testOptions(fsys)
	opts.SegmentBytes = 64 << 20
	l := mustOpen(t, "/log", opts)
	defer l.Close()
	before := fsys.SyncCount()
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := l.Append(testutil.SeqBatch(t, 0, 1, 0, 100, []byte("k")), 0); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	syncs := fsys.SyncCount() - before
	if syncs >= writers*each {
		t.Fatalf("%d fsyncs for %d appends: no group commit", syncs, writers*each)
	}
	if l.DurableOffset() != writers*each {
		t.Fatalf("durable offset %d, want %d", l.DurableOffset(), writers*each)
	}
	t.Logf("%d appends by %d writers took %d fsyncs", writers*each, writers, syncs)
}

func TestFailedFsyncIsSticky(t *testing.T) {
	fsys := memfs.New()
	l := mustOpen(t, "/log", testOptions(fsys))
	if _, err := l.Append(testutil.SeqBatch(t, 0, 1, 0, 10, []byte("k")), 0); err != nil {
		t.Fatal(err)
	}
	broken := errors.New("injected EIO")
	fsys.FailSync = func(p string) error {
		if strings.HasSuffix(p, logSuffix) {
			return broken
		}
		return nil
	}
	_, err := l.Append(testutil.SeqBatch(t, 1, 1, 0, 10, []byte("k")), 0)
	wantErr(t, err, ErrLogFailed)
	wantErr(t, err, broken)
	fsys.FailSync = nil // the disk "recovers": the log must still refuse
	_, err = l.Append(testutil.SeqBatch(t, 1, 1, 0, 10, []byte("k")), 0)
	wantErr(t, err, ErrLogFailed)
	_, err = l.AppendReplica(replicaBatch(t, 2, 1, 0))
	wantErr(t, err, ErrLogFailed)
	l.Close()

	// Reopening runs recovery and the log works again; the failed append was
	// never acknowledged, so it may or may not be there.
	fsys.Crash(nil)
	l = mustOpen(t, "/log", testOptions(fsys))
	defer l.Close()
	if l.LogEndOffset() < 1 {
		t.Fatalf("acknowledged record lost: LEO %d", l.LogEndOffset())
	}
	if _, err := l.Append(testutil.SeqBatch(t, l.LogEndOffset(), 1, 0, 10, []byte("k")), 0); err != nil {
		t.Fatal(err)
	}
}

func TestFailedWriteIsSticky(t *testing.T) {
	fsys := memfs.New()
	opts := testOptions(fsys)
	opts.FlushPolicy = FlushNever
	l := mustOpen(t, "/log", opts)
	defer l.Close()
	fsys.FailWrite = func(p string) error { return errors.New("injected ENOSPC") }
	_, err := l.Append(testutil.SeqBatch(t, 0, 1, 0, 10, []byte("k")), 0)
	wantErr(t, err, ErrLogFailed)
	fsys.FailWrite = nil
	_, err = l.Append(testutil.SeqBatch(t, 0, 1, 0, 10, []byte("k")), 0)
	wantErr(t, err, ErrLogFailed)
	if l.LogEndOffset() != 0 {
		t.Fatalf("LEO %d after failed writes", l.LogEndOffset())
	}
}

// A crash after retention checkpointed the new log start but before it
// removed the files: the next open removes them.
func TestRetentionFinishesAfterCrash(t *testing.T) {
	fsys := memfs.New()
	l := mustOpen(t, "/log", testOptions(fsys))
	fillLog(t, l, 40)
	l.SetHighWatermark(l.LogEndOffset())
	segs := l.Segments()
	fsys.FailRemove = func(string) error { return errors.New("injected crash before remove") }
	if _, err := l.DeleteSegmentsBefore(segs[2].BaseOffset); err == nil {
		t.Fatal("want the injected remove failure")
	}
	fsys.FailRemove = nil
	fsys.Crash(nil)
	l = mustOpen(t, "/log", testOptions(fsys))
	defer l.Close()
	if l.LogStartOffset() != segs[2].BaseOffset || len(l.Segments()) != len(segs)-2 {
		t.Fatalf("start %d with %d segments, want %d with %d", l.LogStartOffset(), len(l.Segments()), segs[2].BaseOffset, len(segs)-2)
	}
	if len(l.Recovery().RemovedFiles) < 2 {
		t.Fatalf("recovery did not report the removed segments: %+v", l.Recovery())
	}
	checkSeq(t, readRecords(t, l, l.LogStartOffset(), l.LogEndOffset()), l.LogStartOffset(), int(l.LogStartOffset()))
}

// A crash during a roll, after the new segment file was created but before
// its directory entry was durable, leaves the sealed segment as the last one:
// it becomes the active segment again and nothing acknowledged is lost.
func TestCrashDuringRoll(t *testing.T) {
	fsys := memfs.New()
	l := mustOpen(t, "/log", testOptions(fsys))
	fillLog(t, l, 14)
	segs := l.Segments()
	fsys.FailSyncDir = func(string) error { return errors.New("injected crash before the directory sync") }
	wantErr(t, l.Roll(), ErrLogFailed)
	fsys.FailSyncDir = nil
	fsys.Crash(nil)
	l = mustOpen(t, "/log", testOptions(fsys))
	defer l.Close()
	if got := l.Segments(); len(got) != len(segs) || got[len(got)-1].BaseOffset != segs[len(segs)-1].BaseOffset {
		t.Fatalf("segments after crash %+v, want the %d from before the roll", got, len(segs))
	}
	if l.LogEndOffset() != 42 {
		t.Fatalf("LEO %d, want 42", l.LogEndOffset())
	}
	if _, err := l.Append(testutil.SeqBatch(t, 42, 3, 0, 120, []byte("k")), 0); err != nil {
		t.Fatal(err)
	}
	checkSeq(t, readRecords(t, l, 0, l.LogEndOffset()), 0, 0)
}

// crashClose stops a log as a killed process would: the flusher stops and the
// files close with no final fsync and no checkpoint.
func crashClose(l *Log) {
	l.flush.stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.closed = true
	for _, s := range l.mu.segments {
		s.close()
	}
}

func zeroRange(t *testing.T, path string, at int64, n int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	clear(data[at : at+int64(n)])
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func truncateFile(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[at] ^= 0xa5
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// A crash in the middle of ResetTo, after the new start was checkpointed
// but before the old segments were removed, is finished by the next open.
func TestCrashDuringReset(t *testing.T) {
	fsys := memfs.New()
	l := mustOpen(t, "/log", testOptions(fsys))
	fillLog(t, l, 20)
	fsys.FailRemove = func(string) error { return errors.New("injected crash before remove") }
	l.ResetTo(500) // the removes fail: the old files stay
	fsys.FailRemove = nil
	fsys.Crash(nil)
	l = mustOpen(t, "/log", testOptions(fsys))
	defer l.Close()
	if l.LogStartOffset() != 500 || l.LogEndOffset() != 500 || len(l.Segments()) != 1 {
		t.Fatalf("after crash: start %d end %d segments %+v", l.LogStartOffset(), l.LogEndOffset(), l.Segments())
	}
}

// A retention pass whose checkpoint cannot be written changes nothing: the
// log start stays where it was, in memory and on disk, and every segment
// is still readable.
func TestRetentionFailedCheckpointChangesNothing(t *testing.T) {
	fsys := memfs.New()
	l := mustOpen(t, "/log", testOptions(fsys))
	defer l.Close()
	fillLog(t, l, 40)
	l.SetHighWatermark(l.LogEndOffset())
	segs := l.Segments()
	fsys.FailWrite = func(p string) error {
		if strings.Contains(p, stateFile) {
			return errors.New("injected ENOSPC")
		}
		return nil
	}
	if _, err := l.DeleteSegmentsBefore(segs[2].BaseOffset); err == nil {
		t.Fatal("want the injected checkpoint failure")
	}
	fsys.FailWrite = nil
	if l.LogStartOffset() != 0 || len(l.Segments()) != len(segs) {
		t.Fatalf("after a failed retention: start %d with %d segments, want 0 with %d", l.LogStartOffset(), len(l.Segments()), len(segs))
	}
	checkSeq(t, readRecords(t, l, 0, l.LogEndOffset()), 0, 0)
}

// Truncation rewrites the state checkpoint before it cuts: a follower that
// truncates from 120 to 60, appends a new leader's records at 60.. and then
// crashes must not come back with its old high watermark, which would count
// the new, unacknowledged records as committed.
func TestTruncateRewritesCheckpoint(t *testing.T) {
	fsys := memfs.New()
	l := mustOpen(t, "/log", testOptions(fsys))
	fillLog(t, l, 40)
	l.SetHighWatermark(l.LogEndOffset())
	if err := l.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(60) // a new leader's answer: committed below 60 only
	if _, err := l.TruncateTo(60); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendReplica(seqBatchAt(t, 60, 30, 1)); err != nil {
		t.Fatal(err)
	}
	fsys.Crash(nil)
	l = mustOpen(t, "/log", testOptions(fsys))
	defer l.Close()
	if hw := l.HighWatermark(); hw > 60 {
		t.Fatalf("after truncation to 60 and a crash the high watermark is %d", hw)
	}
}

// seqBatchAt is a batch of n records with sequence numbers from first, its
// offsets assigned from first and its leader epoch set, as a leader would
// send it to a follower.
func seqBatchAt(t *testing.T, first, n int, epoch int32) []byte {
	b := testutil.SeqBatch(t, int64(first), n, 0, 120, []byte("k"))
	b.SetBaseOffset(int64(first))
	b.SetLeaderEpoch(epoch)
	return b
}

// A batch whose length field was damaged after it was written is an error
// to read, not an empty answer: a reader asking again would spin forever.
func TestReadDamagedLengthIsCorrupt(t *testing.T) {
	fsys := memfs.New()
	l := mustOpen(t, "/log", testOptions(fsys))
	defer l.Close()
	fillLog(t, l, 3)
	path := activePath("/log", l)
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0x7f, 0xff, 0xff, 0xff}, 8); err != nil { // the first batch's length
		t.Fatal(err)
	}
	f.Close()
	_, err = l.Read(0, 1<<20, l.LogEndOffset())
	wantErr(t, err, ErrCorrupt)
}

// TestRecoveryOnAFullDisk: the process died with a torn append at the log's
// end, as an append that ran out of space leaves one, and starts again on a
// disk that is still full. Recovery cuts the torn batch (a truncate needs no
// space) and opens although it cannot rewrite its state checkpoint, which
// stays as it was and leaves no temp file behind; every acknowledged batch
// reads back. Once the disk has room, appends and checkpoints work again.
func TestRecoveryOnAFullDisk(t *testing.T) {
	fsys := memfs.New()
	opts := testOptions(fsys)
	l := mustOpen(t, "/log", opts)
	fillLog(t, l, 12) // FlushAlways: acknowledged is durable
	acked := l.LogEndOffset()
	l.Reconfigure(withFlush(l.Config(), FlushNever))
	if _, err := l.Append(testutil.SeqBatch(t, int64(int(acked)), 3, 0, 120, []byte("k")), 0); err != nil {
		t.Fatal(err)
	}
	fsys.Crash(func(path string, synced, current []byte) []byte {
		if len(current) > len(synced)+1 {
			return current[:len(synced)+(len(current)-len(synced))/2] // half the batch
		}
		return synced
	})
	state := fsys.ReadFile("/log/" + stateFile)

	full := func(string) error { return syscall.ENOSPC }
	fsys.FailWrite = full
	l, err := Open("/log", opts)
	if err != nil {
		t.Fatalf("open on a full disk: %v", err)
	}
	if l.LogEndOffset() != acked {
		t.Fatalf("log end %d after recovery, want %d (the torn batch cut)", l.LogEndOffset(), acked)
	}
	if r := l.Recovery(); r.TruncatedBytes == 0 {
		t.Fatalf("recovery %+v cut nothing; the torn batch should go", r)
	}
	checkSeq(t, readRecords(t, l, 0, acked), 0, 0)
	if got := fsys.ReadFile("/log/" + stateFile); !sameBytes(got, state) {
		t.Fatal("the state checkpoint changed on a full disk")
	}
	names, err := fsys.ReadDir("/log")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, tmpSuffix) {
			t.Fatalf("%s left behind by a failed write", n)
		}
	}
	if err := l.Checkpoint(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("checkpoint on a full disk: %v, want ENOSPC", err)
	}

	fsys.FailWrite = nil
	if _, err := l.Append(testutil.SeqBatch(t, int64(int(acked)), 3, 0, 120, []byte("k")), 0); err != nil {
		t.Fatalf("append once the disk has room: %v", err)
	}
	if err := l.Checkpoint(); err != nil {
		t.Fatalf("checkpoint once the disk has room: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, "/log", opts)
	defer l.Close()
	checkSeq(t, readRecords(t, l, 0, l.LogEndOffset()), 0, 0)
	if l.LogEndOffset() != acked+3 {
		t.Fatalf("log end %d, want %d", l.LogEndOffset(), acked+3)
	}
}
