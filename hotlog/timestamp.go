package hotlog

import (
	"fmt"

	"github.com/strata-log/strata/record"
)

// OffsetForTimestamp returns the earliest offset whose record timestamp is at
// least ts, with that record's timestamp, and false when every record is
// older. Timestamps need not grow
// with offsets (producers set them), so it finds the first segment whose
// largest timestamp reaches ts, starts from the last time index entry whose
// running maximum is still below ts, walks batch headers to the first batch
// whose maximum reaches ts, and decodes that batch's records.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, found bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed {
		return 0, 0, false, ErrClosed
	}
	start := l.logStart.Load()
	for _, seg := range l.mu.segments {
		if max := seg.maxTs.Load(); max == noTimestamp || max < ts {
			continue
		}
		off, rts, ok, err := seg.offsetForTimestamp(ts, start)
		if err != nil || ok {
			return off, rts, ok, err
		}
	}
	return 0, 0, false, nil
}

func (s *segment) offsetForTimestamp(ts, logStart int64) (int64, int64, bool, error) {
	f, err := s.open()
	if err != nil {
		return 0, 0, false, err
	}
	defer s.done()
	size := s.size.Load()
	pos := int64(0)
	if t, ok := s.times.search(func(e timeEntry) bool { return e.maxTs < ts }); ok {
		e, _ := s.index.search(func(e offsetEntry) bool { return e.rel <= t.rel })
		pos = int64(e.pos)
	}
	for pos < size {
		h, err := s.readHeader(f, pos)
		if err != nil {
			return 0, 0, false, err
		}
		if h.MaxTimestamp() >= ts && h.LastOffset() >= logStart {
			b := make([]byte, h.Size())
			if _, err := f.ReadAt(b, pos); err != nil {
				return 0, 0, false, fmt.Errorf("hotlog: read %s at %d: %w", s.path, pos, err)
			}
			batch := record.Batch(b)
			for r, err := range batch.All() {
				if err != nil {
					return 0, 0, false, fmt.Errorf("hotlog: decode batch at %s:%d: %w", s.path, pos, err)
				}
				if r.Timestamp >= ts && r.Offset >= logStart {
					return r.Offset, r.Timestamp, true, nil
				}
			}
		}
		pos += int64(h.Size())
	}
	return 0, 0, false, nil
}
