package tiering

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering/objstore"
)

// coldObject is an open cold segment object with its checked trailer and
// footer, kept by key (the most recently used readerObjects of them) so
// that neither is fetched again. The handle is shared by the reads in
// progress: each holds a reference, and the handle is closed once the
// object has left the cache and the last reference is released.
type coldObject struct {
	part    PartitionRef // whose object it is, for Pace
	seg     SegmentRef
	trailer Trailer
	footer  *Footer
	// chunks are where the object's chunks start in its log bytes (see
	// chunkStarts); chunk k ends where k+1 starts, the last at LogLen.
	chunks []int64
	rd     objstore.ObjectReader
	mu     struct {
		sync.Mutex
		refs    int
		evicted bool
	}
}

// acquire takes a reference, unless the object has left the cache.
func (o *coldObject) acquire() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mu.evicted {
		return false
	}
	o.mu.refs++
	return true
}

func (o *coldObject) release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.mu.refs--
	if o.mu.refs == 0 && o.mu.evicted {
		o.rd.Close()
	}
}

// evict is called as the object leaves the cache.
func (o *coldObject) evict() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.mu.evicted = true
	if o.mu.refs == 0 {
		o.rd.Close()
	}
}

// corrupt is an ErrCorrupt error naming the object.
func (o *coldObject) corrupt(format string, args ...any) error {
	return fmt.Errorf("tiering: cold segment %s: %w", o.seg.Key, corruptf(format, args...))
}

// entryFor returns the index entry where a scan for offset starts.
func (o *coldObject) entryFor(offset int64) IndexEntry {
	return o.entryAt(o.footer.PositionFor(offset))
}

// entryForTime returns the index entry where a scan for the first record
// at or after ts starts.
func (o *coldObject) entryForTime(ts int64) IndexEntry {
	return o.entryAt(o.footer.PositionForTime(ts))
}

// entryAt returns the entry at position pos, which is one of the footer's
// (positions strictly increase, DecodeFooter checks).
func (o *coldObject) entryAt(pos int64) IndexEntry {
	es := o.footer.Entries
	i := sort.Search(len(es), func(i int) bool { return int64(es[i].Pos) >= pos })
	return es[i]
}

// object returns seg's object with a reference the caller must release.
// Concurrent first readers of an object share one open and one index read.
func (r *ColdReader) object(ctx context.Context, p PartitionRef, seg SegmentRef) (*coldObject, error) {
	for {
		r.mu.Lock()
		o, ok := r.mu.objects.get(seg.Key)
		r.mu.Unlock()
		if ok && o.acquire() {
			return o, nil
		}
		o, shared, err := r.objects.do(ctx, seg.Key, func(ctx context.Context) (*coldObject, error) {
			return r.openObject(ctx, p, seg)
		})
		if err != nil {
			return nil, err
		}
		if !shared {
			return o, nil // openObject took the caller's reference
		}
		if o.acquire() {
			return o, nil
		}
		// It has left the cache already: open it again.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// forgetObject drops a cached object, after its store said it is gone.
func (r *ColdReader) forgetObject(key string) {
	r.mu.Lock()
	r.mu.objects.remove(key)
	r.mu.Unlock()
}

// openObject opens seg's object, reads and checks its trailer and footer,
// caches it and returns it with one reference taken for the caller.
func (r *ColdReader) openObject(ctx context.Context, p PartitionRef, seg SegmentRef) (*coldObject, error) {
	// The manifest says how large the object is: where the store can
	// open it on that word, it costs no request (a HEAD on S3).
	rd, err := objstore.OpenSized(ctx, r.store, seg.Key, seg.Size)
	if err != nil {
		return nil, fmt.Errorf("tiering: open cold segment %s: %w", seg.Key, err)
	}
	o := &coldObject{part: p, seg: seg, rd: rd}
	whole, err := r.readIndex(ctx, o)
	if err != nil {
		rd.Close()
		return nil, err
	}
	if whole != nil {
		// The whole object came in one GET: its only chunk is cached as
		// read-ahead is, until a read takes it.
		r.counters.bytesFetched.Add(uint64(len(whole.data)))
		r.chunks.add(chunkKey(seg.Key, 0), r.checkChunk(o, 0, whole), true)
		whole.release()
	}
	o.mu.refs = 1
	r.mu.Lock()
	r.mu.objects.add(seg.Key, o, 1)
	r.mu.Unlock()
	return o, nil
}

// readIndex reads o's trailer and footer and checks them against each
// other and against the manifest's SegmentRef. The manifest says where the
// log bytes end, so one ranged read usually fetches both. An object no
// larger than a chunk, whose chunk is not cached, is read whole instead:
// then its log bytes come back too (the object's one chunk, with a
// reference for the caller, read into a buffer of the arena), so that
// replaying small segments takes one GET an object, not two.
func (r *ColdReader) readIndex(ctx context.Context, o *coldObject) (whole *chunk, _ error) {
	seg := o.seg
	size := seg.Size
	if got := o.rd.Size(); got != size {
		return nil, o.corrupt("the object has %d bytes, the manifest says %d", got, size)
	}
	if size < trailerSizeV1+record.HeaderSize {
		return nil, o.corrupt("object of %d bytes is too small", size)
	}
	// The trailer's size depends on the object's version: read enough for
	// the larger one.
	at := size - min(size, maxTrailerSize)
	if seg.LogLen >= record.HeaderSize && seg.LogLen <= at && at-seg.LogLen <= maxFooterLen(seg.LogLen) {
		at = seg.LogLen
	}
	var tail []byte
	var wc *chunk
	if size <= r.cfg.ChunkBytes && seg.LogLen >= record.HeaderSize && !r.chunks.has(chunkKey(seg.Key, 0)) {
		at = 0
		buf, pooled := r.arena.get(int(size))
		wc, tail = newChunk(r.arena, buf, pooled, nil), buf[:size]
		defer func() {
			if whole == nil { // the buffer is handed on only as the object's chunk
				wc.release()
			}
		}()
	} else {
		tail = make([]byte, size-at)
	}
	if err := r.readIndexBytes(ctx, o, at, tail); err != nil {
		return nil, err
	}
	t, err := DecodeTrailer(tail, size)
	if err != nil {
		return nil, fmt.Errorf("tiering: cold segment %s: %w", seg.Key, err)
	}
	if t.BaseOffset != seg.BaseOffset || t.LastOffset != seg.LastOffset {
		return nil, o.corrupt("trailer says offsets %d..%d, the manifest %d..%d", t.BaseOffset, t.LastOffset, seg.BaseOffset, seg.LastOffset)
	}
	if seg.LogLen != 0 && (t.LogLen != seg.LogLen || t.LogCRC != seg.LogCRC) {
		return nil, o.corrupt("trailer says %d log bytes with crc %#08x, the manifest %d with %#08x", t.LogLen, t.LogCRC, seg.LogLen, seg.LogCRC)
	}
	if t.FooterLen() > maxFooterLen(t.LogLen) {
		return nil, o.corrupt("footer of %d entries for %d log bytes", t.Entries, t.LogLen)
	}
	var footer []byte
	if rel := t.LogLen - at; rel >= 0 && rel+t.FooterLen() <= int64(len(tail))-t.Size() {
		footer = tail[rel : rel+t.FooterLen()]
	} else {
		// The manifest did not say where the footer starts (or said it
		// wrongly, which the checks above would have caught), or a large
		// producer snapshot kept the first read to the trailer: read it
		// now.
		footer = make([]byte, t.FooterLen())
		if err = r.readIndexBytes(ctx, o, t.LogLen, footer); err != nil {
			return nil, err
		}
	}
	f, err := DecodeFooter(footer, t)
	if err != nil {
		return nil, fmt.Errorf("tiering: cold segment %s: %w", seg.Key, err)
	}
	o.trailer, o.footer = t, f
	o.chunks = chunkStarts(f, t.LogLen, r.cfg.ChunkBytes)
	if wc != nil && len(o.chunks) == 1 {
		wc.data = tail[:t.LogLen:t.LogLen]
		return wc, nil
	}
	return nil, nil
}

// chunkStarts returns where the chunks of an object's log bytes start:
// chunk k starts in [k*chunkBytes, (k+1)*chunkBytes), at the first indexed
// batch there if there is one, so that batches do not cross from one chunk
// into the next and reads are served from one chunk in place. (Without
// that, a quarter of the batches of 1 MiB were copied out of 4 MiB
// chunks.) A batch still crosses where the index names no batch in that
// range: one larger than a chunk, or an index sparser than the chunks.
func chunkStarts(f *Footer, logLen, chunkBytes int64) []int64 {
	starts := make([]int64, 1, (logLen+chunkBytes-1)/chunkBytes)
	es := f.Entries
	j := 0
	for k := int64(1); k*chunkBytes < logLen; k++ {
		at := k * chunkBytes
		for j < len(es) && int64(es[j].Pos) < at {
			j++
		}
		if j < len(es) && int64(es[j].Pos) < at+chunkBytes {
			at = int64(es[j].Pos)
		}
		starts = append(starts, at)
	}
	return starts
}

// batchStartsAt reports whether a batch is known to start at log position
// pos: the first, or one the index names. (The footer passed its CRC.)
func (o *coldObject) batchStartsAt(pos int64) bool {
	if pos == 0 {
		return true
	}
	es := o.footer.Entries
	i := sort.Search(len(es), func(i int) bool { return int64(es[i].Pos) >= pos })
	return i < len(es) && int64(es[i].Pos) == pos
}

// chunkOf returns the chunk holding log position pos.
func (o *coldObject) chunkOf(pos int64) int64 {
	return int64(sort.Search(len(o.chunks), func(i int) bool { return o.chunks[i] > pos })) - 1
}

// chunkRange returns the log bytes [start, end) of chunk k.
func (o *coldObject) chunkRange(k int64) (start, end int64) {
	if k+1 < int64(len(o.chunks)) {
		return o.chunks[k], o.chunks[k+1]
	}
	return o.chunks[k], o.trailer.LogLen
}

// readIndexBytes fills b with o's bytes from at.
func (r *ColdReader) readIndexBytes(ctx context.Context, o *coldObject, at int64, b []byte) error {
	n := int64(len(b))
	err := r.get(ctx, o.part, n, func() error {
		r.counters.indexGets.Add(1)
		_, err := o.rd.ReadAt(ctx, b, at)
		return err
	})
	if err != nil {
		return fmt.Errorf("tiering: read cold segment %s at %d: %w", o.seg.Key, at, err)
	}
	return nil
}

// maxFooterLen bounds the footer of a log of logLen bytes: an index entry
// names a batch, and no two the same one. It keeps a damaged trailer or
// manifest from making the reader allocate and fetch more than that.
func maxFooterLen(logLen int64) int64 {
	return logLen / record.HeaderSize * footerEntrySize
}
