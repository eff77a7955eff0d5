package tiering

import (
	"bytes"
	"errors"
	"testing"

	"github.com/strata-log/strata/record"
)

func TestSegmentObjectRoundTrip(t *testing.T) {
	log := segmentBytes(t, 1000, 300, 5, 1_700_000_000_000, 300)
	var obj bytes.Buffer
	tr, err := EncodeSegment(&obj, bytes.NewReader(log), int64(len(log)), 1000, -1)
	if err != nil {
		t.Fatal(err)
	}
	if tr.BaseOffset != 1000 || tr.LastOffset != 2499 || tr.LogLen != int64(len(log)) || tr.ObjectSize() != int64(obj.Len()) {
		t.Fatalf("trailer %+v for %d log bytes in a %d byte object", tr, len(log), obj.Len())
	}
	if !bytes.Equal(obj.Bytes()[:len(log)], log) {
		t.Fatal("the object's log bytes differ from the segment's")
	}
	data := obj.Bytes()
	got, err := DecodeTrailer(data[len(data)-trailerSize:], int64(len(data)))
	if err != nil || got != tr {
		t.Fatalf("decoded trailer %+v, %v; want %+v", got, err, tr)
	}
	f, err := DecodeFooter(data[tr.LogLen:tr.LogLen+tr.FooterLen()], tr)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Entries) < 5 {
		t.Fatalf("only %d index entries for %d bytes", len(f.Entries), len(log))
	}
	// Every offset: the indexed position is a batch at or before it.
	for off := int64(1000); off <= 2499; off += 37 {
		pos := f.PositionFor(off)
		b, _, err := record.Next(log[pos:])
		if err != nil || b.BaseOffset() > off {
			t.Fatalf("PositionFor(%d) = %d: batch %d, %v", off, pos, b.BaseOffset(), err)
		}
	}
	// A time lookup starts at or before the first record with that time.
	ts := int64(1_700_000_000_000 + 1800)
	pos := f.PositionForTime(ts)
	if b, _, _ := record.Next(log[pos:]); b.MaxTimestamp() >= ts && b.BaseOffset() > 1800 {
		t.Fatalf("PositionForTime(%d) starts at batch %d, past the record", ts, b.BaseOffset())
	}
}

func TestSegmentObjectFromOffset(t *testing.T) {
	log := segmentBytes(t, 0, 10, 4, 0, 50)
	var obj bytes.Buffer
	tr, err := EncodeSegment(&obj, bytes.NewReader(log), int64(len(log)), 0, 12)
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := record.Next(obj.Bytes())
	if err != nil || tr.BaseOffset != 12 || first.BaseOffset() != 12 || tr.LastOffset != 39 {
		t.Fatalf("from 12: trailer %+v, first batch %d, %v", tr, first.BaseOffset(), err)
	}
	if _, err := EncodeSegment(&bytes.Buffer{}, bytes.NewReader(log), int64(len(log)), 0, 13); err == nil {
		t.Fatal("an offset inside a batch was accepted")
	}
}

func TestSegmentObjectRefusesDamagedLocalData(t *testing.T) {
	log := segmentBytes(t, 0, 10, 4, 0, 50)
	cases := map[string]func([]byte) []byte{
		"flipped byte": func(b []byte) []byte { b[len(b)/2] ^= 1; return b },
		"torn tail":    func(b []byte) []byte { return b[:len(b)-7] },
		"gap":          func(b []byte) []byte { record.Batch(b).SetBaseOffset(1); return b },
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			bad := damage(append([]byte(nil), log...))
			if _, err := EncodeSegment(&bytes.Buffer{}, bytes.NewReader(bad), int64(len(bad)), 0, -1); err == nil {
				t.Fatal("damaged local segment encoded")
			}
		})
	}
}

func TestTrailerAndFooterChecks(t *testing.T) {
	log := segmentBytes(t, 0, 50, 4, 0, 100)
	var obj bytes.Buffer
	tr, err := EncodeSegment(&obj, bytes.NewReader(log), int64(len(log)), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	data := obj.Bytes()
	for i := range trailerSize {
		bad := append([]byte(nil), data[len(data)-trailerSize:]...)
		bad[i] ^= 0x10
		if _, err := DecodeTrailer(bad, int64(len(data))); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("trailer with byte %d flipped: %v", i, err)
		}
	}
	if _, err := DecodeTrailer(data[len(data)-trailerSize:], int64(len(data))+1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailer for the wrong object size: %v", err)
	}
	footer := append([]byte(nil), data[tr.LogLen:tr.LogLen+tr.FooterLen()]...)
	footer[3] ^= 1
	if _, err := DecodeFooter(footer, tr); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged footer: %v", err)
	}
}

func FuzzDecodeTrailerAndFooter(f *testing.F) {
	log := segmentBytes(f, 0, 20, 2, 0, 10)
	var obj bytes.Buffer
	if _, err := EncodeSegment(&obj, bytes.NewReader(log), int64(len(log)), 0, -1); err != nil {
		f.Fatal(err)
	}
	f.Add(obj.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < trailerSize {
			return
		}
		tr, err := DecodeTrailer(data[len(data)-trailerSize:], int64(len(data)))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("trailer error %v is not ErrCorrupt", err)
			}
			return
		}
		if _, err := DecodeFooter(data[tr.LogLen:tr.LogLen+tr.FooterLen()], tr); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("footer error %v is not ErrCorrupt", err)
		}
	})
}

func FuzzDecodeManifest(f *testing.F) {
	h := &Head{Topic: "t", TopicID: "x", Tail: []SegmentRef{{Key: "k", BaseOffset: 0, LastOffset: 9}}}
	data, _ := EncodeHead(h)
	f.Add(data)
	p, _ := EncodePart(&Part{Seq: 1, Segments: []SegmentRef{{Key: "a", LastOffset: 3}, {Key: "b", BaseOffset: 4, LastOffset: 8}}})
	f.Add(p)
	f.Fuzz(func(t *testing.T, data []byte) {
		if h, err := DecodeHead(data); err == nil {
			again, err := EncodeHead(h)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecodeHead(again); err != nil {
				t.Fatalf("a decoded head does not re-encode: %v", err)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("head error %v is not ErrCorrupt", err)
		}
		if _, err := DecodePart(data); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("part error %v is not ErrCorrupt", err)
		}
	})
}
