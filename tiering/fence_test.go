package tiering

import (
	"errors"
	"testing"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/tiering/objstore"
)

// Only committed offsets go to the cold tier: a sealed segment whose last
// offset is at or above the high watermark waits, however old it is, so no
// broker can read an unacknowledged record from the bucket as committed.
func TestUploadsOnlyBelowTheHighWatermark(t *testing.T) {
	store := objstore.NewMemory()
	l := localLog(t, t.TempDir())
	fill(t, l, 200, 3, 0)
	segs := l.Segments()
	if len(segs) < 4 {
		t.Fatalf("want at least 4 segments, have %d", len(segs))
	}
	ctx := testContext(t)
	c := newTestCommitter(t, store, 1)
	hw := segs[2].LastOffset // segment 2 holds the offset at the high watermark
	for {
		ok, err := UploadNext(ctx, c, l, hw, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
	}
	if end := c.Head().EndOffset(); end != segs[1].LastOffset+1 {
		t.Fatalf("cold tier ends at %d; with the high watermark at %d it must end at %d", end, hw, segs[1].LastOffset+1)
	}
	if ok, err := UploadNext(ctx, c, l, hw+1, nil, 1); !ok || err != nil || c.Head().EndOffset() != hw+1 {
		t.Fatalf("once the high watermark passes segment 2: %v %v, cold end %d", ok, err, c.Head().EndOffset())
	}
}

// A new leader takes over the manifest before it serves: from then on a
// deposed leader that still reaches the bucket commits nothing, even when
// the new leader has uploaded nothing yet.
func TestNewCommitterFencesBeforeAnyUpload(t *testing.T) {
	store := objstore.NewMemory()
	l := localLog(t, t.TempDir())
	fill(t, l, 100, 3, 0)
	ctx := testContext(t)
	old := newTestCommitter(t, store, 1)
	if ok, err := UploadNext(ctx, old, l, committedEnd(l), nil, 1); !ok || err != nil {
		t.Fatalf("first upload: %v %v", ok, err)
	}
	next := newTestCommitter(t, store, 2)
	h, _, err := LoadHead(ctx, store, testRef)
	if err != nil || h.LeaderEpoch != 2 || h.EndOffset() != old.Head().EndOffset() {
		t.Fatalf("head after the new leader took over: %+v, %v", h, err)
	}
	if next.Head().EndOffset() != old.Head().EndOffset() {
		t.Fatalf("the new leader starts from cold end %d, its predecessor committed up to %d", next.Head().EndOffset(), old.Head().EndOffset())
	}
	if _, err := UploadNext(ctx, old, l, committedEnd(l), nil, 1); !errors.Is(err, ErrFenced) {
		t.Fatalf("deposed leader's upload: %v, want ErrFenced", err)
	}
	if again, _, _ := LoadHead(ctx, store, testRef); again.Generation != h.Generation {
		t.Fatalf("the deposed leader changed the head: generation %d, was %d", again.Generation, h.Generation)
	}
	// A committer in the same epoch (a restart of the same leader) takes the
	// head as it is.
	same, err := NewCommitter(ctx, store, testRef, 2)
	if err != nil || same.Head().Generation != h.Generation {
		t.Fatalf("second committer in epoch 2: %v, generation %d want %d", err, same.Head().Generation, h.Generation)
	}
}

func TestEpochsIn(t *testing.T) {
	history := []EpochStart{{1, 0}, {3, 10}, {4, 20}}
	cases := []struct {
		first, last int64
		want        []EpochStart
	}{
		{0, 5, []EpochStart{{1, 0}}},
		{5, 15, []EpochStart{{1, 5}, {3, 10}}},
		{10, 19, []EpochStart{{3, 10}}},
		{12, 40, []EpochStart{{3, 12}, {4, 20}}},
		{25, 30, []EpochStart{{4, 25}}},
	}
	for _, c := range cases {
		got := EpochsIn(history, c.first, c.last)
		if len(got) != len(c.want) {
			t.Fatalf("EpochsIn(%d, %d) = %v, want %v", c.first, c.last, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("EpochsIn(%d, %d) = %v, want %v", c.first, c.last, got, c.want)
			}
		}
	}
}

// Uploads record the epochs that wrote each segment, and a leader whose log
// took another lineage finds the first offset where the two part.
func TestFirstDivergence(t *testing.T) {
	store := objstore.NewMemory()
	l := localLog(t, t.TempDir())
	ctx := testContext(t)
	for epoch := int32(1); epoch <= 3; epoch++ {
		for range 40 {
			off := l.LogEndOffset()
			if _, err := l.Append(testutil.SeqBatch(t, off, 3, off, 200, nil), epoch); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := newTestCommitter(t, store, 3)
	for {
		ok, err := UploadNext(ctx, c, l, committedEnd(l), nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
	}
	var lineage int
	c.Segments(ctx, func(s SegmentRef) bool { lineage += len(s.Epochs); return true })
	if lineage < 3 {
		t.Fatalf("segments record %d epoch entries in all; three epochs wrote them", lineage)
	}
	local := l.Epochs()
	if d, err := c.FirstDivergence(ctx, local, 0, l.LogEndOffset()); err != nil || d != -1 {
		t.Fatalf("the log that uploaded them diverges at %d (%v)", d, err)
	}
	// Another replica whose epoch 3 began 6 offsets later (it had more of
	// epoch 2) parts from the cold tier where epoch 3 began in the cold tier.
	other := []hotlog.EpochEntry{local[0], local[1], {Epoch: 3, StartOffset: local[2].StartOffset + 6}}
	if d, err := c.FirstDivergence(ctx, other, 0, l.LogEndOffset()); err != nil || d != local[2].StartOffset {
		t.Fatalf("divergence at %d (%v), want %d", d, err, local[2].StartOffset)
	}
	// Compared only above its local start, a replica agrees or not on what
	// it holds.
	if d, _ := c.FirstDivergence(ctx, other, local[2].StartOffset+6, l.LogEndOffset()); d != -1 {
		t.Fatalf("above the diverging stretch: divergence at %d", d)
	}
}
