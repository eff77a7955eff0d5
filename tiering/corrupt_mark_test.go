package tiering

import (
	"bytes"
	"errors"
	"testing"

	"github.com/strata-log/strata/internal/corrupt"
	"github.com/strata-log/strata/tiering/objstore"
)

// TestCorruptionIsMarked: a damaged object fails the cold read and the
// producer snapshot read with an error that passes the one check callers
// use, corrupt.Is, as well as ErrCorrupt.
func TestCorruptionIsMarked(t *testing.T) {
	f := newColdFixture(t)
	f.producers = []byte("producers")
	seg := f.addSegment(batchSpec{count: 3, records: 2, valueLen: 100})
	obj, _, err := f.store.Get(f.ctx, seg.Key)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(obj)
	bad[len(bad)-10] ^= 1 // the trailer
	if _, err := f.store.Put(f.ctx, seg.Key, bad, objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = f.reader(smallChunks()).Read(f.ctx, f.ref, 0, 1<<20)
	if !errors.Is(err, ErrCorrupt) || !corrupt.Is(err) {
		t.Fatalf("cold read of a damaged object: %v, want corruption", err)
	}
	_, err = ReadProducerSnapshot(f.ctx, f.read, seg)
	if !errors.Is(err, ErrCorrupt) || !corrupt.Is(err) {
		t.Fatalf("producer snapshot of a damaged object: %v, want corruption", err)
	}
	if corrupt.Is(ErrNoProducerSnapshot) || corrupt.Is(objstore.ErrNotFound) {
		t.Fatal("a missing snapshot or object is marked as corruption")
	}
}
