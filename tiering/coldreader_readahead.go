package tiering

import "context"

// resumePoint returns the mark of an earlier read of p that ended at
// offset, if one is remembered: the read starting there is sequential.
func (r *ColdReader) resumePoint(p PartitionRef, offset int64) (readMark, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.stateLocked(p).ends {
		if m.next == offset {
			return m, true
		}
	}
	return readMark{}, false
}

// noteRead records that a read of p from offset ended at m. A few such
// marks are kept per partition, so that consumers replaying the same
// partition side by side are each seen as sequential: a read that
// continues one replaces its mark, any other takes the oldest slot.
func (r *ColdReader) noteRead(p PartitionRef, offset int64, m readMark) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.stateLocked(p)
	for i := range st.ends {
		if st.ends[i].next == offset {
			st.ends[i] = m
			return
		}
	}
	st.ends[st.nextEnd] = m
	st.nextEnd = (st.nextEnd + 1) % len(st.ends)
}

// readAhead fetches in the background the ReadAhead chunks of seg that
// follow a sequential read which ended at log position end.pos; when they
// run past the end of the object, the next segment's footer and first
// chunk instead of the chunks that are not there. It only starts work for
// chunks neither cached nor in flight.
func (r *ColdReader) readAhead(h *Head, seg SegmentRef, end readEnd) {
	n := int64(r.cfg.ReadAhead)
	if n <= 0 {
		return
	}
	cb := r.cfg.ChunkBytes
	chunks := (end.logLen + cb - 1) / cb
	last := (end.pos - 1) / cb // the chunk of the read's last byte
	for idx := last + 1; idx <= last+n && idx < chunks; idx++ {
		if !r.chunks.has(chunkKey(seg.Key, idx)) {
			r.spawn(func(ctx context.Context) { r.prefetch(ctx, seg, idx) })
		}
	}
	if last+n >= chunks {
		r.spawn(func(ctx context.Context) {
			if next, ok, err := r.segmentAfter(ctx, h, seg); ok && err == nil {
				r.prefetch(ctx, next, 0)
			}
		})
	}
}

// prefetch brings chunk idx of seg into the cache (and seg's footer, if
// needed). It is best effort: a failure is left for a read to meet.
func (r *ColdReader) prefetch(ctx context.Context, seg SegmentRef, idx int64) {
	o, err := r.object(ctx, seg)
	if err != nil {
		return
	}
	defer o.release()
	r.chunk(ctx, o, idx, true)
}

// spawn runs fn in a read-ahead goroutine, with a context that Close
// cancels, if fewer than readerPrefetches are running: read-ahead that
// cannot start now is skipped, not queued, as the reader will have moved on
// by the time it could run.
func (r *ColdReader) spawn(fn func(ctx context.Context)) {
	select {
	case r.prefetching <- struct{}{}:
	default:
		return
	}
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		<-r.prefetching
		return
	}
	r.background.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.background.Done()
		defer func() { <-r.prefetching }()
		fn(r.ctx)
	}()
}
