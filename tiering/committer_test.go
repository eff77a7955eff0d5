package tiering

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/tiering/objstore"
)

var testRef = PartitionRef{Topic: "events", TopicID: "0123456789abcdef0123456789abcdef", Partition: 3}

// uploadAll uploads every pending segment of l and returns how many.
func uploadAll(t *testing.T, c *Committer, l *hotlog.Log) int {
	t.Helper()
	n := 0
	for {
		ok, err := UploadNext(testContext(t), c, l, committedEnd(l), map[string]string{"retention.ms": "-1"}, 4)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return n
		}
		n++
	}
}

func TestUploadCommitsEverySealedSegment(t *testing.T) {
	store := objstore.NewMemory()
	l := localLog(t, t.TempDir())
	fill(t, l, 200, 3, 1000)
	c, err := NewCommitter(testContext(t), store, testRef, 1)
	if err != nil {
		t.Fatal(err)
	}
	sealed := 0
	for _, s := range l.Segments() {
		if s.Sealed {
			sealed++
		}
	}
	if got := uploadAll(t, c, l); got != sealed || sealed < 3 {
		t.Fatalf("uploaded %d of %d sealed segments", got, sealed)
	}
	h := c.Head()
	segs := l.Segments()
	if h.StartOffset() != 0 || h.EndOffset() != segs[len(segs)-1].BaseOffset || h.LeaderEpoch != 1 || h.Partitions != 4 || h.Config["retention.ms"] != "-1" {
		t.Fatalf("head %+v", h)
	}
	if len(PendingUploads(l, h, committedEnd(l))) != 0 {
		t.Fatal("pending uploads after uploading everything")
	}
	// What is in the bucket is what the manifest says, read back by a new
	// reader of the head.
	again, etag, err := LoadHead(testContext(t), store, testRef)
	if err != nil || etag == "" || again.Generation != h.Generation || len(again.Tail) != sealed {
		t.Fatalf("reloaded head %+v, %q, %v", again, etag, err)
	}
	for i, s := range again.Tail {
		info, err := store.Stat(testContext(t), s.Key)
		if err != nil || info.Size != s.Size || !strings.HasPrefix(s.Key, testRef.SegmentPrefix()) {
			t.Fatalf("segment %d %+v: object %+v, %v", i, s, info, err)
		}
		if s.BaseOffset != segs[i].BaseOffset || s.LastOffset != segs[i].LastOffset {
			t.Fatalf("segment %d covers %d..%d, local %d..%d", i, s.BaseOffset, s.LastOffset, segs[i].BaseOffset, segs[i].LastOffset)
		}
	}
}

func TestNewerEpochFencesTheOldLeader(t *testing.T) {
	store := objstore.NewMemory()
	l := localLog(t, t.TempDir())
	fill(t, l, 100, 3, 0)
	ctx := testContext(t)
	old := newTestCommitter(t, store, 1)
	if ok, err := UploadNext(ctx, old, l, committedEnd(l), nil, 1); !ok || err != nil {
		t.Fatalf("first upload: %v %v", ok, err)
	}
	next := newTestCommitter(t, store, 2)
	if ok, err := UploadNext(ctx, next, l, committedEnd(l), nil, 1); !ok || err != nil {
		t.Fatalf("new leader's upload: %v %v", ok, err)
	}
	before := next.Head().Generation
	_, err := UploadNext(ctx, old, l, committedEnd(l), nil, 1)
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("old leader's upload after the new one committed: %v", err)
	}
	if _, err := NewCommitter(ctx, store, testRef, 1); !errors.Is(err, ErrFenced) {
		t.Fatalf("a committer in the old epoch: %v", err)
	}
	h, _, _ := LoadHead(ctx, store, testRef)
	if h.Generation != before || h.LeaderEpoch != 2 {
		t.Fatalf("the fenced leader changed the head: %+v", h)
	}
	// The fenced upload's object was deleted on the way out: the bucket
	// holds exactly what the manifest names.
	if objs := listKeys(t, store, testRef.SegmentPrefix()); len(objs) != len(h.Tail) {
		t.Fatalf("%d segment objects for %d listed segments", len(objs), len(h.Tail))
	}
}

func TestCollectOrphans(t *testing.T) {
	store := objstore.NewMemory()
	ctx := testContext(t)
	c, _ := NewCommitter(ctx, store, testRef, 1)
	named := SegmentRef{Key: testRef.SegmentPrefix() + "named.seg", LastOffset: 9}
	store.Put(ctx, named.Key, []byte("x"), objstore.WriteOptions{})
	if err := c.Append(ctx, named, nil, 1); err != nil {
		t.Fatal(err)
	}
	stray := testRef.SegmentPrefix() + "stray.seg"
	store.Put(ctx, stray, []byte("x"), objstore.WriteOptions{})
	strayPart := testRef.PartPrefix() + "stray.part"
	store.Put(ctx, strayPart, []byte("x"), objstore.WriteOptions{})
	if deleted, err := CollectOrphans(ctx, c, time.Hour, time.Now()); err != nil || len(deleted) != 0 {
		t.Fatalf("within the grace period: deleted %v, %v", deleted, err)
	}
	deleted, err := CollectOrphans(ctx, c, time.Hour, time.Now().Add(2*time.Hour))
	if err != nil || len(deleted) != 2 {
		t.Fatalf("after the grace period: deleted %v, %v", deleted, err)
	}
	if keys := listKeys(t, store, testRef.SegmentPrefix()); len(keys) != 1 || keys[0] != named.Key {
		t.Fatalf("left %v, want only the named segment", keys)
	}
}

func listKeys(t *testing.T, store objstore.Reader, prefix string) []string {
	var keys []string
	if err := store.List(testContext(t), prefix, func(o objstore.ObjectInfo) error { keys = append(keys, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestAppendIsIdempotentAfterALostAnswer(t *testing.T) {
	store := objstore.NewMemory()
	ctx := testContext(t)
	a, _ := NewCommitter(ctx, store, testRef, 1)
	b, _ := NewCommitter(ctx, store, testRef, 1) // holds the old version
	seg := SegmentRef{Key: testRef.SegmentPrefix() + "x.seg", BaseOffset: 0, LastOffset: 9, Size: 100}
	if err := a.Append(ctx, seg, nil, 1); err != nil {
		t.Fatal(err)
	}
	// b retries the same segment as if a's answer had been lost.
	if err := b.Append(ctx, seg, nil, 1); err != nil {
		t.Fatalf("retry of a landed append: %v", err)
	}
	if h := b.Head(); len(h.Tail) != 1 {
		t.Fatalf("the segment is listed %d times", len(h.Tail))
	}
	other := SegmentRef{Key: testRef.SegmentPrefix() + "y.seg", BaseOffset: 5, LastOffset: 20}
	if err := b.Append(ctx, other, nil, 1); err == nil {
		t.Fatal("an overlapping segment was committed")
	}
}

func TestClosedPartsAndTrim(t *testing.T) {
	store := objstore.NewMemory()
	ctx := testContext(t)
	c, _ := NewCommitter(ctx, store, testRef, 1)
	const n = partSegments*2 + 10
	for i := range int64(n) {
		seg := SegmentRef{Key: fmt.Sprintf("%s%05d.seg", testRef.SegmentPrefix(), i), BaseOffset: i * 10, LastOffset: i*10 + 9, MaxTs: i, Size: 1}
		if _, err := store.Put(ctx, seg.Key, []byte{1}, objstore.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Append(ctx, seg, nil, 1); err != nil {
			t.Fatal(err)
		}
	}
	h := c.Head()
	if len(h.Parts) != 2 || len(h.Tail) != 10 || h.StartOffset() != 0 || h.EndOffset() != n*10 {
		t.Fatalf("head: %d parts, %d in the tail, %d..%d", len(h.Parts), len(h.Tail), h.StartOffset(), h.EndOffset())
	}
	if segs, bytes := h.Stats(); segs != n || bytes != n {
		t.Fatalf("stats %d segments %d bytes", segs, bytes)
	}
	// Trim into the middle of the first part, then past it.
	removed, parts, err := c.TrimBefore(ctx, 5000)
	if err != nil || len(removed) != 500 || len(parts) != 0 || c.Head().StartOffset() != 5000 || c.Head().Parts[0].Skip != 500 {
		t.Fatalf("trim to 5000: %d removed, parts %v, start %d, %v", len(removed), parts, c.Head().StartOffset(), err)
	}
	removed, parts, err = c.TrimBefore(ctx, 12345)
	if err != nil || len(parts) != 1 || c.Head().StartOffset() != 12340 || len(c.Head().Parts) != 1 {
		t.Fatalf("trim to 12345: %d removed, parts %v, start %d, %v", len(removed), parts, c.Head().StartOffset(), err)
	}
	// A fresh committer reads parts back from the bucket.
	fresh := newTestCommitter(t, store, 1)
	count := 0
	next := int64(12340)
	if err := fresh.Segments(ctx, func(s SegmentRef) bool {
		if s.BaseOffset != next {
			t.Fatalf("segment %d after %d", s.BaseOffset, next)
		}
		next = s.LastOffset + 1
		count++
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if count != n-1234 {
		t.Fatalf("%d live segments, want %d", count, n-1234)
	}
}

func TestRetentionCut(t *testing.T) {
	store := objstore.NewMemory()
	ctx := testContext(t)
	c, _ := NewCommitter(ctx, store, testRef, 1)
	now := time.UnixMilli(1_000_000)
	for i := range int64(10) {
		// Segment i: newest record at 1000*i ms, 100 bytes.
		seg := SegmentRef{Key: fmt.Sprintf("%s%d.seg", testRef.SegmentPrefix(), i), BaseOffset: i * 10, LastOffset: i*10 + 9, MaxTs: i * 1000, Size: 100}
		store.Put(ctx, seg.Key, make([]byte, 100), objstore.WriteOptions{})
		if err := c.Append(ctx, seg, nil, 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		r     Retention
		local int64
		want  int64
	}{
		{"forever", Retention{-1, -1}, 0, -1},
		{"by age", Retention{Ms: now.UnixMilli() - 3500}, 0, 40},             // segments 0..3 are older
		{"by size", Retention{Ms: -1, Bytes: 650}, 0, 40},                    // 1000 bytes, keep at most 650
		{"by size with local bytes", Retention{Ms: -1, Bytes: 650}, 200, 60}, // 1200 in all
		{"newest kept", Retention{Ms: 0, Bytes: -1}, 0, 100},
	} {
		if tc.r.Bytes == 0 {
			tc.r.Bytes = -1
		}
		got, err := RetentionCut(ctx, c, tc.r, tc.local, now)
		if err != nil || got != tc.want {
			t.Errorf("%s: cut %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	removed, err := ApplyRetention(ctx, c, 40)
	if err != nil || len(removed) != 4 {
		t.Fatalf("applied: %d removed, %v", len(removed), err)
	}
	for _, s := range removed {
		if _, err := store.Stat(ctx, s.Key); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("%s still stored: %v", s.Key, err)
		}
	}
}

func TestGapBetweenColdAndLocalIsRefused(t *testing.T) {
	store := objstore.NewMemory()
	ctx := testContext(t)
	c, _ := NewCommitter(ctx, store, testRef, 1)
	if err := c.Append(ctx, SegmentRef{Key: "k", BaseOffset: 0, LastOffset: 9}, nil, 1); err != nil {
		t.Fatal(err)
	}
	l := localLog(t, t.TempDir())
	if err := l.ResetTo(50); err != nil {
		t.Fatal(err)
	}
	fill(t, l, 100, 3, 0)
	if _, err := UploadNext(ctx, c, l, committedEnd(l), nil, 1); !errors.Is(err, ErrGap) {
		t.Fatalf("upload over a gap: %v", err)
	}
}

func TestFindTopic(t *testing.T) {
	store := objstore.NewMemory()
	ctx := testContext(t)
	older := PartitionRef{Topic: "history", TopicID: strings.Repeat("a", 32)}
	newer := PartitionRef{Topic: "history", TopicID: strings.Repeat("b", 32)}
	for i, ref := range []PartitionRef{older, newer, {Topic: "history", TopicID: newer.TopicID, Partition: 2}} {
		c, _ := NewCommitter(ctx, store, ref, 1)
		if err := c.Append(ctx, SegmentRef{Key: fmt.Sprint(i), LastOffset: 9}, map[string]string{"id": ref.TopicID}, 3); err != nil {
			t.Fatal(err)
		}
		// Let the clock move on, so the later manifests are newer.
		for t0 := time.Now(); !time.Now().After(t0); {
		}
	}
	latest, err := FindTopic(ctx, store, "history", "")
	if err != nil || latest.TopicID != newer.TopicID || len(latest.Heads) != 2 || latest.Config["id"] != newer.TopicID {
		t.Fatalf("latest: %+v, %v", latest, err)
	}
	got, err := FindTopic(ctx, store, "history", older.TopicID)
	if err != nil || got.TopicID != older.TopicID || got.Partitions != 3 || len(got.Heads) != 1 {
		t.Fatalf("by id: %+v, %v", got, err)
	}
	if _, err := FindTopic(ctx, store, "nothing", ""); !errors.Is(err, ErrNoColdTopic) {
		t.Fatalf("missing topic: %v", err)
	}
	if _, err := FindTopic(ctx, store, "history", strings.Repeat("c", 32)); !errors.Is(err, ErrNoColdTopic) {
		t.Fatalf("missing id: %v", err)
	}
}
