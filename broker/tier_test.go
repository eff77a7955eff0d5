package broker

import (
	"testing"
	"time"

	"github.com/strata-log/strata/hotlog"
)

func TestLocalCut(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	// Four sealed segments of 100 bytes (newest record at 1000*i ms) and the
	// active one.
	segs := []hotlog.SegmentInfo{
		{BaseOffset: 0, LastOffset: 9, MaxTimestamp: 0, Size: 100, Sealed: true},
		{BaseOffset: 10, LastOffset: 19, MaxTimestamp: 1000, Size: 100, Sealed: true},
		{BaseOffset: 20, LastOffset: 29, MaxTimestamp: 2000, Size: 100, Sealed: true},
		{BaseOffset: 30, LastOffset: 39, MaxTimestamp: 3000, Size: 100, Sealed: true},
		{BaseOffset: 40, LastOffset: 44, MaxTimestamp: 4000, Size: 50},
	}
	for _, c := range []struct {
		name      string
		limit     int64
		ms, bytes int64
		want      int64
	}{
		{"unbounded", 1 << 40, -1, -1, -1},
		{"by age", 1 << 40, now.UnixMilli() - 1500, -1, 20},
		{"by size", 1 << 40, -1, 260, 20}, // 450 bytes: two segments go
		{"never past the limit", 15, -1, 0, 10},
		{"never the active segment", 1 << 40, 0, 0, 40},
		{"nothing uploaded", 0, 0, 0, -1},
	} {
		if got := localCut(segs, c.limit, c.ms, c.bytes, now); got != c.want {
			t.Errorf("%s: cut %d, want %d", c.name, got, c.want)
		}
	}
}
