package record

import (
	"math"
	"testing"
)

func TestRoundTripEveryCodec(t *testing.T) {
	in := sampleRecords(40)
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			opts := BatchOptions{
				Compression: codec, BaseOffset: 1000, LeaderEpoch: 3,
				ProducerID: 77, ProducerEpoch: 2, BaseSequence: 500,
			}
			b := mustEncode(t, opts, in...)
			if err := b.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if err := b.ValidateRecords(); err != nil {
				t.Fatalf("ValidateRecords: %v", err)
			}
			if b.Compression() != codec || b.NumRecords() != 40 || b.LastOffset() != 1039 ||
				b.LeaderEpoch() != 3 || b.ProducerID() != 77 || b.ProducerEpoch() != 2 || b.BaseSequence() != 500 {
				t.Fatalf("header fields wrong: codec %v n %d last %d", b.Compression(), b.NumRecords(), b.LastOffset())
			}
			if b.FirstTimestamp() != in[0].Timestamp {
				t.Errorf("FirstTimestamp %d, want the first record's %d", b.FirstTimestamp(), in[0].Timestamp)
			}
			var maxTs int64 = math.MinInt64
			for _, r := range in {
				maxTs = max(maxTs, r.Timestamp)
			}
			if b.MaxTimestamp() != maxTs {
				t.Errorf("MaxTimestamp %d, want %d", b.MaxTimestamp(), maxTs)
			}

			want := decodedForm(in, 1000, nil)
			got, err := b.Records()
			if err != nil {
				t.Fatalf("Records: %v", err)
			}
			requireRecordsEqual(t, got, want)

			var iterated []Record
			for r, err := range b.All() {
				if err != nil {
					t.Fatalf("All: %v", err)
				}
				iterated = append(iterated, r)
			}
			requireRecordsEqual(t, iterated, want)
		})
	}
}

func TestAllStopsEarly(t *testing.T) {
	b := mustEncode(t, DefaultBatchOptions(), sampleRecords(10)...)
	n := 0
	for _, err := range b.All() {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 3 {
			break
		}
	}
	if n != 3 {
		t.Fatalf("iterated %d records", n)
	}
}

func TestExtremeTimestamps(t *testing.T) {
	in := []Record{
		{Timestamp: math.MaxInt64, Value: []byte("a")},
		{Timestamp: math.MinInt64, Value: []byte("b")},
		{Timestamp: -1},
		{Timestamp: 0},
	}
	b := mustEncode(t, DefaultBatchOptions(), in...)
	got, err := b.Records()
	if err != nil {
		t.Fatal(err)
	}
	requireRecordsEqual(t, got, decodedForm(in, 0, nil))
}

func TestBuilderReuse(t *testing.T) {
	bld := NewBuilder(DefaultBatchOptions())
	for round := range 3 {
		opts := codecOpts(allCodecs[round])
		opts.BaseOffset = int64(round * 100)
		bld.Reset(opts)
		in := sampleRecords(5 + round)
		for _, r := range in {
			bld.Add(r)
		}
		if bld.Len() != len(in) {
			t.Fatalf("Len %d, want %d", bld.Len(), len(in))
		}
		b, err := bld.Build()
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.Records()
		if err != nil {
			t.Fatal(err)
		}
		requireRecordsEqual(t, got, decodedForm(in, int64(round*100), nil))
	}
}

func TestBuilderEstimatedSize(t *testing.T) {
	bld := NewBuilder(DefaultBatchOptions())
	if got := bld.EstimatedSize(); got != HeaderSize {
		t.Fatalf("empty EstimatedSize %d, want %d", got, HeaderSize)
	}
	for _, r := range sampleRecords(12) {
		bld.Add(r)
	}
	b, err := bld.Build()
	if err != nil {
		t.Fatal(err)
	}
	if bld.EstimatedSize() != len(b) {
		t.Fatalf("EstimatedSize %d, uncompressed batch is %d bytes", bld.EstimatedSize(), len(b))
	}
}

func TestAppendToKeepsPrefix(t *testing.T) {
	prefix := []byte("existing bytes")
	bld := NewBuilder(codecOpts(CompressionZstd))
	bld.Add(Record{Value: []byte("x")})
	batch, dst, err := bld.AppendTo(clone(prefix))
	if err != nil {
		t.Fatal(err)
	}
	if string(dst[:len(prefix)]) != string(prefix) || len(dst) != len(prefix)+len(batch) {
		t.Fatalf("dst %q, batch of %d bytes", dst[:len(prefix)], len(batch))
	}
	if err := Batch(dst[len(prefix):]).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestBuilderErrors(t *testing.T) {
	if _, err := NewBuilder(DefaultBatchOptions()).Build(); err != ErrNoRecords {
		t.Fatalf("empty Build: %v, want ErrNoRecords", err)
	}
	if _, err := Encode(codecOpts(7), Record{}); !IsCorrupt(err) || !errorsIs(err, ErrUnknownCompression) {
		t.Fatalf("codec 7: %v, want ErrUnknownCompression", err)
	}
	opts := DefaultBatchOptions()
	opts.TimestampType = 3
	if _, err := Encode(opts, Record{}); err == nil {
		t.Fatal("timestamp type 3 accepted")
	}
}

func TestLogAppendTimeOption(t *testing.T) {
	opts := DefaultBatchOptions()
	opts.TimestampType = LogAppendTime
	in := []Record{{Timestamp: 10}, {Timestamp: 30}, {Timestamp: 20}}
	b := mustEncode(t, opts, in...)
	if b.TimestampType() != LogAppendTime || b.MaxTimestamp() != 30 {
		t.Fatalf("type %v max %d", b.TimestampType(), b.MaxTimestamp())
	}
	got, err := b.Records()
	if err != nil {
		t.Fatal(err)
	}
	appendTime := int64(30)
	requireRecordsEqual(t, got, decodedForm(in, 0, &appendTime))
}

func TestCompressionNames(t *testing.T) {
	for _, c := range allCodecs {
		got, err := ParseCompression(c.String())
		if err != nil || got != c {
			t.Errorf("ParseCompression(%q) = %v, %v", c.String(), got, err)
		}
	}
	if c, err := ParseCompression("ZSTD"); err != nil || c != CompressionZstd {
		t.Errorf("ParseCompression is case-sensitive: %v, %v", c, err)
	}
	_, err := ParseCompression("brotli")
	if err == nil || err.Error() != `record: unknown compression "brotli" (allowed: none, gzip, snappy, lz4, zstd)` {
		t.Errorf("ParseCompression(brotli) error: %v", err)
	}
	if IsCorrupt(err) {
		t.Error("a configuration error must not be a corruption error")
	}
	if s := Compression(9).String(); s != "Compression(9)" {
		t.Errorf("String of unknown codec: %q", s)
	}
	if CreateTime.String() != "CreateTime" || LogAppendTime.String() != "LogAppendTime" {
		t.Error("TimestampType names")
	}
}
