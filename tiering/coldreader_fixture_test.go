package tiering

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering/objstore"
)

// coldFixture is a partition's cold tier built the way the uploader builds
// it: batches encoded with record.Builder into local segment bytes,
// EncodeSegment into a memory store, and Committer.Append. It remembers
// every batch and record, to check what a ColdReader returns.
type coldFixture struct {
	t       testing.TB
	ctx     context.Context
	store   objstore.Bucket // what tests write to
	metrics *objstore.Metrics
	read    objstore.Bucket // what readers read: store, counted in metrics
	ref     PartitionRef
	com     *Committer
	rng     *rand.Rand
	batches []coldBatch
	records []coldRecord
	segs    []SegmentRef
	next    int64
	// chunkBytes is the chunk size of the last reader made, which
	// checkRead holds reads to (4 KiB until one is made).
	chunkBytes int64
	// producers is the producer snapshot the next segments carry; with
	// version1 they are written as objects were before they carried one.
	producers []byte
	version1  bool
}

// coldBatch is one batch as encoded: where it went and its bytes.
type coldBatch struct {
	base, last int64
	seg        int   // index in segs
	pos        int64 // position in the segment's log bytes
	data       []byte
}

// coldRecord is one record as a reader decodes it.
type coldRecord struct{ offset, ts int64 }

// batchSpec describes batches to add.
type batchSpec struct {
	count, records, valueLen int
	// ts gives a record's timestamp from its offset; nil means the offset.
	ts         func(offset int64) int64
	appendTime int64 // when > 0, the batches are LogAppendTime at this time
	codec      record.Compression
}

var coldTestRef = PartitionRef{Topic: "orders", TopicID: "c01d0000000000000000000000000001", Partition: 7}

func newColdFixture(t testing.TB) *coldFixture {
	return newColdFixtureOn(t, objstore.NewMemory(), coldTestRef)
}

// newColdFixtureOn is a fixture for partition ref in store, which other
// partitions' fixtures may share.
func newColdFixtureOn(t testing.TB, store objstore.Bucket, ref PartitionRef) *coldFixture {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	m := &objstore.Metrics{}
	com, err := NewCommitter(ctx, store, ref, 1)
	if err != nil {
		t.Fatal(err)
	}
	return &coldFixture{
		t: t, ctx: ctx, store: store, metrics: m, read: objstore.WithMetrics(store, m),
		ref: ref, com: com, rng: rand.New(rand.NewPCG(1, 2)),
	}
}

// addSegment encodes the batches of specs as one local segment, uploads
// it and commits it.
func (f *coldFixture) addSegment(specs ...batchSpec) SegmentRef {
	f.t.Helper()
	base := f.next
	var local bytes.Buffer
	var added []coldBatch
	for _, s := range specs {
		for range s.count {
			opts := record.DefaultBatchOptions()
			opts.BaseOffset, opts.Compression = f.next, s.codec
			bl := record.NewBuilder(opts)
			for i := range s.records {
				off := f.next + int64(i)
				ts := off
				if s.ts != nil {
					ts = s.ts(off)
				}
				v := make([]byte, s.valueLen+8)
				for j := 0; j < s.valueLen; j += 8 {
					binary.LittleEndian.PutUint64(v[j:], f.rng.Uint64())
				}
				v = v[:s.valueLen]
				bl.Add(record.Record{Timestamp: ts, Key: []byte("k"), Value: v})
			}
			b, err := bl.Build()
			if err != nil {
				f.t.Fatal(err)
			}
			if s.appendTime > 0 {
				b.SetLogAppendTime(s.appendTime)
			}
			recs, err := b.Records()
			if err != nil {
				f.t.Fatal(err)
			}
			for _, r := range recs {
				f.records = append(f.records, coldRecord{offset: r.Offset, ts: r.Timestamp})
			}
			added = append(added, coldBatch{base: f.next, last: b.LastOffset(), seg: len(f.segs), pos: int64(local.Len()), data: bytes.Clone(b)})
			local.Write(b)
			f.next = b.NextOffset()
		}
	}
	key := f.ref.newSegmentKey(base, 1)
	var obj bytes.Buffer
	tr, err := EncodeSegment(&obj, bytes.NewReader(local.Bytes()), int64(local.Len()), base, base, f.producers)
	if err != nil {
		f.t.Fatal(err)
	}
	data := obj.Bytes()
	if f.version1 {
		data = toVersion1(f.t, data)
		tr.Version, tr.ProducersLen = 1, 0
	}
	if _, err := f.store.Put(f.ctx, key, data, objstore.WriteOptions{IfAbsent: true}); err != nil {
		f.t.Fatal(err)
	}
	seg := SegmentRef{
		Key: key, BaseOffset: tr.BaseOffset, LastOffset: tr.LastOffset, MinTs: tr.MinTs, MaxTs: tr.MaxTs,
		Size: tr.ObjectSize(), LogLen: tr.LogLen, Epoch: 1, LogCRC: tr.LogCRC,
	}
	if err := f.com.Append(f.ctx, seg, nil, 8); err != nil {
		f.t.Fatal(err)
	}
	f.segs = append(f.segs, seg)
	f.batches = append(f.batches, added...)
	return seg
}

// reader returns a ColdReader over the fixture's store, closed when the
// test ends.
func (f *coldFixture) reader(cfg ReaderConfig) *ColdReader {
	f.t.Helper()
	f.chunkBytes = cfg.withDefaults().ChunkBytes
	return newTestReader(f.t, f.read, cfg)
}

func newTestReader(t testing.TB, store objstore.Reader, cfg ReaderConfig) *ColdReader {
	t.Helper()
	r, err := NewColdReader(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// smallChunks is a configuration that makes the fixture's objects span
// many chunks, and batches span several.
func smallChunks() ReaderConfig {
	return ReaderConfig{ChunkBytes: 4 << 10, CacheBytes: 1 << 20, ReadAhead: -1}
}

// bytesFrom is every batch from the one holding offset on, concatenated.
func (f *coldFixture) bytesFrom(offset int64) []byte {
	var out []byte
	for _, b := range f.batches {
		if b.last >= offset {
			out = append(out, b.data...)
		}
	}
	return out
}

// batchAt returns the index of the batch holding offset.
func (f *coldFixture) batchAt(offset int64) int {
	for i, b := range f.batches {
		if b.base <= offset && offset <= b.last {
			return i
		}
	}
	f.t.Fatalf("no batch holds %d", offset)
	return -1
}

// readAll reads from offset to the end of the cold tier in steps of
// maxBytes, checking each answer against the batches encoded, and returns
// what it read.
func (f *coldFixture) readAll(r *ColdReader, offset int64, maxBytes int) []byte {
	f.t.Helper()
	var out []byte
	for offset < f.next {
		res, err := r.Read(f.ctx, f.ref, offset, maxBytes)
		if err != nil {
			f.t.Fatalf("read at %d (max %d): %v", offset, maxBytes, err)
		}
		f.checkRead(res, offset, maxBytes)
		out = append(out, res.Batches...)
		offset = res.NextOffset
	}
	return out
}

// checkRead checks one answer: whole batches, byte-identical to those
// encoded, the first holding offset, all from one segment, within maxBytes
// unless a single batch, and NextOffset after the last.
func (f *coldFixture) checkRead(res ColdRead, offset int64, maxBytes int) {
	f.t.Helper()
	i := f.batchAt(offset)
	seg := f.batches[i].seg
	rest := res.Batches
	n := 0
	for len(rest) > 0 {
		if i >= len(f.batches) {
			f.t.Fatalf("read at %d: more batches than encoded", offset)
		}
		want := f.batches[i]
		if want.seg != seg {
			f.t.Fatalf("read at %d: batches of segments %d and %d in one answer", offset, seg, want.seg)
		}
		if !bytes.HasPrefix(rest, want.data) {
			f.t.Fatalf("read at %d: batch %d (offset %d) differs from the one encoded", offset, i, want.base)
		}
		rest = rest[len(want.data):]
		i++
		n++
	}
	switch {
	case n == 0:
		f.t.Fatalf("read at %d: no batch", offset)
	case n > 1 && len(res.Batches) > maxBytes:
		f.t.Fatalf("read at %d: %d bytes in %d batches, max %d", offset, len(res.Batches), n, maxBytes)
	case res.NextOffset != f.batches[i-1].last+1:
		f.t.Fatalf("read at %d: next offset %d, want %d", offset, res.NextOffset, f.batches[i-1].last+1)
	}
	// A read stops before maxBytes only at the end of a segment, or where
	// the next batch would leave the chunk the read started in; a read
	// whose first batch crosses a chunk boundary holds that batch alone.
	cb := f.chunkBytes
	if cb == 0 {
		cb = 4 << 10
	}
	starts := f.chunkStarts(f.segs[seg], cb)
	chunkEnd := func(pos int64) int64 {
		k := sort.Search(len(starts), func(i int) bool { return starts[i] > pos })
		if k < len(starts) {
			return starts[k]
		}
		return f.segs[seg].LogLen
	}
	first := f.batches[f.batchAt(offset)]
	end := chunkEnd(first.pos)
	if first.pos+int64(len(first.data)) > end {
		if n != 1 {
			f.t.Fatalf("read at %d: %d batches after a first one that crosses a chunk boundary", offset, n)
		}
		return
	}
	if i < len(f.batches) && f.batches[i].seg == seg && len(res.Batches)+len(f.batches[i].data) <= maxBytes &&
		f.batches[i].pos+int64(len(f.batches[i].data)) <= end {
		f.t.Fatalf("read at %d: stopped at %d bytes with the next batch fitting in %d and in the chunk", offset, len(res.Batches), maxBytes)
	}
}

// chunkStarts returns where a reader with chunks of cb bytes starts the
// chunks of seg's object, from the object's footer in the store.
func (f *coldFixture) chunkStarts(seg SegmentRef, cb int64) []int64 {
	f.t.Helper()
	obj, _, err := f.store.Get(f.ctx, seg.Key)
	if err != nil {
		f.t.Fatal(err)
	}
	tr, err := DecodeTrailer(obj[max(0, len(obj)-maxTrailerSize):], int64(len(obj)))
	if err != nil {
		f.t.Fatal(err)
	}
	footer, err := DecodeFooter(obj[tr.LogLen:tr.LogLen+tr.FooterLen()], tr)
	if err != nil {
		f.t.Fatal(err)
	}
	return chunkStarts(footer, tr.LogLen, cb)
}

// opCount is how many times the fixture's store was asked op.
func (f *coldFixture) opCount(op objstore.Op) int64 { return f.metrics.Snapshot()[op].Calls }

// chunkCached reports whether chunk idx of the object key is in the
// reader's chunk cache (not merely being fetched).
func chunkCached(r *ColdReader, key string, idx int64) bool {
	ck := chunkKey(key, idx)
	r.chunks.mu.Lock()
	_, ok := r.chunks.mu.window.peek(ck)
	r.chunks.mu.Unlock()
	return ok
}

// outOfRange returns err as an *OutOfColdRangeError, failing otherwise.
func outOfRange(t testing.TB, err error) *OutOfColdRangeError {
	t.Helper()
	var oor *OutOfColdRangeError
	if !errors.As(err, &oor) {
		t.Fatalf("got %v, want an OutOfColdRangeError", err)
	}
	return oor
}
