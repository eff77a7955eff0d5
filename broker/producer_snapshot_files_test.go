package broker

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/hotlog"
)

// smallSegments is a log config whose segments hold a dozen batches or so.
func smallSegments() hotlog.Config {
	cfg := hotlog.DefaultConfig()
	cfg.SegmentBytes = 1 << 10
	return cfg
}

// snapshotFiles lists the offsets of the snapshot files in dir, and fails
// on a temporary file left behind.
func snapshotFiles(t *testing.T, dir string) []int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), snapshotSuffix+".tmp") {
			t.Fatalf("temporary file %s left behind", e.Name())
		}
		if off, ok := parseSnapshotName(e.Name()); ok {
			offs = append(offs, off)
		}
	}
	return offs
}

// sealedEnds lists the ends of the log's sealed segments.
// settled waits until every segment a roll sealed is fsynced and sealed to
// the outside: the log's flusher does it in the background.
func settled(t *testing.T, l *hotlog.Log) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		changed := l.Changed() // the flusher signals here once it sealed them
		segs := l.Segments()
		if len(segs) < 2 || segs[len(segs)-2].Sealed {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("rolled segments not sealed within 10s: %+v", segs)
		}
	}
}

func sealedEnds(l *hotlog.Log) []int64 {
	var ends []int64
	for _, s := range l.Segments() {
		if s.Sealed {
			ends = append(ends, s.LastOffset+1)
		}
	}
	return ends
}

// readSnapshot decodes the snapshot file at off.
func readSnapshot(t *testing.T, dir string, off int64) (*producerSnapshot, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, snapshotName(off)))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := decodeProducerSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	return snap, data
}

// loaded is the state a snapshot loads as.
func loaded(snap *producerSnapshot) map[int64]stateEntry {
	s := newProducerState()
	s.mu.Lock()
	s.loadLocked(snap)
	s.mu.Unlock()
	return dumpState(s)
}

// history writes n batches of a few producers (and plain batches between)
// through the leader and returns the leader's state and epoch after each
// write, by log end.
type history struct {
	states map[int64]map[int64]stateEntry
	epochs map[int64]int32
	seqs   map[int64]int32
}

func newHistory() *history {
	return &history{states: map[int64]map[int64]stateEntry{0: {}}, epochs: map[int64]int32{}, seqs: map[int64]int32{}}
}

func (h *history) write(t *testing.T, ld *leader, ids []int64, n int) {
	t.Helper()
	for i := range n {
		id := ids[i%len(ids)]
		k := 1 + i%3
		ld.accept(idemBatch(t, id, 0, h.seqs[id], k))
		h.seqs[id] += int32(k)
		h.note(ld)
		if i%7 == 0 {
			ld.accept(mustBatch(t, "plain"))
			h.note(ld)
		}
	}
	settled(t, ld.l)
}

func (h *history) note(ld *leader) {
	h.states[ld.l.LogEndOffset()] = dumpState(ld.s)
	h.epochs[ld.l.LogEndOffset()] = ld.epoch
}

// TestProducerSnapshotAtRoll: every sealed segment gets a snapshot file
// named by its end, holding the state the leader had when its log ended
// there and the epoch of the batch before; computed again from scratch,
// the files come out byte for byte the same.
func TestProducerSnapshotAtRoll(t *testing.T) {
	ld := newLeader(t, smallSegments())
	ps := ld.s.files(ld.l)
	h := newHistory()
	h.write(t, ld, []int64{1, 2, 3, 4}, 150)
	ld.epoch = 3 // a new leader continues the log
	h.write(t, ld, []int64{2, 5}, 150)
	ends := sealedEnds(ld.l)
	if len(ends) < 10 {
		t.Fatalf("only %d sealed segments", len(ends))
	}
	if got := snapshotFiles(t, ld.l.Dir()); len(got) != 0 {
		t.Fatalf("snapshots %v before any roll was snapshotted", got)
	}
	if err := ps.snapshotSealed(); err != nil {
		t.Fatal(err)
	}
	if got := snapshotFiles(t, ld.l.Dir()); !slices.Equal(got, ends) {
		t.Fatalf("snapshots at %v, sealed segments end at %v", got, ends)
	}
	files := map[int64][]byte{}
	for _, x := range ends {
		snap, data := readSnapshot(t, ld.l.Dir(), x)
		files[x] = data
		want, ok := h.states[x]
		if !ok {
			t.Fatalf("no state noted at %d", x)
		}
		if got := loaded(snap); !reflect.DeepEqual(got, want) {
			t.Fatalf("snapshot at %d:\n got %+v\nwant %+v", x, got, want)
		}
		if snap.lastEpoch != h.epochs[x] || snap.partial {
			t.Fatalf("snapshot at %d names epoch %d (partial %v), the batch before it has %d", x, snap.lastEpoch, snap.partial, h.epochs[x])
		}
	}

	// The same log gives the same files, however they are computed.
	ps.mu.Lock()
	for _, x := range ends {
		if err := ps.dropLocked(x); err != nil {
			t.Fatal(err)
		}
	}
	ps.mu.Unlock()
	if err := ps.snapshotSealed(); err != nil {
		t.Fatal(err)
	}
	for _, x := range ends {
		if _, data := readSnapshot(t, ld.l.Dir(), x); !bytes.Equal(data, files[x]) {
			t.Fatalf("snapshot at %d computed again differs", x)
		}
	}
}

// TestProducerRetryManySegmentsBack: a producer's batches, written many
// segments before the log end and no longer in the local log at all
// (retention removed them), are still recognised as duplicates after a
// restart: the rebuild starts from the newest snapshot, and no window of
// the log's tail decides what is remembered.
func TestProducerRetryManySegmentsBack(t *testing.T) {
	ld := newLeader(t, smallSegments())
	type sent struct{ base, last int64 }
	var early []sent
	for i := range producerBatches {
		base, last := ld.accept(idemBatch(t, 7, 0, int32(2*i), 2))
		early = append(early, sent{base, last})
	}
	h := newHistory()
	h.write(t, ld, []int64{8, 9}, 1500)
	if n := len(ld.l.Segments()); n < 40 {
		t.Fatalf("only %d segments", n)
	}
	if err := ld.s.files(ld.l).snapshotSealed(); err != nil {
		t.Fatal(err)
	}
	want := dumpState(ld.s)
	segs := ld.l.Segments()
	ld.l.SetHighWatermark(ld.l.LogEndOffset()) // retention takes only committed records
	if _, err := ld.l.DeleteSegmentsBefore(segs[len(segs)/2].BaseOffset); err != nil {
		t.Fatal(err)
	}
	if ld.l.LogStartOffset() <= early[len(early)-1].last {
		t.Fatal("producer 7's batches are still in the local log")
	}

	ld.restart()
	end := ld.l.LogEndOffset()
	for i, e := range early {
		base, last, dup, refusal := ld.send(idemBatch(t, 7, 0, int32(2*i), 2))
		if refusal != nil || !dup || base != e.base || last != e.last {
			t.Fatalf("retry of producer 7's batch %d after the restart: %d-%d dup %v refusal %v, want the duplicate of %d-%d", i, base, last, dup, refusal, e.base, e.last)
		}
	}
	if ld.l.LogEndOffset() != end {
		t.Fatal("a retry was written again")
	}
	if got := dumpState(ld.s); !reflect.DeepEqual(got, want) {
		t.Fatalf("state after the restart:\n got %+v\nwant %+v", got, want)
	}
	ld.accept(idemBatch(t, 7, 0, 2*producerBatches, 1))
}

// TestProducerSnapshotsFollowTheLog: snapshots above a truncation go with
// it; one a crash left above it, which the log reached again under a new
// leader, is recognised as stale and not used; retention keeps the newest
// at or below the log start; a damaged one is skipped and written again;
// the hot log opens with the files (and a half-written one) in its
// directory.
func TestProducerSnapshotsFollowTheLog(t *testing.T) {
	ld := newLeader(t, smallSegments())
	dir := ld.l.Dir()
	h := newHistory()
	h.write(t, ld, []int64{1, 2, 3}, 400)
	if err := ld.s.files(ld.l).snapshotSealed(); err != nil {
		t.Fatal(err)
	}
	offs := snapshotFiles(t, dir)
	if len(offs) < 12 {
		t.Fatalf("only %d snapshots", len(offs))
	}

	// A follower truncates to its new leader's log, mid-segment.
	stale := offs[len(offs)-3]
	_, staleData := readSnapshot(t, dir, stale)
	if _, err := ld.l.TruncateTo(offs[len(offs)/2] + 5); err != nil {
		t.Fatal(err)
	}
	ld.s.reset()
	leo := ld.l.LogEndOffset()
	for _, off := range snapshotFiles(t, dir) {
		if off > leo {
			t.Fatalf("snapshot at %d survived a truncation to %d", off, leo)
		}
	}
	if got := snapshotFiles(t, dir); len(got) != len(offs)/2+1 {
		t.Fatalf("snapshots %v after truncating to %d; those below were %v", got, leo, offs)
	}

	// The new leader writes other batches (of other producers: those of 1,
	// 2 and 3 past the cut are gone), past where the stale snapshot was; a
	// crash had left that snapshot behind.
	ld.epoch = 1
	h.write(t, ld, []int64{4, 5}, 300)
	if ld.l.LogEndOffset() <= stale {
		t.Fatal("the log did not grow past the stale snapshot")
	}
	want := dumpState(ld.s)
	if err := os.WriteFile(filepath.Join(dir, snapshotName(stale)), staleData, 0o644); err != nil {
		t.Fatal(err)
	}
	// A half-written snapshot too: the hot log's recovery removes it.
	tmp := snapshotName(ld.l.LogEndOffset()) + ".tmp"
	if err := os.WriteFile(filepath.Join(dir, tmp), staleData[:10], 0o644); err != nil {
		t.Fatal(err)
	}
	ld.restart()
	if r := ld.l.Recovery(); !slices.Contains(r.RemovedFiles, tmp) {
		t.Fatalf("the hot log's recovery removed %v, not the temporary %s", r.RemovedFiles, tmp)
	}
	if err := ld.s.rebuild(ld.l); err != nil {
		t.Fatal(err)
	}
	if got := dumpState(ld.s); !reflect.DeepEqual(got, want) {
		t.Fatalf("state rebuilt beside a stale snapshot:\n got %+v\nwant %+v", got, want)
	}
	if slices.Contains(snapshotFiles(t, dir), stale) {
		t.Fatal("the stale snapshot was kept")
	}

	// A damaged snapshot is passed over, deleted, and written again.
	ps := ld.s.files(ld.l)
	if err := ps.snapshotSealed(); err != nil {
		t.Fatal(err)
	}
	offs = snapshotFiles(t, dir)
	newest := offs[len(offs)-1]
	_, good := readSnapshot(t, dir, newest)
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 1
	if err := os.WriteFile(filepath.Join(dir, snapshotName(newest)), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	ld.restart()
	if err := ld.s.rebuild(ld.l); err != nil {
		t.Fatal(err)
	}
	if got := dumpState(ld.s); !reflect.DeepEqual(got, want) {
		t.Fatalf("state rebuilt beside a damaged snapshot:\n got %+v\nwant %+v", got, want)
	}
	ps = ld.s.files(ld.l)
	if err := ps.snapshotSealed(); err != nil {
		t.Fatal(err)
	}
	if _, again := readSnapshot(t, dir, newest); !bytes.Equal(again, good) {
		t.Fatal("the damaged snapshot was not written again as it was")
	}

	// Retention: below the new start only the newest at or below it stays,
	// and the state at the end is still exact.
	segs := ld.l.Segments()
	cut := segs[len(segs)/2].BaseOffset
	ld.l.SetHighWatermark(ld.l.LogEndOffset()) // retention takes only committed records
	if _, err := ld.l.DeleteSegmentsBefore(cut + 1); err != nil {
		t.Fatal(err)
	}
	if err := ps.snapshotSealed(); err != nil {
		t.Fatal(err)
	}
	start := ld.l.LogStartOffset()
	got := snapshotFiles(t, dir)
	if got[0] != start {
		t.Fatalf("after retention to %d the oldest snapshot is at %d", start, got[0])
	}
	if exact, err := ps.exactAt(); err != nil || !exact {
		t.Fatalf("after retention the snapshots give the exact state: %v, %v", exact, err)
	}

	// A reset far past the end keeps only the newest snapshot, below the
	// new start: the state is no longer exact.
	if err := ld.l.ResetTo(ld.l.LogEndOffset() + 1000); err != nil {
		t.Fatal(err)
	}
	ld.s.reset()
	kept := snapshotFiles(t, dir)
	if len(kept) != 1 || kept[0] != slices.Max(got) {
		t.Fatalf("after a reset the snapshots are %v, were %v", kept, got)
	}
	if exact, err := ps.exactAt(); err != nil || exact {
		t.Fatalf("after a reset the snapshots still claim the exact state: %v, %v", exact, err)
	}
	// The state continues from that snapshot, the best there is.
	if err := ld.s.rebuild(ld.l); err != nil {
		t.Fatal(err)
	}
	snap, _ := readSnapshot(t, dir, kept[0])
	if got := dumpState(ld.s); !reflect.DeepEqual(got, loaded(snap)) {
		t.Fatalf("state after a reset:\n got %+v\nwant %+v", got, loaded(snap))
	}
	// What is computed from there on lacks the history between that
	// snapshot and the log start, and says so.
	h.write(t, ld, []int64{6}, 60)
	if err := ps.snapshotSealed(); err != nil {
		t.Fatal(err)
	}
	after := snapshotFiles(t, dir)
	if len(after) < 2 {
		t.Fatalf("no snapshot written after the reset: %v", after)
	}
	for _, off := range after[1:] {
		if snap, _ := readSnapshot(t, dir, off); !snap.partial {
			t.Fatalf("the snapshot at %d, computed after a reset, is not marked partial", off)
		}
	}
	if exact, err := ps.exactAt(); err != nil || exact {
		t.Fatalf("partial snapshots claim the exact state: %v, %v", exact, err)
	}
}

// copyChunks appends to follower, with its state, what leader has past
// the follower's end, in chunks that span several segments of it.
func copyChunks(t *testing.T, leader, follower *hotlog.Log, s *producerState) {
	t.Helper()
	for off := follower.LogEndOffset(); off < leader.LogEndOffset(); {
		var chunk []byte
		for len(chunk) < 4<<10 && off < leader.LogEndOffset() {
			rr, err := leader.Read(off, 1<<10, leader.LogEndOffset())
			if err != nil {
				t.Fatal(err)
			}
			chunk, off = append(chunk, rr.Data...), rr.NextOffset
		}
		if err := s.appendReplica(follower, chunk, NoReadFrom); err != nil {
			t.Fatal(err)
		}
	}
}

// TestProducerSnapshotsFromRecordedState: the leader, recording each
// batch it appends, and a follower, recording chunks that cross several
// segment bases at once, keep the state as of every base their appends
// crossed; the snapshots of the sealed segments are written from those,
// and are byte for byte the files computed again from the log alone.
func TestProducerSnapshotsFromRecordedState(t *testing.T) {
	ld := newLeader(t, smallSegments())
	ld.s.attach(ld.l, quietLogger())
	fl := openTestLog(t, t.TempDir(), smallSegments())
	fs := newProducerState()
	fs.attach(fl, quietLogger())
	h := newHistory()
	replicas := []struct {
		name string
		s    *producerState
		l    *hotlog.Log
	}{{"leader", ld.s, ld.l}, {"follower", fs, fl}}
	for round := range 6 {
		if round == 3 {
			ld.epoch = 2
		}
		h.write(t, ld, []int64{1, 2, 3}, 30)
		copyChunks(t, ld.l, fl, fs)
		for _, r := range replicas {
			settled(t, r.l)
			files := snapshotFiles(t, r.l.Dir())
			r.s.mu.Lock()
			var kept []int64
			for _, snap := range r.s.mu.captured {
				kept = append(kept, snap.offset)
			}
			r.s.mu.Unlock()
			for _, x := range sealedEnds(r.l) {
				if !slices.Contains(files, x) && !slices.Contains(kept, x) {
					t.Fatalf("round %d, %s: no state kept for the segment ending at %d (kept %v, files %v)", round, r.name, x, kept, files)
				}
			}
			if err := r.s.snapshotSealed(); err != nil {
				t.Fatal(err)
			}
			if got, want := snapshotFiles(t, r.l.Dir()), sealedEnds(r.l); !slices.Equal(got, want) {
				t.Fatalf("round %d, %s: snapshots at %v, sealed segments end at %v", round, r.name, got, want)
			}
			r.s.mu.Lock()
			for _, snap := range r.s.mu.captured {
				if slices.Contains(sealedEnds(r.l), snap.offset) {
					t.Errorf("round %d, %s: the state kept at %d was not used for its snapshot", round, r.name, snap.offset)
				}
			}
			r.s.mu.Unlock()
		}
	}
	for _, r := range replicas {
		ps := r.s.snaps.Load()
		ends := sealedEnds(r.l)
		recorded := map[int64][]byte{}
		for _, x := range ends {
			snap, data := readSnapshot(t, r.l.Dir(), x)
			recorded[x] = data
			if want := h.states[x]; !reflect.DeepEqual(loaded(snap), want) {
				t.Fatalf("%s: snapshot at %d:\n got %+v\nwant %+v", r.name, x, loaded(snap), want)
			}
		}
		ps.mu.Lock()
		for _, x := range ends {
			if err := ps.dropLocked(x); err != nil {
				t.Fatal(err)
			}
		}
		ps.mu.Unlock()
		if err := ps.snapshotSealed(); err != nil { // nothing kept now: read from the log
			t.Fatal(err)
		}
		for _, x := range ends {
			if _, data := readSnapshot(t, r.l.Dir(), x); !bytes.Equal(data, recorded[x]) {
				t.Fatalf("%s: the snapshot at %d computed from the log differs from the one recorded", r.name, x)
			}
		}
	}
}
