package tiering

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering/objstore"
)

// snapLog is a hotlog that offers a producer snapshot for each segment, as
// a broker's does, so that the objects carry one.
type snapLog struct{ *hotlog.Log }

func (l snapLog) ProducerSnapshot(seg hotlog.SegmentInfo) ([]byte, error) {
	return fmt.Appendf(nil, "producers as of %d", seg.LastOffset+1), nil
}

// verifyTier is a real cold tier of one partition: a hotlog filled with
// batches, its sealed segments uploaded and committed by UploadNext, as a
// leader does.
type verifyTier struct {
	store   objstore.Bucket
	ref     PartitionRef
	com     *Committer
	segs    []SegmentRef // as committed, oldest first
	batches int64
}

// buildTier uploads count batches of 3 records (about 9 segments for 200)
// to ref's cold tier in store.
func buildTier(t *testing.T, store objstore.Bucket, ref PartitionRef, count int) *verifyTier {
	t.Helper()
	ctx := testContext(t)
	l := localLog(t, t.TempDir())
	fill(t, l, count, 3, 1_700_000_000_000)
	com, err := NewCommitter(ctx, store, ref, 1)
	if err != nil {
		t.Fatal(err)
	}
	for {
		ok, err := UploadNext(ctx, com, snapLog{l}, committedEnd(l), map[string]string{"retention.ms": "-1"}, 4)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
	}
	vt := &verifyTier{store: store, ref: ref, com: com}
	if err := com.Segments(ctx, func(s SegmentRef) bool { vt.segs = append(vt.segs, s); return true }); err != nil {
		t.Fatal(err)
	}
	if len(vt.segs) < 3 {
		t.Fatalf("only %d segments uploaded", len(vt.segs))
	}
	vt.batches = com.Head().EndOffset() / 3
	return vt
}

func verify(t *testing.T, r objstore.Reader, opts VerifyOptions) *VerifyReport {
	t.Helper()
	rep, err := VerifyBucket(testContext(t), r, opts)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return rep
}

// wantProblem fails unless rep has a problem about key whose text holds
// every one of words.
func wantProblem(t *testing.T, rep *VerifyReport, key string, words ...string) {
	t.Helper()
	for _, p := range rep.Problems {
		if p.Key != key {
			continue
		}
		found := true
		for _, w := range words {
			found = found && strings.Contains(p.What, w)
		}
		if found {
			return
		}
	}
	t.Fatalf("no problem about %s saying %q; problems:\n%s", key, words, problemLines(rep))
}

func problemLines(rep *VerifyReport) string {
	var b strings.Builder
	for _, p := range rep.Problems {
		fmt.Fprintln(&b, "  ", p)
	}
	return b.String()
}

func wantSound(t *testing.T, rep *VerifyReport) {
	t.Helper()
	if !rep.Sound() {
		t.Fatalf("problems in a sound bucket:\n%s", problemLines(rep))
	}
}

// putHead writes h as ref's head, unconditionally: a manifest crafted by
// a test, not by a leader.
func putHead(t *testing.T, store objstore.Bucket, ref PartitionRef, h *Head) {
	t.Helper()
	data, err := EncodeHead(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(testContext(t), ref.ManifestKey(), data, objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestVerifySoundBucket: a cold tier built by the uploader, in two
// partitions of one topic and one of another, passes every check, with
// every segment, byte and batch counted and the progress reaching its
// totals.
func TestVerifySoundBucket(t *testing.T) {
	store := objstore.NewMemory()
	a := buildTier(t, store, testRef, 200)
	b := buildTier(t, store, PartitionRef{Topic: testRef.Topic, TopicID: testRef.TopicID, Partition: 0}, 120)
	c := buildTier(t, store, PartitionRef{Topic: "orders", TopicID: "fedcba9876543210fedcba9876543210", Partition: 1}, 80)
	var segs int
	var bytes int64
	for _, vt := range []*verifyTier{a, b, c} {
		for _, s := range vt.segs {
			segs++
			bytes += s.Size
		}
	}
	for _, records := range []bool{false, true} {
		var mu sync.Mutex
		var last VerifyProgress
		calls := 0
		rep := verify(t, store, VerifyOptions{Records: records, Parallel: 3, Progress: func(p VerifyProgress) {
			mu.Lock()
			defer mu.Unlock()
			if p.Bytes < last.Bytes || p.Objects < last.Objects {
				t.Errorf("progress went back: %+v after %+v", p, last)
			}
			last = p
			calls++
		}})
		wantSound(t, rep)
		if rep.Partitions != 3 || rep.Segments != segs || rep.Bytes != bytes || rep.Batches != a.batches+b.batches+c.batches || len(rep.Orphans) != 0 {
			t.Fatalf("report %+v, want 3 partitions, %d segments, %d bytes, %d batches, no orphan", rep, segs, bytes, a.batches+b.batches+c.batches)
		}
		if last.Objects != segs || last.ObjectsTotal != segs || last.Bytes != bytes || last.BytesTotal != bytes || calls < segs {
			t.Fatalf("last progress %+v after %d calls, want %d objects and %d bytes", last, calls, segs, bytes)
		}
	}
	// One topic only.
	rep := verify(t, store, VerifyOptions{Topic: "orders"})
	wantSound(t, rep)
	if rep.Partitions != 1 || rep.Segments != len(c.segs) {
		t.Fatalf("orders alone: %+v", rep)
	}
}

// TestVerifyAcceptsEveryObjectKind: the cold reader's fixture builds
// objects with compressed batches, log-append times, producer snapshots
// large and none, and in the version 1 layout, with closed parts and
// skipped segments in the manifest; all of them are sound.
func TestVerifyAcceptsEveryObjectKind(t *testing.T) {
	f := newColdFixture(t)
	spec := batchSpec{count: 6, records: 4, valueLen: 300}
	for i, codec := range []record.Compression{record.CompressionNone, record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd} {
		s := spec
		s.codec = codec
		if i == 2 {
			s.appendTime = 1_700_000_000_123
		}
		f.producers = bytes.Repeat([]byte{byte(i)}, 100*i)
		f.addSegment(s)
	}
	f.producers, f.version1 = nil, true
	f.addSegment(spec)
	f.version1 = false
	f.addSegment(spec)
	// The first three segments go into two closed parts, the first with a
	// segment expired.
	h := cloneHead(f.com.Head())
	h.Parts, h.Tail = nil, f.segs[3:]
	for seq, segs := range [][]SegmentRef{f.segs[0:2], f.segs[2:3]} {
		part := &Part{Seq: uint64(seq), Segments: segs}
		data, err := EncodePart(part)
		if err != nil {
			t.Fatal(err)
		}
		key := f.ref.newPartKey(part.Seq)
		if _, err := f.store.Put(f.ctx, key, data, objstore.WriteOptions{IfAbsent: true}); err != nil {
			t.Fatal(err)
		}
		h.Parts = append(h.Parts, partRef(key, part, 1-min(seq, 1)))
	}
	h.NextSeq, h.Generation = 2, h.Generation+1
	putHead(t, f.store, f.ref, h)
	// The expired segment's object is still there: an orphan, as it is
	// between a commit and the deletes that follow it.
	rep := verify(t, f.store, VerifyOptions{Records: true})
	wantSound(t, rep)
	if rep.Parts != 2 || rep.Segments != len(f.segs)-1 || len(rep.Orphans) != 1 || rep.Orphans[0].Key != f.segs[0].Key {
		t.Fatalf("report %+v, orphans %+v", rep, rep.Orphans)
	}

	// A closed part gone: reported, and its segments are neither checked
	// nor taken for orphans.
	if err := f.store.Delete(f.ctx, h.Parts[1].Key); err != nil {
		t.Fatal(err)
	}
	rep = verify(t, f.store, VerifyOptions{})
	wantProblem(t, rep, h.Parts[1].Key, "closed part missing")
	if len(rep.Problems) != 1 || len(rep.Orphans) != 0 || rep.Segments != len(f.segs)-2 {
		t.Fatalf("after deleting a part: %+v\n%s", rep, problemLines(rep))
	}
}

// TestVerifyFindsDamagedObjects: each kind of damage to a segment object
// of a real cold tier is one or more problems naming the object.
func TestVerifyFindsDamagedObjects(t *testing.T) {
	// flip returns a damage that inverts the byte at the position pos
	// finds in the object, given its trailer.
	flip := func(pos func(obj []byte, tr Trailer) int64) func([]byte) []byte {
		return func(obj []byte) []byte {
			tr, err := DecodeTrailer(obj, int64(len(obj)))
			if err != nil {
				t.Fatal(err)
			}
			obj[pos(obj, tr)] ^= 0xff
			return obj
		}
	}
	for _, tc := range []struct {
		name   string
		damage func(obj []byte) []byte // nil: delete the object
		words  []string
	}{
		{"deleted", nil, []string{"missing"}},
		{"byte flipped in a batch's records", flip(func(obj []byte, _ Trailer) int64 { return batchStart(t, obj, 2) + record.HeaderSize + 10 }),
			[]string{"batch at position", "crc mismatch"}},
		{"byte flipped in a batch's base offset", flip(func(obj []byte, _ Trailer) int64 { return batchStart(t, obj, 2) + 7 }),
			[]string{"starts at offset", "want"}},
		{"byte flipped in the log", flip(func(obj []byte, tr Trailer) int64 { return tr.LogLen / 2 }), []string{"log crc"}},
		{"byte flipped in the footer", flip(func(obj []byte, tr Trailer) int64 { return tr.LogLen + 5 }), []string{"footer", "crc"}},
		{"byte flipped in the producer snapshot", flip(func(obj []byte, tr Trailer) int64 { return tr.ProducersPos() + 2 }), []string{"producer snapshot", "crc"}},
		{"byte flipped in the trailer", flip(func(obj []byte, _ Trailer) int64 { return int64(len(obj)) - 20 }), []string{"trailer", "crc"}},
		{"cut short", func(obj []byte) []byte { return obj[:len(obj)-100] }, []string{"bytes, the manifest says"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vt := buildTier(t, objstore.NewMemory(), testRef, 200)
			ctx := testContext(t)
			seg := vt.segs[1]
			if tc.damage == nil {
				if err := vt.store.Delete(ctx, seg.Key); err != nil {
					t.Fatal(err)
				}
			} else {
				obj, _, err := vt.store.Get(ctx, seg.Key)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := vt.store.Put(ctx, seg.Key, tc.damage(obj), objstore.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			rep := verify(t, vt.store, VerifyOptions{})
			if rep.Sound() {
				t.Fatal("the damage went unnoticed")
			}
			wantProblem(t, rep, seg.Key, tc.words...)
			for _, p := range rep.Problems {
				if p.Key != seg.Key {
					t.Errorf("a problem about another object: %s", p)
				}
			}
			if len(rep.Orphans) != 0 {
				t.Errorf("orphans: %+v", rep.Orphans)
			}
		})
	}
}

// batchStart is the position of batch i in a segment object's log bytes.
func batchStart(t *testing.T, obj []byte, i int) int64 {
	t.Helper()
	pos := 0
	for range i {
		n, err := record.PeekSize(obj[pos:])
		if err != nil {
			t.Fatal(err)
		}
		pos += n
	}
	return int64(pos)
}

// TestVerifyFindsBadManifests: manifests crafted from the objects of a
// real cold tier, each wrong in one way.
func TestVerifyFindsBadManifests(t *testing.T) {
	for _, tc := range []struct {
		name string
		// change changes h, the head to write, and returns the key the
		// problem must name and words it must hold.
		change func(t *testing.T, vt *verifyTier, h *Head) (string, []string)
	}{
		{"overlapping segments", func(t *testing.T, vt *verifyTier, h *Head) (string, []string) {
			// The second segment uploaded again from a batch in its
			// middle: a sound object whose offsets the one before it in
			// the manifest holds already.
			again := reupload(t, vt, 1, vt.segs[1].BaseOffset+30)
			h.Tail = append(h.Tail[:2:2], append([]SegmentRef{again}, h.Tail[2:]...)...)
			return vt.ref.ManifestKey(), []string{"overlap", again.Key, "starts inside", vt.segs[1].Key}
		}},
		{"a gap", func(t *testing.T, vt *verifyTier, h *Head) (string, []string) {
			h.Tail = append(h.Tail[:1:1], h.Tail[2:]...)
			return vt.ref.ManifestKey(), []string{fmt.Sprintf("gap: offsets %d..%d are in no segment", vt.segs[1].BaseOffset, vt.segs[1].LastOffset)}
		}},
		{"uploader epochs go back", func(t *testing.T, vt *verifyTier, h *Head) (string, []string) {
			h.Tail[0].Epoch = 2
			h.Tail[0].Key = rename(t, vt, h.Tail[0].Key, 2)
			h.LeaderEpoch = 2
			return h.Tail[1].Key, []string{"uploaded in leader epoch 1 after", "epoch 2: epochs went back"}
		}},
		{"segment epoch above the head's", func(t *testing.T, vt *verifyTier, h *Head) (string, []string) {
			h.LeaderEpoch = 0
			return h.Tail[0].Key, []string{"above the head's 0"}
		}},
		{"manifest offsets not the object's", func(t *testing.T, vt *verifyTier, h *Head) (string, []string) {
			h.Tail[len(h.Tail)-1].LastOffset++
			return h.Tail[len(h.Tail)-1].Key, []string{"the trailer says offsets"}
		}},
		{"head of another partition", func(t *testing.T, vt *verifyTier, h *Head) (string, []string) {
			h.Partition = 9
			return vt.ref.ManifestKey(), []string{"partition 9", "sits under"}
		}},
		{"generation 0", func(t *testing.T, vt *verifyTier, h *Head) (string, []string) {
			h.Generation = 0
			return vt.ref.ManifestKey(), []string{"generation 0"}
		}},
		{"a segment listed twice", func(t *testing.T, vt *verifyTier, h *Head) (string, []string) {
			h.Tail = append(h.Tail, h.Tail[len(h.Tail)-1])
			return vt.ref.ManifestKey(), []string{"listed twice"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vt := buildTier(t, objstore.NewMemory(), testRef, 200)
			h := cloneHead(vt.com.Head())
			key, words := tc.change(t, vt, h)
			putHead(t, vt.store, vt.ref, h)
			rep := verify(t, vt.store, VerifyOptions{})
			wantProblem(t, rep, key, words...)
		})
	}

	// A damaged head: nothing under it can be judged.
	vt := buildTier(t, objstore.NewMemory(), testRef, 200)
	data, _, err := vt.store.Get(testContext(t), vt.ref.ManifestKey())
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	if _, err := vt.store.Put(testContext(t), vt.ref.ManifestKey(), data, objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	rep := verify(t, vt.store, VerifyOptions{})
	wantProblem(t, rep, vt.ref.ManifestKey(), "unreadable manifest head", fmt.Sprintf("its %d objects are not checked", len(vt.segs)), "crc")
	if len(rep.Problems) != 1 || len(rep.Orphans) != 0 || rep.Segments != 0 {
		t.Fatalf("report %+v\n%s", rep, problemLines(rep))
	}
}

// reupload uploads the local bytes of committed segment i again, from
// offset from on, as a new object, and returns its reference.
func reupload(t *testing.T, vt *verifyTier, i int, from int64) SegmentRef {
	t.Helper()
	ctx := testContext(t)
	seg := vt.segs[i]
	obj, _, err := vt.store.Get(ctx, seg.Key)
	if err != nil {
		t.Fatal(err)
	}
	// The object's log bytes are the local segment's (from its base on).
	log := obj[:seg.LogLen]
	// from must fall on a batch boundary: batches hold 3 records.
	from = seg.BaseOffset + (from-seg.BaseOffset)/3*3
	local := hotlog.SegmentInfo{BaseOffset: seg.BaseOffset, LastOffset: seg.LastOffset, Size: seg.LogLen, Sealed: true}
	ref, err := UploadSegment(ctx, vt.store, vt.ref, seg.Epoch, local, bytes.NewReader(log), from, seg.Epochs, []byte("producers"))
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// rename copies the object at key to a key naming epoch, as an upload in
// that epoch would have named it, and returns the new key.
func rename(t *testing.T, vt *verifyTier, key string, epoch int32) string {
	t.Helper()
	ctx := testContext(t)
	m := segmentKeyRE.FindStringSubmatch(strings.TrimPrefix(key, vt.ref.SegmentPrefix()))
	if m == nil {
		t.Fatalf("key %s", key)
	}
	to := fmt.Sprintf("%s%s-%d-%s.seg", vt.ref.SegmentPrefix(), m[1], epoch, m[3])
	obj, _, err := vt.store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vt.store.Put(ctx, to, obj, objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := vt.store.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	return to
}

// TestVerifyFindsBatchEpochsGoingBack: a segment whose batches carry
// leader epochs that go back, uploaded by the real encoder, and one whose
// batch epochs disagree with the lineage its manifest entry records.
func TestVerifyFindsBatchEpochsGoingBack(t *testing.T) {
	store := objstore.NewMemory()
	ctx := testContext(t)
	com := newTestCommitter(t, store, 5)
	var local bytes.Buffer
	for i, epoch := range []int32{3, 4, 2, 4} {
		b := testutil.SeqBatch(t, int64(i*2), 2, 1000, 50, nil)
		b.SetLeaderEpoch(epoch) // outside the CRC, as a leader stamps it
		local.Write(b)
	}
	info := hotlog.SegmentInfo{BaseOffset: 0, LastOffset: 7, Size: int64(local.Len()), Sealed: true}
	lineage := []EpochStart{{Epoch: 3, Start: 0}, {Epoch: 4, Start: 2}}
	seg, err := UploadSegment(ctx, store, testRef, 5, info, bytes.NewReader(local.Bytes()), 0, lineage, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := com.Append(ctx, seg, nil, 4); err != nil {
		t.Fatal(err)
	}
	rep := verify(t, store, VerifyOptions{})
	wantProblem(t, rep, seg.Key, "batch at offset 4 has leader epoch 2, after epoch 4 at offset 3: epochs went back")
	wantProblem(t, rep, seg.Key, "batch at offset 4 has leader epoch 2, the manifest's epoch lineage says 4")
	if len(rep.Problems) != 2 {
		t.Fatalf("problems:\n%s", problemLines(rep))
	}
}

// TestVerifyListsOrphans: objects no manifest names, under a partition
// with a manifest, under one without, and outside the layout, are listed
// with their sizes; they do not make the bucket unsound.
func TestVerifyListsOrphans(t *testing.T) {
	vt := buildTier(t, objstore.NewMemory(), testRef, 120)
	ctx := testContext(t)
	gone := PartitionRef{Topic: testRef.Topic, TopicID: "00000000000000000000000000000000", Partition: 0}
	extra := map[string]int{
		vt.ref.SegmentPrefix() + "00000000000000000000-1-feed.seg": 100, // an upload that never committed
		vt.ref.PartPrefix() + "00000000000000000007-beef.part":     20,
		gone.SegmentPrefix() + "00000000000000000000-1-aaaa.seg":   300, // a partition whose head was deleted first
		testRef.Topic + "/stray.txt":                               5,
	}
	var total int64
	for key, size := range extra {
		if _, err := vt.store.Put(ctx, key, make([]byte, size), objstore.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		total += int64(size)
	}
	rep := verify(t, vt.store, VerifyOptions{Topic: testRef.Topic})
	wantSound(t, rep)
	if len(rep.Orphans) != len(extra) || rep.OrphanBytes != total {
		t.Fatalf("orphans %+v, %d bytes; want %d of %d bytes", rep.Orphans, rep.OrphanBytes, len(extra), total)
	}
	for _, o := range rep.Orphans {
		if int64(extra[o.Key]) != o.Size || o.Why == "" {
			t.Errorf("orphan %+v", o)
		}
	}
}

// vanishingStore applies retention to the partition the moment the
// verifier opens the first segment, as a broker might while it runs.
type vanishingStore struct {
	objstore.Bucket
	once sync.Once
	trim func()
}

func (s *vanishingStore) Open(ctx context.Context, key string) (objstore.ObjectReader, error) {
	s.once.Do(s.trim)
	return s.Bucket.Open(ctx, key)
}

// TestVerifyToleratesRetentionWhileItRuns: segments that retention removes
// (manifest first, then objects) between the read of the head and of the
// objects are not problems.
func TestVerifyToleratesRetentionWhileItRuns(t *testing.T) {
	vt := buildTier(t, objstore.NewMemory(), testRef, 200)
	cut := vt.segs[2].BaseOffset
	store := &vanishingStore{Bucket: vt.store, trim: func() {
		if _, err := ApplyRetention(testContext(t), vt.com, cut); err != nil {
			t.Error(err)
		}
	}}
	rep := verify(t, store, VerifyOptions{Parallel: 1})
	wantSound(t, rep)
	if rep.Vanished != 2 || rep.Segments != len(vt.segs)-2 {
		t.Fatalf("vanished %d, checked %d of %d", rep.Vanished, rep.Segments, len(vt.segs))
	}
}

// TestListBucket: one row per partition, with what its manifest says, and
// the time range over every segment.
func TestListBucket(t *testing.T) {
	store := objstore.NewMemory()
	other := PartitionRef{Topic: "orders", TopicID: "fedcba9876543210fedcba9876543210", Partition: 0}
	a := buildTier(t, store, testRef, 200)
	b := buildTier(t, store, other, 80)
	empty := PartitionRef{Topic: "orders", TopicID: other.TopicID, Partition: 10}
	newCommitterFor(t, store, empty)
	damaged := PartitionRef{Topic: "orders", TopicID: other.TopicID, Partition: 2}
	if _, err := store.Put(testContext(t), damaged.ManifestKey(), []byte("STRATMAN nonsense"), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	rows, err := ListBucket(testContext(t), store, "")
	if err != nil {
		t.Fatal(err)
	}
	want := func(vt *verifyTier) PartitionSummary {
		s := PartitionSummary{Ref: vt.ref, Generation: vt.com.Head().Generation, LeaderEpoch: 1, Segments: len(vt.segs),
			StartOffset: 0, EndOffset: vt.segs[len(vt.segs)-1].LastOffset + 1, MinTs: vt.segs[0].MinTs, MaxTs: vt.segs[len(vt.segs)-1].MaxTs}
		for _, seg := range vt.segs {
			s.Bytes += seg.Size
		}
		return s
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows: %+v", len(rows), rows)
	}
	if rows[0] != want(a) || rows[1] != want(b) {
		t.Fatalf("rows\n%+v\n%+v\nwant\n%+v\n%+v", rows[0], rows[1], want(a), want(b))
	}
	if rows[2].Ref != damaged || rows[2].Err == nil || !strings.Contains(rows[2].Err.Error(), "manifest head") {
		t.Fatalf("damaged manifest: %+v", rows[2])
	}
	if r := rows[3]; r.Ref != empty || r.Err != nil || r.Segments != 0 || r.StartOffset != -1 || r.EndOffset != -1 || r.Generation != 1 {
		t.Fatalf("empty manifest: %+v", r)
	}
	if rows, err := ListBucket(testContext(t), store, "orders"); err != nil || len(rows) != 3 {
		t.Fatalf("orders alone: %+v, %v", rows, err)
	}
}

func newCommitterFor(t *testing.T, store objstore.Bucket, ref PartitionRef) *Committer {
	t.Helper()
	c, err := NewCommitter(testContext(t), store, ref, 1)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
