package tiering

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering/objstore"
)

// threeSegments is a cold tier of three segments with batches small,
// larger than the 4 KiB chunks of smallChunks, and compressed, each
// segment past the 64 KiB cold index interval so its footer has several
// entries.
func threeSegments(t testing.TB) *coldFixture {
	f := newColdFixture(t)
	f.addSegment(batchSpec{count: 150, records: 3, valueLen: 200})
	f.addSegment(
		batchSpec{count: 20, records: 2, valueLen: 5000}, // ~10 KiB batches
		batchSpec{count: 200, records: 1, valueLen: 300},
		batchSpec{count: 3, records: 4, valueLen: 9000}, // ~36 KiB batches
	)
	f.addSegment(
		batchSpec{count: 80, records: 5, valueLen: 100, codec: record.CompressionZstd},
		batchSpec{count: 60, records: 2, valueLen: 700},
	)
	return f
}

func TestColdReadEveryBatchOnce(t *testing.T) {
	f := threeSegments(t)
	for _, maxBytes := range []int{math.MinInt, 0, 1, 3000, 10 << 10, 64 << 10, 1 << 20, math.MaxInt} {
		t.Run(fmt.Sprint(maxBytes), func(t *testing.T) {
			r := f.reader(smallChunks())
			if got := f.readAll(r, 0, maxBytes); !bytes.Equal(got, f.bytesFrom(0)) {
				t.Fatalf("read %d bytes, encoded %d, or they differ", len(got), len(f.bytesFrom(0)))
			}
		})
	}
}

func TestColdReadFromTheMiddleOfABatch(t *testing.T) {
	f := threeSegments(t)
	r := f.reader(smallChunks())
	for _, b := range f.batches {
		for _, off := range []int64{b.base, (b.base + b.last + 1) / 2, b.last} {
			res, err := r.Read(f.ctx, f.ref, off, 1)
			if err != nil {
				t.Fatalf("read at %d: %v", off, err)
			}
			f.checkRead(res, off, 1)
			if !bytes.Equal(res.Batches, b.data) {
				t.Fatalf("read at %d with max 1 byte: want exactly the batch at %d", off, b.base)
			}
		}
	}
}

func TestColdReadBatchesLargerThanAChunk(t *testing.T) {
	f := newColdFixture(t)
	f.addSegment(batchSpec{count: 5, records: 2, valueLen: 30 << 10}) // 60 KiB batches
	r := f.reader(smallChunks())
	got := f.readAll(r, 0, 1)
	if !bytes.Equal(got, f.bytesFrom(0)) {
		t.Fatal("batches differ from those encoded")
	}
	s := r.Stats()
	logLen := f.segs[0].LogLen
	if want := uint64((logLen + 4<<10 - 1) / (4 << 10)); s.ChunkGets != want || s.BytesFetched != uint64(logLen) {
		t.Fatalf("%d chunk GETs of %d bytes, want every chunk once: %d of %d", s.ChunkGets, s.BytesFetched, want, logLen)
	}
}

// TestColdReadAnswersCannotBeAppendedIntoTheCache: a read hands out the
// cached chunk's bytes in place (two reads of the same batches share
// them, nothing was copied), but an append to an answer cannot write into
// the cache.
func TestColdReadAnswersCannotBeAppendedIntoTheCache(t *testing.T) {
	f := threeSegments(t)
	r := f.reader(smallChunks())
	var first []byte
	for range 2 {
		res, err := r.Read(f.ctx, f.ref, 0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		f.checkRead(res, 0, 1<<20)
		if first == nil {
			first = res.Batches
		} else if &first[0] != &res.Batches[0] {
			t.Fatal("two reads of the same batches got copies, not the cached chunk")
		}
		// The answer is a slice of a cached chunk with no room beyond it:
		// an append copies instead of writing over the bytes after it.
		grown := append(res.Batches, bytes.Repeat([]byte{0xff}, 4<<10)...)
		if &grown[0] == &res.Batches[0] {
			t.Fatal("append wrote into the cached chunk")
		}
	}
}

func TestColdReadOutOfRange(t *testing.T) {
	f := newColdFixture(t)
	r := f.reader(smallChunks())

	_, err := r.Read(f.ctx, f.ref, 0, 1)
	if oor := outOfRange(t, err); *oor != (OutOfColdRangeError{Offset: 0, Start: -1, End: -1}) {
		t.Fatalf("empty cold tier: %+v", *oor)
	}
	// The fixture's committer took the manifest over: an empty head.
	if h, err := r.Head(f.ctx, f.ref); err != nil || (h != nil && !h.Empty()) {
		t.Fatalf("head of a partition with no cold tier: %v, %v", h, err)
	}

	f.addSegment(batchSpec{count: 10, records: 2, valueLen: 10})
	// The empty head was cached: a read anywhere checks for a new one.
	if _, err := r.Read(f.ctx, f.ref, 3, 1); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{-1, 20, 21, math.MaxInt64} {
		_, err := r.Read(f.ctx, f.ref, off, 1)
		if oor := outOfRange(t, err); *oor != (OutOfColdRangeError{Offset: off, Start: 0, End: 20}) {
			t.Fatalf("read at %d: %+v", off, *oor)
		}
	}

	// A segment committed since the head was cached (no Invalidate: the
	// commit happened on another broker) is found by a read past the end.
	gets := f.opCount(objstore.OpGet)
	f.addSegment(batchSpec{count: 10, records: 2, valueLen: 10})
	if got := f.readAll(r, 20, 100); !bytes.Equal(got, f.bytesFrom(20)) {
		t.Fatal("the new segment's batches differ")
	}
	if n := f.opCount(objstore.OpGet) - gets; n != 1 {
		t.Fatalf("%d manifest GETs to find the new segment, want 1", n)
	}

	// Retention: the first segment leaves the manifest and the bucket. A
	// reader whose cached head still lists it finds the object missing,
	// looks again, and the offset is then below the cold start.
	r2 := f.reader(smallChunks())
	if _, err := r2.Read(f.ctx, f.ref, 25, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := ApplyRetention(f.ctx, f.com, 20); err != nil {
		t.Fatal(err)
	}
	_, err = r2.Read(f.ctx, f.ref, 5, 1)
	if oor := outOfRange(t, err); *oor != (OutOfColdRangeError{Offset: 5, Start: 20, End: 40}) {
		t.Fatalf("read below the new start: %+v", *oor)
	}
	if s := r2.Stats(); s.FootersCached != 1 {
		t.Fatalf("%d footers cached, want the one of the segment still there", s.FootersCached)
	}
}

func TestColdReadHeadCacheAndInvalidate(t *testing.T) {
	f := newColdFixture(t)
	f.addSegment(batchSpec{count: 4, records: 1, valueLen: 10})
	r := f.reader(smallChunks()) // HeadTTL 2s: longer than this test needs
	h1, err := r.Head(f.ctx, f.ref)
	if err != nil || h1 == nil || h1.EndOffset() != 4 {
		t.Fatalf("head %+v, %v", h1, err)
	}
	f.addSegment(batchSpec{count: 4, records: 1, valueLen: 10})
	if h, _ := r.Head(f.ctx, f.ref); h != h1 {
		t.Fatal("the cached head was not used within HeadTTL")
	}
	r.Invalidate(f.ref)
	if h, err := r.Head(f.ctx, f.ref); err != nil || h.EndOffset() != 8 {
		t.Fatalf("after Invalidate: head ends at %d, %v", h.EndOffset(), err)
	}
}

func TestColdReaderConfig(t *testing.T) {
	for _, cfg := range []ReaderConfig{
		{ChunkBytes: -1},
		{ChunkBytes: 2 << 30},
		{CacheBytes: -5},
		{HeadTTL: -1},
		{MaxGets: -1},
	} {
		if _, err := NewColdReader(objstore.NewMemory(), cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
	r := newTestReader(t, objstore.NewMemory(), ReaderConfig{})
	if !reflect.DeepEqual(r.cfg, DefaultReaderConfig()) {
		t.Fatalf("zero config became %+v, want the defaults", r.cfg)
	}
}

func TestColdReaderClose(t *testing.T) {
	f := threeSegments(t)
	r, err := NewColdReader(f.read, ReaderConfig{ChunkBytes: 4 << 10, ReadAhead: 4})
	if err != nil {
		t.Fatal(err)
	}
	f.readAll(r, 0, 2000) // sequential: read-ahead is running
	r.Close()
	r.Close()
	if _, err := r.Read(f.ctx, f.ref, 0, 1); !errors.Is(err, ErrReaderClosed) {
		t.Fatalf("read after Close: %v", err)
	}
	if _, _, _, err := r.OffsetForTimestamp(f.ctx, f.ref, 0); !errors.Is(err, ErrReaderClosed) {
		t.Fatalf("OffsetForTimestamp after Close: %v", err)
	}
	if s := r.Stats(); s.FootersCached != 0 || s.CachedBytes != 0 {
		t.Fatalf("after Close: %+v", s)
	}
}

// TestColdReadFromADirectoryStore reads the same objects through the
// filesystem store, whose handles are open files.
func TestColdReadFromADirectoryStore(t *testing.T) {
	f := threeSegments(t)
	dir, err := objstore.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	err = f.store.List(f.ctx, "", func(info objstore.ObjectInfo) error {
		data, _, err := f.store.Get(f.ctx, info.Key)
		if err != nil {
			return err
		}
		_, err = dir.Put(f.ctx, info.Key, data, objstore.WriteOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newTestReader(t, dir, ReaderConfig{ChunkBytes: 4 << 10, CacheBytes: 64 << 10})
	for _, maxBytes := range []int{1, 5000, 1 << 20} {
		if got := f.readAll(r, 0, maxBytes); !bytes.Equal(got, f.bytesFrom(0)) {
			t.Fatalf("max %d: the batches read differ from those encoded", maxBytes)
		}
	}
}
