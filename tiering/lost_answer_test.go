package tiering

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strata-log/strata/tiering/objstore"
)

// errNoAnswer is a store call whose answer never came back.
var errNoAnswer = errors.New("connection reset before the store answered")

// unansweringStore is a bucket whose next writes of a manifest head land
// but answer with an error, as when the store's reply is lost on the way
// back, and whose next reads of it are refused: the faults a real store
// does not give on demand.
type unansweringStore struct {
	objstore.Bucket
	lostHeadWrites int
	refusedReads   int
}

func (s *unansweringStore) Put(ctx context.Context, key string, data []byte, opts objstore.WriteOptions) (objstore.ObjectInfo, error) {
	info, err := s.Bucket.Put(ctx, key, data, opts)
	if err == nil && key == testRef.ManifestKey() && s.lostHeadWrites > 0 {
		s.lostHeadWrites--
		return objstore.ObjectInfo{}, errNoAnswer
	}
	return info, err
}

func (s *unansweringStore) Get(ctx context.Context, key string) ([]byte, objstore.ObjectInfo, error) {
	if key == testRef.ManifestKey() && s.refusedReads > 0 {
		s.refusedReads--
		return nil, objstore.ObjectInfo{}, errNoAnswer
	}
	return s.Bucket.Get(ctx, key)
}

// checkNamedObjectsExist fails unless every segment the manifest in store
// names is there, and they cover from..end without a gap.
func checkNamedObjectsExist(t *testing.T, store objstore.Bucket, from, end int64) {
	t.Helper()
	ctx := testContext(t)
	h, _, err := LoadHead(ctx, store, testRef)
	if err != nil || h == nil {
		t.Fatalf("head %v, %v", h, err)
	}
	next := from
	err = ForEachSegment(ctx, store, h, func(s SegmentRef) bool {
		if s.BaseOffset != next {
			t.Errorf("segment %s starts at %d, want %d", s.Key, s.BaseOffset, next)
		}
		next = s.LastOffset + 1
		if _, err := store.Stat(ctx, s.Key); err != nil {
			t.Errorf("the manifest names %s, which is gone: %v", s.Key, err)
		}
		return true
	})
	if err != nil || next != end {
		t.Fatalf("the cold tier ends at %d (%v), want %d", next, err, end)
	}
}

// A commit whose answer is lost may have landed: the uploader must not
// delete the segment it names, and reading the head back tells that it did.
func TestAnUnansweredCommitKeepsItsSegment(t *testing.T) {
	store := &unansweringStore{Bucket: objstore.NewMemory()}
	l := localLog(t, t.TempDir())
	fill(t, l, 100, 3, 0)
	ctx := testContext(t)
	c := newTestCommitter(t, store, 1)
	store.lostHeadWrites = 1
	if ok, err := UploadNext(ctx, c, l, committedEnd(l), nil, 1); !ok || err != nil {
		t.Fatalf("an upload whose commit landed unanswered: %v, %v", ok, err)
	}
	first := l.Segments()[0]
	checkNamedObjectsExist(t, store, 0, first.LastOffset+1)
	if got := c.Head().EndOffset(); got != first.LastOffset+1 {
		t.Fatalf("the committer believes the cold tier ends at %d, the bucket says %d", got, first.LastOffset+1)
	}
}

// When the store stays away too, the outcome is unknown until it returns:
// the error says so, the segment stays, and the next pass finds out and
// goes on from where the bucket's head really ends.
func TestAnUnknownCommitOutcomeIsSettledByTheNextPass(t *testing.T) {
	store := &unansweringStore{Bucket: objstore.NewMemory()}
	l := localLog(t, t.TempDir())
	fill(t, l, 100, 3, 0)
	ctx := testContext(t)
	c := newTestCommitter(t, store, 1)
	store.lostHeadWrites, store.refusedReads = 1, 1
	if _, err := UploadNext(ctx, c, l, committedEnd(l), nil, 1); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("an unanswered commit with the head unreadable: %v, want ErrOutcomeUnknown", err)
	}
	store.refusedReads = 0
	checkNamedObjectsExist(t, store, 0, l.Segments()[0].LastOffset+1)
	uploadAll(t, c, l)
	segs := l.Segments()
	checkNamedObjectsExist(t, store, 0, segs[len(segs)-1].BaseOffset)
	if keys, h := listKeys(t, store, testRef.SegmentPrefix()), c.Head(); len(keys) != len(h.Tail) {
		t.Fatalf("%d segment objects for %d named: an upload was repeated", len(keys), len(h.Tail))
	}
}

// The orphan sweep judges by the head in the bucket, not by the one its
// committer last saw: a leader that was deposed while it slept must not
// delete what its successor committed.
func TestTheOrphanSweepSparesWhatASuccessorCommitted(t *testing.T) {
	store := objstore.NewMemory()
	l := localLog(t, t.TempDir())
	fill(t, l, 100, 3, 0)
	ctx := testContext(t)
	old := newTestCommitter(t, store, 1)
	next := newTestCommitter(t, store, 2)
	if ok, err := UploadNext(ctx, next, l, committedEnd(l), nil, 1); !ok || err != nil {
		t.Fatalf("the successor's upload: %v, %v", ok, err)
	}
	if _, err := CollectOrphans(ctx, old, time.Hour, time.Now().Add(2*time.Hour)); !errors.Is(err, ErrFenced) {
		t.Fatalf("the deposed leader's sweep: %v, want ErrFenced", err)
	}
	checkNamedObjectsExist(t, store, 0, l.Segments()[0].LastOffset+1)
}
