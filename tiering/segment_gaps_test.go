package tiering

import (
	"bytes"
	"strings"
	"testing"

	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
)

// What tiering/FORMAT.md says of compacted batches: a local segment whose
// batches hold fewer records than their ranges (and empty ones) becomes an
// object holding its bytes as they are, whose index finds a batch at or
// before every offset and whose batches decode to the kept records; a
// segment with a gap between batches is refused, naming the offsets.
func TestSegmentObjectOfCompactedBatches(t *testing.T) {
	log, offsets := testutil.GappedLog(t, []testutil.GapSpec{
		{Base: 100, LastDelta: 9, Keep: []int32{2, 9}},
		{Base: 110, LastDelta: 4, Keep: nil},
		{Base: 115, LastDelta: 4, Keep: []int32{0, 1, 2, 3, 4}},
		{Base: 120, LastDelta: 29, Keep: []int32{29}},
	}, 1, 1_700_000_000_000)
	var obj bytes.Buffer
	tr, err := EncodeSegment(&obj, bytes.NewReader(log), int64(len(log)), 100, -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr.BaseOffset != 100 || tr.LastOffset != 149 || !bytes.Equal(obj.Bytes()[:len(log)], log) {
		t.Fatalf("trailer %+v; the object's log bytes equal the segment's: %v", tr, bytes.Equal(obj.Bytes()[:len(log)], log))
	}
	data := obj.Bytes()
	f, err := DecodeFooter(data[tr.LogLen:tr.LogLen+tr.FooterLen()], tr)
	if err != nil {
		t.Fatal(err)
	}
	for off := int64(100); off <= 149; off++ {
		pos := f.PositionFor(off)
		if b, _, err := record.Next(log[pos:]); err != nil || b.BaseOffset() > off {
			t.Fatalf("PositionFor(%d) = %d: batch %d, %v", off, pos, b.BaseOffset(), err)
		}
	}
	var got []int64
	for rest := log; len(rest) > 0; {
		b, next, err := record.Next(rest)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := b.Records()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got = append(got, r.Offset)
		}
		rest = next
	}
	if len(got) != len(offsets) {
		t.Fatalf("object records %v, want %v", got, offsets)
	}

	gapped, _ := testutil.GappedLog(t, []testutil.GapSpec{
		{Base: 100, LastDelta: 9, Keep: []int32{2}},
		{Base: 130, LastDelta: 0, Keep: []int32{0}},
	}, 1, 1_700_000_000_000)
	obj.Reset()
	_, err = EncodeSegment(&obj, bytes.NewReader(gapped), int64(len(gapped)), 100, -1, nil)
	if err == nil || !strings.Contains(err.Error(), "has offset 130, want 110") {
		t.Fatalf("a segment with a gap between batches: %v", err)
	}
}
