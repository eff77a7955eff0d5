package tiering

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering/objstore"
)

// TestColdReadCorruptObject damages one stored object in different ways:
// every read that touches the damage fails with ErrCorrupt naming the
// object, and returns no bytes.
func TestColdReadCorruptObject(t *testing.T) {
	type damage struct {
		name string
		// spoil changes the object's bytes; target is the damaged batch
		// (its index in the segment), or -1 when the whole object is
		// unreadable.
		spoil  func(f *coldFixture, obj []byte) []byte
		target int
	}
	const target = 40
	batchPos := func(f *coldFixture, i int) int { return int(f.batches[i].pos) }
	damages := []damage{
		{"batch payload", func(f *coldFixture, obj []byte) []byte {
			obj[batchPos(f, target)+record.HeaderSize+20] ^= 0x40
			return obj
		}, target},
		{"batch CRC field", func(f *coldFixture, obj []byte) []byte {
			obj[batchPos(f, target)+17] ^= 1
			return obj
		}, target},
		{"batch base offset (outside the CRC)", func(f *coldFixture, obj []byte) []byte {
			obj[batchPos(f, target)+7] ^= 1
			return obj
		}, target},
		{"batch length", func(f *coldFixture, obj []byte) []byte {
			p := batchPos(f, target) + 8
			binary.BigEndian.PutUint32(obj[p:], binary.BigEndian.Uint32(obj[p:])+16)
			return obj
		}, target},
		{"batch magic", func(f *coldFixture, obj []byte) []byte {
			obj[batchPos(f, target)+16] = 1
			return obj
		}, target},
		{"trailer", func(f *coldFixture, obj []byte) []byte {
			obj[len(obj)-30] ^= 0x08
			return obj
		}, -1},
		{"footer", func(f *coldFixture, obj []byte) []byte {
			obj[f.segs[0].LogLen+3] ^= 0x01
			return obj
		}, -1},
		{"object cut short", func(f *coldFixture, obj []byte) []byte {
			return obj[:len(obj)-1]
		}, -1},
		{"object replaced by another", func(f *coldFixture, obj []byte) []byte {
			other, _, err := f.store.Get(f.ctx, f.segs[1].Key)
			if err != nil {
				t.Fatal(err)
			}
			return other
		}, -1},
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			f := newColdFixture(t)
			f.addSegment(batchSpec{count: 100, records: 2, valueLen: 700})
			f.addSegment(batchSpec{count: 100, records: 2, valueLen: 700})
			key := f.segs[0].Key
			obj, _, err := f.store.Get(f.ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.store.Put(f.ctx, key, d.spoil(f, obj), objstore.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			r := f.reader(smallChunks())
			isCorrupt := func(what string, res ColdRead, err error) {
				t.Helper()
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), key) {
					t.Fatalf("%s: got %v, want ErrCorrupt naming %s", what, err, key)
				}
				if res.Batches != nil || res.NextOffset != 0 {
					t.Fatalf("%s: data returned with the error", what)
				}
			}
			if d.target < 0 {
				res, err := r.Read(f.ctx, f.ref, 0, 1<<20)
				isCorrupt("read", res, err)
				_, _, _, err = r.OffsetForTimestamp(f.ctx, f.ref, 0)
				isCorrupt("OffsetForTimestamp", ColdRead{}, err)
			} else {
				b := f.batches[d.target]
				res, err := r.Read(f.ctx, f.ref, b.base, 1)
				isCorrupt("read of the damaged batch", res, err)
				// A read that would include it fails whole, not short:
				// one from the first batch of the chunk it starts in.
				from := d.target
				for from > 0 && f.batches[from-1].pos >= b.pos/f.chunkBytes*f.chunkBytes {
					from--
				}
				res, err = r.Read(f.ctx, f.ref, f.batches[from].base, 1<<20)
				isCorrupt("read through the damaged batch", res, err)
				// What comes before it reads fine.
				for off := int64(0); off < b.base; {
					res, err := r.Read(f.ctx, f.ref, off, 1)
					if err != nil {
						t.Fatalf("read at %d, before the damage: %v", off, err)
					}
					f.checkRead(res, off, 1)
					off = res.NextOffset
				}
				// Those reads cached the damaged batch's chunk again:
				// what was checked when it came in (the batches before
				// the damage) does not vouch for the damaged batch.
				res, err = r.Read(f.ctx, f.ref, b.base, 1)
				isCorrupt("read of the damaged batch from a cached chunk", res, err)
			}
			// The other segment is untouched.
			if got := f.readAll(r, f.segs[1].BaseOffset, 5000); !bytes.Equal(got, f.bytesFrom(f.segs[1].BaseOffset)) {
				t.Fatal("the undamaged segment reads differently")
			}
		})
	}
}

// TestColdReadCorruptChunkIsFetchedAgain: a batch found damaged has its
// chunks dropped from the cache, so that damage done on the way (not in
// the bucket) heals on the next read.
func TestColdReadCorruptChunkIsFetchedAgain(t *testing.T) {
	f := newColdFixture(t)
	f.addSegment(batchSpec{count: 20, records: 1, valueLen: 100})
	key := f.segs[0].Key
	good, _, err := f.store.Get(f.ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(good)
	bad[f.batches[3].pos+record.HeaderSize+5] ^= 0xff
	if _, err := f.store.Put(f.ctx, key, bad, objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	r := f.reader(smallChunks())
	if _, err := r.Read(f.ctx, f.ref, 3, 1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
	// The handle cached with the footer still reads the damaged version in
	// the memory store (as an S3 handle would read one ETag): forget it.
	r.forgetObject(key)
	if _, err := f.store.Put(f.ctx, key, good, objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Read(f.ctx, f.ref, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	f.checkRead(res, 3, 1)
}
