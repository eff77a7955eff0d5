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

// readAhead fetches in the background the chunks that follow a
// sequential read of p which ended in chunk end.chunk of seg, ReadAhead
// chunks' worth of bytes (chunkCost): the rest of seg's chunks, then those
// of the segments after it in h, so that a replay of small segments has
// several objects in flight, not one after the other, and as many bytes
// ahead as one of large segments. It starts work only for chunks neither
// cached nor on their way. The read-ahead lives as long as ctx, the
// reader's caller's: a consumer that goes away cancels the downloads
// started for it.
func (r *ColdReader) readAhead(ctx context.Context, p PartitionRef, h *Head, seg SegmentRef, end readEnd) {
	budget := int64(r.cfg.ReadAhead) * r.cfg.ChunkBytes
	if budget <= 0 || ctx.Err() != nil {
		return
	}
	for idx := end.chunk + 1; budget > 0 && idx < end.chunks; idx++ {
		cost := r.chunkCost(seg, idx)
		if !r.prefetchChunk(ctx, p, seg, idx, cost) {
			return
		}
		budget -= cost
	}
	if budget <= 0 {
		return
	}
	// The next segments: finding them may read a manifest part, so it is
	// read-ahead work of its own. The chunks it starts live as long as the
	// caller's ctx, not as long as this walk.
	r.spawn(ctx, "", 0, func(walk context.Context) {
		cb := r.cfg.ChunkBytes
		for next := seg; budget > 0; {
			var ok bool
			var err error
			if next, ok, err = r.segmentAfter(walk, h, next); !ok || err != nil {
				return
			}
			// An object has a chunk per ChunkBytes of log; one whose
			// manifest does not say how long the log is (written before
			// it did) counts as one.
			chunks := max((next.LogLen+cb-1)/cb, 1)
			for idx := int64(0); budget > 0 && idx < chunks; idx++ {
				cost := r.chunkCost(next, idx)
				if !r.prefetchChunk(ctx, p, next, idx, cost) {
					return
				}
				budget -= cost
			}
		}
	})
}

// chunkCost is what chunk idx of seg counts for against read-ahead's
// budgets: the log bytes of its nominal range [idx, idx+1) * ChunkBytes,
// so ChunkBytes but for an object's last chunk, or a small object's only
// one. (Chunks start at batches, a little after their nominal start, and
// hold about as much.) One of an object whose manifest does not say how
// long its log is counts as a whole chunk.
func (r *ColdReader) chunkCost(seg SegmentRef, idx int64) int64 {
	cb := r.cfg.ChunkBytes
	if seg.LogLen <= 0 {
		return cb
	}
	return max(min(cb, seg.LogLen-idx*cb), 1)
}

// prefetchChunk starts fetching chunk idx of seg into the cache (and seg's
// footer, if need be), unless it is cached or on its way. cost is what it
// counts for (chunkCost). It is best effort: a failure is left for a read
// to meet. It returns false when read-ahead has no room for the chunk now:
// the chunks after it must wait too, or read-ahead would leave a gap for
// the reader to fetch itself.
func (r *ColdReader) prefetchChunk(ctx context.Context, p PartitionRef, seg SegmentRef, idx, cost int64) bool {
	key := chunkKey(seg.Key, idx)
	if r.chunks.has(key) {
		return true
	}
	return r.spawn(ctx, key, cost, func(ctx context.Context) {
		o, err := r.object(ctx, p, seg)
		if err != nil {
			return
		}
		defer o.release()
		if idx < int64(len(o.chunks)) {
			if ch, err := r.chunk(ctx, o, idx, true); err == nil {
				ch.release() // the cache holds it
			}
		}
	})
}

// passed reports whether a reader of o's partition has already read past
// chunk idx of o: read-ahead that started late (the store was slow, or the
// reader fast) would fetch it for nobody.
func (r *ColdReader) passed(o *coldObject, idx int64) bool {
	_, end := o.chunkRange(idx)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.stateLocked(o.part).ends {
		if m.next > o.seg.LastOffset || (m.key == o.seg.Key && m.pos >= end) {
			return true
		}
	}
	return false
}

// spawn runs fn in a read-ahead goroutine, with a context that ends with
// ctx or with Close, if fewer than readerPrefetches are running. A
// non-empty key names the chunk fn fetches, which counts for cost bytes:
// it starts only if none is running for that chunk already, and while the
// cache has room for that much more read-ahead (chunkCache.aheadBytes).
// Read-ahead that cannot start now is skipped, not queued, as the reader
// will have moved on by the time it could run. spawn returns false when there was no room for fn (the
// reader is closed, or every slot is taken), true when fn runs or already
// ran for key.
func (r *ColdReader) spawn(ctx context.Context, key string, cost int64, fn func(ctx context.Context)) bool {
	select {
	case r.prefetching <- struct{}{}:
	default:
		return false
	}
	r.mu.Lock()
	_, busy := r.mu.prefetches[key]
	full := key != "" && !busy && !r.chunks.aheadRoom(r.mu.prefetchBytes, cost)
	if r.mu.closed || busy || full {
		r.mu.Unlock()
		<-r.prefetching
		return busy
	}
	if key != "" {
		r.mu.prefetches[key] = cost
		r.mu.prefetchBytes += cost
	}
	r.background.Add(1)
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.ctx, cancel)
	go func() {
		defer r.background.Done()
		defer func() {
			stop()
			cancel()
			if key != "" {
				r.mu.Lock()
				delete(r.mu.prefetches, key)
				r.mu.prefetchBytes -= cost
				r.mu.Unlock()
			}
			<-r.prefetching
		}()
		fn(ctx)
	}()
	return true
}

// get sends one GET of n bytes from p's cold tier, run by fn, once Pace
// lets it and one of the MaxGets places is free. Pacing comes first, so a
// GET held back by a limit does not hold a place meanwhile.
func (r *ColdReader) get(ctx context.Context, p PartitionRef, n int64, fn func() error) error {
	if r.cfg.Pace != nil {
		if err := r.cfg.Pace(ctx, p, n); err != nil {
			return err
		}
	}
	select {
	case r.gets <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.gets }()
	return fn()
}
