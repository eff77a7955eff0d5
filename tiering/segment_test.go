package tiering

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/strata-log/strata/record"
)

func TestSegmentObjectRoundTrip(t *testing.T) {
	log := segmentBytes(t, 1000, 300, 5, 1_700_000_000_000, 300)
	var obj bytes.Buffer
	tr, err := EncodeSegment(&obj, bytes.NewReader(log), int64(len(log)), 1000, -1, nil)
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
	got, err := DecodeTrailer(data[len(data)-trailerSizeV2:], int64(len(data)))
	if err != nil || got != tr || got.Version != segmentVersion {
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
	tr, err := EncodeSegment(&obj, bytes.NewReader(log), int64(len(log)), 0, 12, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := record.Next(obj.Bytes())
	if err != nil || tr.BaseOffset != 12 || first.BaseOffset() != 12 || tr.LastOffset != 39 {
		t.Fatalf("from 12: trailer %+v, first batch %d, %v", tr, first.BaseOffset(), err)
	}
	if _, err := EncodeSegment(&bytes.Buffer{}, bytes.NewReader(log), int64(len(log)), 0, 13, nil); err == nil {
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
			if _, err := EncodeSegment(&bytes.Buffer{}, bytes.NewReader(bad), int64(len(bad)), 0, -1, nil); err == nil {
				t.Fatal("damaged local segment encoded")
			}
		})
	}
}

func TestTrailerAndFooterChecks(t *testing.T) {
	log := segmentBytes(t, 0, 50, 4, 0, 100)
	var obj bytes.Buffer
	tr, err := EncodeSegment(&obj, bytes.NewReader(log), int64(len(log)), 0, -1, []byte("producers"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"version 2": obj.Bytes(), "version 1": toVersion1(t, segmentObject(t, log, nil))} {
		t.Run(name, func(t *testing.T) {
			size := int64(len(data))
			tail := data[len(data)-maxTrailerSize:]
			if _, err := DecodeTrailer(tail, size); err != nil {
				t.Fatal(err)
			}
			// Every byte of the trailer counts, whichever version it is.
			trailerLen := map[string]int{"version 2": trailerSizeV2, "version 1": trailerSizeV1}[name]
			for i := maxTrailerSize - trailerLen; i < maxTrailerSize; i++ {
				bad := append([]byte(nil), tail...)
				bad[i] ^= 0x10
				if _, err := DecodeTrailer(bad, size); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("trailer with byte %d flipped: %v", i, err)
				}
			}
			if _, err := DecodeTrailer(tail, size+1); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("trailer for the wrong object size: %v", err)
			}
		})
	}
	footer := append([]byte(nil), obj.Bytes()[tr.LogLen:tr.LogLen+tr.FooterLen()]...)
	footer[3] ^= 1
	if _, err := DecodeFooter(footer, tr); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged footer: %v", err)
	}
	snap := append([]byte(nil), obj.Bytes()[tr.ProducersPos():tr.ProducersPos()+int64(tr.ProducersLen)]...)
	if err := CheckProducerSnapshot(snap, tr); err != nil {
		t.Fatal(err)
	}
	snap[0] ^= 1
	if err := CheckProducerSnapshot(snap, tr); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged producer snapshot: %v", err)
	}
	if err := CheckProducerSnapshot(snap[1:], tr); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short producer snapshot: %v", err)
	}
}

func FuzzDecodeTrailerAndFooter(f *testing.F) {
	log := segmentBytes(f, 0, 20, 2, 0, 10)
	f.Add(segmentObject(f, log, nil))
	f.Add(segmentObject(f, log, []byte("a producer snapshot")))
	f.Add(toVersion1(f, segmentObject(f, log, nil)))
	f.Fuzz(func(t *testing.T, data []byte) {
		tail := data[len(data)-min(len(data), maxTrailerSize):]
		tr, err := DecodeTrailer(tail, int64(len(data)))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("trailer error %v is not ErrCorrupt", err)
			}
			return
		}
		if tr.ObjectSize() != int64(len(data)) {
			t.Fatalf("a trailer for %d bytes was accepted for an object of %d", tr.ObjectSize(), len(data))
		}
		if _, err := DecodeFooter(data[tr.LogLen:tr.LogLen+tr.FooterLen()], tr); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("footer error %v is not ErrCorrupt", err)
		}
		snap := data[tr.ProducersPos() : tr.ProducersPos()+int64(tr.ProducersLen)]
		if err := CheckProducerSnapshot(snap, tr); err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNoProducerSnapshot) {
			t.Fatalf("producer snapshot error %v is neither ErrCorrupt nor ErrNoProducerSnapshot", err)
		}
	})
}

func FuzzDecodeManifest(f *testing.F) {
	h := &Head{Topic: "t", TopicID: "x", Tail: []SegmentRef{{Key: "k", BaseOffset: 0, LastOffset: 9}}}
	data, _ := EncodeHead(h)
	f.Add(data)
	p, _ := EncodePart(&Part{Seq: 1, Segments: []SegmentRef{{Key: "a", LastOffset: 3}, {Key: "b", BaseOffset: 4, LastOffset: 8}}})
	f.Add(p)
	scanning := &Head{Topic: "t", TopicID: "x", Tail: []SegmentRef{{Key: "k", BaseOffset: 0, LastOffset: 9}}, CleanedTo: 2, CleanScan: &CleanScan{End: 9, Next: 5}}
	data, _ = EncodeHead(scanning)
	f.Add(data)
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

// segmentObject encodes a whole local segment, from its first batch, as a
// cold object carrying producers.
func segmentObject(t testing.TB, log, producers []byte) []byte {
	t.Helper()
	first, _, err := record.Next(log)
	if err != nil {
		t.Fatal(err)
	}
	var obj bytes.Buffer
	if _, err := EncodeSegment(&obj, bytes.NewReader(log), int64(len(log)), first.BaseOffset(), -1, producers); err != nil {
		t.Fatal(err)
	}
	return obj.Bytes()
}

// toVersion1 rewrites a cold object without a producer snapshot in the
// version 1 layout, as objects were written before they carried one: the
// same log and footer, and the shorter trailer.
func toVersion1(t testing.TB, obj []byte) []byte {
	t.Helper()
	tr, err := DecodeTrailer(obj[len(obj)-trailerSizeV2:], int64(len(obj)))
	if err != nil || tr.ProducersLen != 0 {
		t.Fatalf("not a version 2 object without producers: %+v, %v", tr, err)
	}
	b := append([]byte(nil), obj[:tr.LogLen+tr.FooterLen()]...)
	at := len(b)
	b = append(b, segmentMagic[:]...)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(tr.BaseOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(tr.LastOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(tr.LogLen))
	b = binary.BigEndian.AppendUint32(b, tr.Entries)
	b = binary.BigEndian.AppendUint64(b, uint64(tr.MinTs))
	b = binary.BigEndian.AppendUint64(b, uint64(tr.MaxTs))
	b = binary.BigEndian.AppendUint32(b, tr.LogCRC)
	b = binary.BigEndian.AppendUint32(b, tr.FooterCRC)
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b[at:], castagnoli))
	if len(b)-at != trailerSizeV1 {
		t.Fatalf("version 1 trailer of %d bytes", len(b)-at)
	}
	return b
}
