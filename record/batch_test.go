package record

import (
	"testing"
)

func TestSetBaseOffsetAndLeaderEpoch(t *testing.T) {
	for _, codec := range allCodecs {
		in := sampleRecords(6)
		b := Batch(clone(mustEncode(t, codecOpts(codec), in...)))
		crc := b.CRC()
		b.SetBaseOffset(1 << 40)
		b.SetLeaderEpoch(12)
		if err := b.Validate(); err != nil {
			t.Fatalf("%v: Validate after set: %v", codec, err)
		}
		if b.CRC() != crc {
			t.Fatalf("%v: CRC changed", codec)
		}
		if b.BaseOffset() != 1<<40 || b.LeaderEpoch() != 12 || b.LastOffset() != 1<<40+5 || b.NextOffset() != 1<<40+6 {
			t.Fatalf("%v: base %d epoch %d last %d", codec, b.BaseOffset(), b.LeaderEpoch(), b.LastOffset())
		}
		got, err := b.Records()
		if err != nil {
			t.Fatal(err)
		}
		requireRecordsEqual(t, got, decodedForm(in, 1<<40, nil))
	}
}

func TestSetLogAppendTime(t *testing.T) {
	const appendTime = 1_800_000_000_000
	for _, codec := range allCodecs {
		in := sampleRecords(6)
		opts := codecOpts(codec)
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 5, 1, 10
		b := Batch(clone(mustEncode(t, opts, in...)))
		first := b.FirstTimestamp()
		b.SetLogAppendTime(appendTime)
		if err := b.Validate(); err != nil {
			t.Fatalf("%v: Validate after SetLogAppendTime: %v", codec, err)
		}
		if err := b.ValidateRecords(); err != nil {
			t.Fatalf("%v: ValidateRecords: %v", codec, err)
		}
		if b.TimestampType() != LogAppendTime || b.MaxTimestamp() != appendTime ||
			b.Compression() != codec || b.FirstTimestamp() != first || b.ProducerID() != 5 {
			t.Fatalf("%v: type %v max %d codec %v", codec, b.TimestampType(), b.MaxTimestamp(), b.Compression())
		}
		got, err := b.Records()
		if err != nil {
			t.Fatal(err)
		}
		at := int64(appendTime)
		requireRecordsEqual(t, got, decodedForm(in, 0, &at))
	}
}

func TestSetProducer(t *testing.T) {
	for _, codec := range allCodecs {
		in := sampleRecords(3)
		b := Batch(clone(mustEncode(t, codecOpts(codec), in...)))
		if b.ProducerID() != NoProducerID || b.ProducerEpoch() != -1 || b.BaseSequence() != -1 {
			t.Fatalf("%v: default producer fields %d %d %d", codec, b.ProducerID(), b.ProducerEpoch(), b.BaseSequence())
		}
		b.SetProducer(1<<40, 3, 1<<31-2)
		if err := b.ValidateRecords(); err != nil {
			t.Fatalf("%v: after SetProducer: %v", codec, err)
		}
		if b.ProducerID() != 1<<40 || b.ProducerEpoch() != 3 || b.BaseSequence() != 1<<31-2 || b.Compression() != codec {
			t.Fatalf("%v: producer %d epoch %d sequence %d", codec, b.ProducerID(), b.ProducerEpoch(), b.BaseSequence())
		}
		opts := codecOpts(codec)
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = 1<<40, 3, 1<<31-2
		if want := mustEncode(t, opts, in...); string(b) != string(want) {
			t.Fatalf("%v: differs from a batch built with the same producer fields", codec)
		}
	}
}

func TestAttributeBits(t *testing.T) {
	b := Batch(clone(mustEncode(t, codecOpts(CompressionLZ4), Record{})))
	b[22] |= attrTransactional | attrControl
	if !b.IsTransactional() || !b.IsControl() || b.Compression() != CompressionLZ4 || b.TimestampType() != CreateTime {
		t.Fatalf("attributes %#x misread", b.Attributes())
	}
}

func TestZeroAllocs(t *testing.T) {
	b := mustEncode(t, DefaultBatchOptions(), sampleRecords(20)...)
	s := Batch(clone(b))
	var sink int64
	checks := map[string]func(){
		"Validate": func() {
			if err := b.Validate(); err != nil {
				t.Fatal(err)
			}
		},
		"ValidateRecords uncompressed": func() {
			if err := b.ValidateRecords(); err != nil {
				t.Fatal(err)
			}
		},
		"accessors": func() {
			sink += b.BaseOffset() + int64(b.BatchLength()) + int64(b.Size()) + int64(b.LeaderEpoch()) +
				int64(b.Magic()) + int64(b.CRC()) + int64(b.Attributes()) + int64(b.Compression()) +
				int64(b.TimestampType()) + int64(b.LastOffsetDelta()) + b.LastOffset() + b.NextOffset() +
				b.FirstTimestamp() + b.MaxTimestamp() + b.ProducerID() + int64(b.ProducerEpoch()) +
				int64(b.BaseSequence()) + int64(b.NumRecords())
		},
		"Next": func() {
			if _, _, err := Next(b); err != nil {
				t.Fatal(err)
			}
		},
		"SetBaseOffset+SetLeaderEpoch+SetLogAppendTime": func() {
			s.SetBaseOffset(7)
			s.SetLeaderEpoch(3)
			s.SetLogAppendTime(1000)
		},
	}
	for name, f := range checks {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %.1f allocs, want 0", name, n)
		}
	}
	_ = sink
}

// TestBuilderSteadyStateAllocs: a reused Builder and buffer encode
// uncompressed batches without allocating.
func TestBuilderSteadyStateAllocs(t *testing.T) {
	recs := sampleRecords(64)
	bld := NewBuilder(DefaultBatchOptions())
	var buf []byte
	run := func() {
		bld.Reset(DefaultBatchOptions())
		for _, r := range recs {
			bld.Add(r)
		}
		var err error
		if _, buf, err = bld.AppendTo(buf[:0]); err != nil {
			t.Fatal(err)
		}
	}
	run() // warm the buffers
	if n := testing.AllocsPerRun(50, run); n != 0 {
		t.Errorf("Reset + 64 Add + AppendTo: %.1f allocs, want 0", n)
	}
}
