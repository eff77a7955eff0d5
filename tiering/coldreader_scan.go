package tiering

import (
	"context"
	"fmt"

	"github.com/strata-log/strata/record"
)

// readEnd is where in its object a read ended, for read-ahead.
type readEnd struct {
	pos    int64 // position in the log bytes after the last batch returned
	chunk  int64 // the chunk of the last byte returned
	chunks int64 // the object's chunks
}

// readSegment reads whole batches of seg's object, starting with the one
// holding offset, as Read describes, and says where they end. A read that
// continues an earlier one (resume names seg's object) starts where that
// one ended instead of at the index entry before offset.
//
// The batches returned are a slice of the cached chunk that holds the
// first of them, not a copy: a read ends where the next batch would leave
// that chunk. Chunks start at batches where the index allows, so batches
// seldom cross from one into the next; one that does is copied when it
// comes first, and returned alone, so the read after it starts in the next
// chunk and is served from it in place.
func (r *ColdReader) readSegment(ctx context.Context, p PartitionRef, seg SegmentRef, offset int64, maxBytes int, resume readMark) (ColdRead, readEnd, error) {
	o, err := r.object(ctx, p, seg)
	if err != nil {
		return ColdRead{}, readEnd{}, err
	}
	defer o.release()
	s := r.scan(o, o.entryFor(offset))
	if resume.key == seg.Key && resume.next == offset && resume.pos > s.pos && resume.pos < o.trailer.LogLen {
		// That position was found by a checked scan; the header check
		// below still holds it to offset.
		s.pos, s.next = resume.pos, offset
	}
	// Skip the batches before the one holding offset: the index entry is
	// at most an index interval (and a batch) before it.
	var b record.Batch
	for {
		if s.done() {
			return ColdRead{}, readEnd{}, o.corrupt("no batch holds offset %d", offset)
		}
		if b, err = s.header(ctx); err != nil {
			return ColdRead{}, readEnd{}, err
		}
		if b.LastOffset() >= offset {
			break
		}
		s.skip(b)
	}
	idx := o.chunkOf(s.pos)
	base, chunkEnd := o.chunkRange(idx)
	var out []byte
	if s.pos+int64(b.Size()) > chunkEnd {
		// The first batch crosses into the next chunk: a copy of it alone.
		if out, err = s.appendBatch(ctx, make([]byte, 0, b.Size()), b); err != nil {
			return ColdRead{}, readEnd{}, err
		}
		r.chunks.readPast(chunkKey(seg.Key, idx))
	} else {
		ch, err := r.chunk(ctx, o, idx, false)
		if err != nil {
			return ColdRead{}, readEnd{}, err
		}
		// The reference is the caller's once the batches are returned.
		ref := &readRef{ch: ch}
		defer func() {
			if ref != nil {
				ch.release()
			}
		}()
		data := ch.data
		from := s.pos
		for first := true; !s.done(); first = false {
			rel := s.pos - base
			if !first && s.pos-from >= int64(maxBytes) {
				break // full: do not even look at the next batch
			}
			if rel+record.HeaderSize > int64(len(data)) {
				break // the next header crosses into the next chunk
			}
			if b, err = s.checkHeader(data[rel : rel+record.HeaderSize]); err != nil {
				return ColdRead{}, readEnd{}, err
			}
			size := int64(b.Size())
			if rel+size > int64(len(data)) || (!first && s.pos+size-from > int64(maxBytes)) {
				break
			}
			if rel+size <= ch.checked {
				// Its bytes were checked when the chunk came in.
				s.skip(b)
				continue
			}
			if err := s.checkBatch(data[rel : rel+size]); err != nil {
				return ColdRead{}, readEnd{}, err
			}
		}
		// A full slice expression, so that a caller's append cannot write
		// into the cached chunk.
		out = data[from-base : s.pos-base : s.pos-base]
		if s.pos-base == int64(len(data)) {
			r.chunks.readPast(chunkKey(seg.Key, idx))
		}
		if err := s.checkEnd(); err != nil {
			return ColdRead{}, readEnd{}, err
		}
		res := ColdRead{Batches: out, NextOffset: s.next, ref: ref}
		ref = nil
		return res, readEnd{pos: s.pos, chunk: o.chunkOf(s.pos - 1), chunks: int64(len(o.chunks))}, nil
	}
	if err := s.checkEnd(); err != nil {
		return ColdRead{}, readEnd{}, err
	}
	return ColdRead{Batches: out, NextOffset: s.next}, readEnd{pos: s.pos, chunk: o.chunkOf(s.pos - 1), chunks: int64(len(o.chunks))}, nil
}

// scanner walks the batches of one object's log bytes from an indexed
// batch on, checking that each one starts where the one before ended.
type scanner struct {
	r    *ColdReader
	o    *coldObject
	pos  int64 // position of the next batch
	next int64 // the offset it must start at
	hdr  [record.HeaderSize]byte
}

func (r *ColdReader) scan(o *coldObject, e IndexEntry) *scanner {
	return &scanner{r: r, o: o, pos: int64(e.Pos), next: o.footer.Base + int64(e.Rel)}
}

// done reports whether the scan has reached the end of the log bytes.
func (s *scanner) done() bool { return s.pos >= s.o.trailer.LogLen }

// header reads the header of the next batch, checking its length and its
// offsets; the rest of the batch is checked by appendBatch. The header is
// valid until the next call.
func (s *scanner) header(ctx context.Context) (record.Batch, error) {
	if s.pos+record.HeaderSize > s.o.trailer.LogLen {
		return nil, s.o.corrupt("the log ends inside the header of the batch at position %d", s.pos)
	}
	h, err := s.r.appendLog(ctx, s.o, s.hdr[:0], s.pos, s.pos+record.HeaderSize)
	if err != nil {
		return nil, err
	}
	return s.checkHeader(h)
}

// checkHeader checks the header h of the batch at the scan's position: its
// length against the log's end, and its offsets against the batch before.
func (s *scanner) checkHeader(h []byte) (record.Batch, error) {
	logLen := s.o.trailer.LogLen
	size, err := record.PeekSize(h)
	if err != nil {
		return nil, s.o.corrupt("batch at position %d: %w", s.pos, err)
	}
	b := record.Batch(h)
	switch {
	case s.pos+int64(size) > logLen:
		return nil, s.o.corrupt("batch of %d bytes at position %d runs past the log's end at %d", size, s.pos, logLen)
	case b.BaseOffset() != s.next:
		return nil, s.o.corrupt("batch at position %d has offset %d, want %d", s.pos, b.BaseOffset(), s.next)
	case b.LastOffsetDelta() < 0:
		return nil, s.o.corrupt("batch at position %d has last offset delta %d", s.pos, b.LastOffsetDelta())
	}
	return b, nil
}

// skip moves past the batch whose header was just read.
func (s *scanner) skip(b record.Batch) {
	s.pos += int64(b.Size())
	s.next = b.NextOffset()
}

// appendBatch appends the batch whose header was just read to dst, after
// checking all of it, and moves past it. On error dst comes back as it was.
func (s *scanner) appendBatch(ctx context.Context, dst []byte, b record.Batch) ([]byte, error) {
	start := len(dst)
	dst, err := s.r.appendLog(ctx, s.o, dst, s.pos, s.pos+int64(b.Size()))
	if err != nil {
		return dst[:start], err
	}
	if err := s.checkBatch(dst[start:]); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

// checkBatch checks all of the batch at the scan's position (length,
// magic, CRC, record count), whose header checkHeader passed, and moves
// past it.
func (s *scanner) checkBatch(data []byte) error {
	end := s.pos + int64(len(data))
	s.r.counters.checkedBytes.Add(uint64(len(data)))
	batch, _, err := record.Next(data)
	if err != nil {
		// Drop what the cache holds of it: if the damage was done on the
		// way (not in the bucket), a later read fetches it again.
		s.r.dropChunks(s.o, s.pos, end)
		return s.o.corrupt("batch at position %d: %w", s.pos, err)
	}
	s.pos, s.next = end, batch.NextOffset()
	return nil
}

// checkEnd checks, once the scan reached the end of the log, that the
// batches ended where the trailer says.
func (s *scanner) checkEnd() error {
	if s.done() && s.next != s.o.trailer.LastOffset+1 {
		return s.o.corrupt("the batches end at offset %d, the trailer says %d", s.next-1, s.o.trailer.LastOffset)
	}
	return nil
}

// appendLog appends o's log bytes [from, to) to dst, chunk by chunk.
func (r *ColdReader) appendLog(ctx context.Context, o *coldObject, dst []byte, from, to int64) ([]byte, error) {
	for idx := o.chunkOf(from); idx < int64(len(o.chunks)) && o.chunks[idx] < to; idx++ {
		ch, err := r.chunk(ctx, o, idx, false)
		if err != nil {
			return dst, err
		}
		data, base := ch.data, o.chunks[idx]
		dst = append(dst, data[max(from-base, 0):min(to-base, int64(len(data)))]...)
		ch.release()
	}
	return dst, nil
}

// errPassed ends read-ahead of a chunk its reader has passed already. It
// counts as a cancellation, so that a read that joined the GET runs its
// own.
var errPassed = fmt.Errorf("tiering: read-ahead overtaken by its reader: %w", context.Canceled)

// chunk returns chunk idx of o's log bytes, from the cache or the store,
// with a reference the caller must release. A GET reads the bytes straight
// into a buffer from the arena.
// Read-ahead (prefetch) gives up with errPassed, rather than send the GET,
// if a reader of o's partition has read past the chunk meanwhile.
func (r *ColdReader) chunk(ctx context.Context, o *coldObject, idx int64, prefetch bool) (*chunk, error) {
	off, end := o.chunkRange(idx)
	n := end - off
	return r.chunks.get(ctx, chunkKey(o.seg.Key, idx), prefetch, func(ctx context.Context) (*chunk, error) {
		overtaken := func() bool { return prefetch && r.passed(o, idx) }
		if overtaken() {
			return nil, errPassed
		}
		buf, pooled := r.arena.get(int(n))
		b := buf[:n]
		err := r.get(ctx, o.part, n, func() error {
			if overtaken() { // checked again: the GET may have waited
				return errPassed
			}
			r.counters.chunkGets.Add(1)
			if prefetch {
				r.counters.readAheadChunks.Add(1)
			}
			_, err := o.rd.ReadAt(ctx, b, off)
			return err
		})
		if err != nil {
			newChunk(r.arena, buf, pooled, nil).release()
			return nil, fmt.Errorf("tiering: read cold segment %s chunk %d: %w", o.seg.Key, idx, err)
		}
		r.counters.bytesFetched.Add(uint64(n))
		return r.checkChunk(o, idx, newChunk(r.arena, buf, pooled, b)), nil
	})
}

// checkChunk wraps chunk idx of o's log bytes, just fetched, with how much
// of it was checked: from its start, when a batch starts there (chunk 0, or
// one the index names: see chunkStarts), every whole batch up to the first
// that fails a check or runs past the chunk's end. Reads of those batches
// then check only their offsets, however often the cache serves them; a
// batch found bad here is left for the read that reaches it to report.
// The work is done once per GET, by whoever fetched the chunk (often
// read-ahead), not on every read.
func (r *ColdReader) checkChunk(o *coldObject, idx int64, ch *chunk) *chunk {
	if !o.batchStartsAt(o.chunks[idx]) {
		return ch
	}
	for rest := ch.data; len(rest) > 0; {
		b, next, err := record.Next(rest)
		if err != nil {
			break
		}
		ch.checked += int64(len(b))
		rest = next
	}
	r.counters.checkedBytes.Add(uint64(ch.checked))
	return ch
}

// dropChunks forgets the cached chunks holding o's log bytes [from, to).
func (r *ColdReader) dropChunks(o *coldObject, from, to int64) {
	for idx := o.chunkOf(from); idx < int64(len(o.chunks)) && o.chunks[idx] < to; idx++ {
		r.chunks.drop(chunkKey(o.seg.Key, idx))
	}
}
