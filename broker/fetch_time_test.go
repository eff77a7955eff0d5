package broker

import "testing"

func TestEarlierAnswer(t *testing.T) {
	none := timeAnswer{}
	for _, tc := range []struct {
		name      string
		cold, hot timeAnswer
		off, ts   int64
	}{
		{"only in the cold tier", timeAnswer{40, 400, true}, none, 40, 400},
		{"only on local disk", none, timeAnswer{150, 1500, true}, 150, 1500},
		// Local retention deleted the segment holding 191 after the cold
		// tier was asked: the hot tier's first match is the next segment's.
		{"retention between the lookups", timeAnswer{191, 1910, true}, timeAnswer{196, 1960, true}, 191, 1910},
		{"both hold it", timeAnswer{120, 1200, true}, timeAnswer{120, 1200, true}, 120, 1200},
		{"every record older", none, none, 200, -1},
		{"a hot answer at the high watermark is not one", none, timeAnswer{200, 2000, true}, 200, -1},
	} {
		if off, ts := earlierAnswer(tc.cold, tc.hot, 200); off != tc.off || ts != tc.ts {
			t.Errorf("%s: %d (ts %d), want %d (ts %d)", tc.name, off, ts, tc.off, tc.ts)
		}
	}
}
