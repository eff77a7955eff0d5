package tiering

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering/objstore"
)

var copyRef = PartitionRef{Topic: "events-copy", TopicID: "fedcba9876543210fedcba9876543210", Partition: 3}

// coldSource uploads a log of batches of 3 records (offset o has timestamp
// 1000+o and a value carrying o) to testRef and returns its head.
func coldSource(t *testing.T, store objstore.Bucket) *Head {
	t.Helper()
	l := localLog(t, t.TempDir())
	fill(t, l, 200, 3, 1000)
	c := newTestCommitter(t, store, 1)
	if uploadAll(t, c, l) < 3 {
		t.Fatal("too few segments uploaded")
	}
	return c.Head()
}

type copiedRecord struct{ offset, ts, value int64 }

// readCopy reads every record the head names, checking each object.
func readCopy(t *testing.T, store objstore.Reader, h *Head, ref PartitionRef) []copiedRecord {
	t.Helper()
	var out []copiedRecord
	err := ForEachSegment(testContext(t), store, h, func(s SegmentRef) bool {
		data, _, err := store.Get(testContext(t), s.Key)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := DecodeTrailer(data[max(0, len(data)-76):], int64(len(data)))
		if err != nil || tr.BaseOffset != s.BaseOffset || tr.LastOffset != s.LastOffset || tr.LogLen != s.LogLen || tr.ObjectSize() != s.Size || tr.MaxTs != s.MaxTs || tr.MinTs != s.MinTs || tr.LogCRC != s.LogCRC {
			t.Fatalf("segment %+v: trailer %+v, %v", s, tr, err)
		}
		if s.Epoch != 0 || len(s.Epochs) != 1 || s.Epochs[0] != (EpochStart{Epoch: 0, Start: s.BaseOffset}) {
			t.Fatalf("segment %+v: epochs of the copy", s)
		}
		if !strings.HasPrefix(s.Key, ref.SegmentPrefix()) {
			t.Fatalf("segment key %s is outside the copy's prefix", s.Key)
		}
		log := data[:tr.LogLen]
		for len(log) > 0 {
			b, rest, err := record.Next(log)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.ValidateRecords(); err != nil {
				t.Fatal(err)
			}
			if b.LeaderEpoch() != 0 {
				t.Fatalf("batch %d has leader epoch %d in the copy", b.BaseOffset(), b.LeaderEpoch())
			}
			recs, err := b.Records()
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				out = append(out, copiedRecord{r.Offset, r.Timestamp, int64(binary.BigEndian.Uint64(r.Value))})
			}
			log = rest
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func checkCopy(t *testing.T, got []copiedRecord, end int64) {
	t.Helper()
	if int64(len(got)) != end {
		t.Fatalf("copy holds %d records, want %d", len(got), end)
	}
	for i, r := range got {
		if r.offset != int64(i) || r.value != int64(i) || r.ts != 1000+int64(i) {
			t.Fatalf("record %d is %+v", i, r)
		}
	}
}

func TestCopyPartitionCutsAStraddlingBatchByOffset(t *testing.T) {
	store := objstore.NewMemory()
	src := coldSource(t, store)
	before, err := EncodeHead(src)
	if err != nil {
		t.Fatal(err)
	}
	srcKeys := listKeys(t, store, testRef.dir()+"/")
	// 301 is inside the batch 300..302, inside some segment.
	for i, cut := range []int64{301, 300, src.EndOffset(), src.EndOffset() + 50, 1} {
		dst := copyRef
		dst.Partition = int32(i)
		h, err := CopyPartition(testContext(t), store, src, dst, RestoreCut{ToOffset: cut, ToTime: NoCut})
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		want := min(cut, src.EndOffset())
		if h == nil || h.EndOffset() != want || h.StartOffset() != 0 || h.Generation != 1 || h.LeaderEpoch != 0 || h.Partitions != src.Partitions || h.Config["retention.ms"] != "-1" {
			t.Fatalf("cut %d: head %+v", cut, h)
		}
		loaded, _, err := LoadHead(testContext(t), store, dst)
		if err != nil || loaded == nil || loaded.EndOffset() != want {
			t.Fatalf("cut %d: stored head %+v, %v", cut, loaded, err)
		}
		got := readCopy(t, store, loaded, dst)
		checkCopy(t, got, want)
	}
	// The source is untouched: same head, same objects.
	after, _, err := LoadHead(testContext(t), store, testRef)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := EncodeHead(after)
	if !bytes.Equal(before, again) || strings.Join(srcKeys, ",") != strings.Join(listKeys(t, store, testRef.dir()+"/"), ",") {
		t.Fatal("the copy changed the source")
	}
}

func TestCopyPartitionByTimeKeepsRecordsAtT(t *testing.T) {
	store := objstore.NewMemory()
	src := coldSource(t, store)
	// Offset o has timestamp 1000+o: up to T=1000+301 is offsets 0..301.
	h, err := CopyPartition(testContext(t), store, src, copyRef, RestoreCut{ToOffset: NoCut, ToTime: 1000 + 301})
	if err != nil {
		t.Fatal(err)
	}
	checkCopy(t, readCopy(t, store, h, copyRef), 302)
	// A time before the first record keeps nothing and writes nothing.
	empty := copyRef
	empty.Partition = 9
	h, err = CopyPartition(testContext(t), store, src, empty, RestoreCut{ToOffset: NoCut, ToTime: 999})
	if err != nil || h != nil {
		t.Fatalf("empty copy: %+v, %v", h, err)
	}
	if keys := listKeys(t, store, empty.dir()+"/"); len(keys) != 0 {
		t.Fatalf("an empty copy wrote %v", keys)
	}
}

func TestCopyPartitionIsSoundForVerify(t *testing.T) {
	store := objstore.NewMemory()
	src := coldSource(t, store)
	if _, err := CopyPartition(testContext(t), store, src, copyRef, RestoreCut{ToOffset: 301, ToTime: NoCut}); err != nil {
		t.Fatal(err)
	}
	rep, err := VerifyBucket(testContext(t), store, VerifyOptions{})
	if err != nil || !rep.Sound() {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
}

// A batch the cut falls inside keeps its first records, at their offsets
// and timestamps, with its codec and producer fields; by time, the batch
// ends before its first record after T even when a later one is older.
func TestCutBatchReencodesTheKeptRecords(t *testing.T) {
	opts := record.BatchOptions{Compression: record.CompressionZstd, LeaderEpoch: 4, ProducerID: 77, ProducerEpoch: 2, BaseSequence: 10}
	bl := record.NewBuilder(opts)
	for i, ts := range []int64{100, 105, 103, 110, 101} {
		bl.Add(record.Record{Timestamp: ts, Key: []byte{byte(i)}, Value: []byte("v"), Headers: []record.Header{{Key: "h", Value: []byte{byte(i)}}}})
	}
	b, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	b.SetBaseOffset(40)
	for _, tc := range []struct {
		cut  RestoreCut
		keep int
	}{
		{RestoreCut{ToOffset: 42, ToTime: NoCut}, 2},
		{RestoreCut{ToOffset: NoCut, ToTime: 105}, 3},
		{RestoreCut{ToOffset: NoCut, ToTime: 109}, 3},
		{RestoreCut{ToOffset: NoCut, ToTime: 99}, 0},
		{RestoreCut{ToOffset: 41, ToTime: 200}, 1},
	} {
		out, err := cutBatch(b, tc.cut)
		if err != nil {
			t.Fatal(err)
		}
		if tc.keep == 0 {
			if out != nil {
				t.Fatalf("%+v: kept %d records", tc.cut, out.NumRecords())
			}
			continue
		}
		if err := out.Validate(); err != nil {
			t.Fatal(err)
		}
		if out.BaseOffset() != 40 || out.LeaderEpoch() != 4 || out.ProducerID() != 77 || out.ProducerEpoch() != 2 || out.BaseSequence() != 10 || out.Compression() != record.CompressionZstd || int(out.NumRecords()) != tc.keep {
			t.Fatalf("%+v: batch header offset %d epoch %d producer %d/%d/%d codec %v records %d", tc.cut, out.BaseOffset(), out.LeaderEpoch(), out.ProducerID(), out.ProducerEpoch(), out.BaseSequence(), out.Compression(), out.NumRecords())
		}
		want, _ := b.Records()
		got, err := out.Records()
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range got {
			w := want[i]
			if r.Offset != w.Offset || r.Timestamp != w.Timestamp || !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) || len(r.Headers) != 1 || !bytes.Equal(r.Headers[0].Value, w.Headers[0].Value) {
				t.Fatalf("%+v: record %d is %+v, want %+v", tc.cut, i, r, w)
			}
		}
	}
}
