package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// seedBatches are valid batches of every codec, plus a concatenation: the
// fuzzers mutate from real structure rather than from nothing.
func seedBatches(t testing.TB) [][]byte {
	var seeds [][]byte
	for _, codec := range allCodecs {
		opts := codecOpts(codec)
		opts.BaseOffset = 100
		seeds = append(seeds, mustEncode(t, opts, sampleRecords(5)...))
	}
	two := append(clone(seeds[0]), seeds[4]...)
	return append(seeds, two)
}

// FuzzNext: any bytes. Next must not panic; a batch it returns lies within
// the input, validates, parses again to itself, and decodes either to
// NumRecords records or to a corruption error.
func FuzzNext(f *testing.F) {
	for _, s := range seedBatches(f) {
		f.Add(s)
		f.Add(s[:len(s)-1])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		batch, rest, err := Next(data)
		// NextVerified skips only the CRC: where Next passes, it splits the
		// same way.
		vbatch, vrest, verifiedErr := NextVerified(data)
		if err == nil && (verifiedErr != nil || !bytes.Equal(vbatch, batch) || len(vrest) != len(rest)) {
			t.Fatalf("Next passed, NextVerified gave %d and %d bytes, %v", len(vbatch), len(vrest), verifiedErr)
		}
		if verifiedErr != nil && verifiedErr != ErrShortBuffer && !IsCorrupt(verifiedErr) {
			t.Fatalf("NextVerified: error is neither short buffer nor corruption: %v", verifiedErr)
		}
		if err != nil {
			if batch != nil {
				t.Fatal("batch returned with an error")
			}
			if err != ErrShortBuffer && !IsCorrupt(err) {
				t.Fatalf("error is neither short buffer nor corruption: %v", err)
			}
			return
		}
		if len(batch) > len(data) || len(batch)+len(rest) != len(data) {
			t.Fatalf("batch %d + rest %d bytes from %d", len(batch), len(rest), len(data))
		}
		if err := batch.Validate(); err != nil {
			t.Fatalf("Next returned a batch failing Validate: %v", err)
		}
		again, rest2, err := Next(batch)
		if err != nil || !bytes.Equal(again, batch) || len(rest2) != 0 {
			t.Fatalf("Next on the batch itself: %v, %d bytes left", err, len(rest2))
		}
		recs, err := batch.Records()
		verr := batch.ValidateRecords()
		if err != nil {
			if !IsCorrupt(err) {
				t.Fatalf("Records: non-corruption error %v", err)
			}
			if verr == nil {
				t.Fatalf("Records failed (%v) but ValidateRecords passed", err)
			}
			return
		}
		if verr != nil {
			t.Fatalf("Records passed but ValidateRecords failed: %v", verr)
		}
		if len(recs) != int(batch.NumRecords()) {
			t.Fatalf("%d records, header says %d", len(recs), batch.NumRecords())
		}
		for i, r := range recs {
			if r.Offset != batch.BaseOffset()+int64(i) {
				t.Fatalf("record %d has offset %d", i, r.Offset)
			}
		}
	})
}

// FuzzDecodeRecords: any bytes as the records section behind a header that
// is otherwise valid (count, lastOffsetDelta and CRC fixed up), with any
// codec, so the record parser and the decompressors see hostile input.
// Decoding must not panic, every error must be corruption, and the three
// decoding paths must agree.
func FuzzDecodeRecords(f *testing.F) {
	for _, s := range seedBatches(f)[:len(allCodecs)] {
		b := Batch(s)
		f.Add(uint8(b.Compression()), uint16(b.NumRecords()), false, []byte(s[HeaderSize:]))
	}
	f.Add(uint8(0), uint16(1), true, []byte{0x0c, 0, 0, 0, 1, 1, 0})
	f.Fuzz(func(t *testing.T, codec uint8, count uint16, logAppend bool, section []byte) {
		n := int32(count%1000) + 1
		b := make([]byte, HeaderSize, HeaderSize+len(section))
		binary.BigEndian.PutUint32(b[8:], uint32(HeaderSize-12+len(section)))
		b[16] = Magic
		attrs := uint16(codec % 5)
		if logAppend {
			attrs |= attrLogAppendTime
		}
		binary.BigEndian.PutUint16(b[21:], attrs)
		binary.BigEndian.PutUint32(b[23:], uint32(n-1))
		binary.BigEndian.PutUint32(b[57:], uint32(n))
		b = append(b, section...)
		fixCRC(b)
		batch := Batch(b)
		if err := batch.Validate(); err != nil {
			t.Fatalf("constructed header invalid: %v", err)
		}

		recs, rerr := batch.Records()
		verr := batch.ValidateRecords()
		var ierr error
		count2 := 0
		for _, err := range batch.All() {
			if err != nil {
				ierr = err
				break
			}
			count2++
		}
		for name, err := range map[string]error{"Records": rerr, "ValidateRecords": verr, "All": ierr} {
			if err != nil && !IsCorrupt(err) {
				t.Fatalf("%s: non-corruption error %v", name, err)
			}
		}
		if (rerr == nil) != (verr == nil) || (rerr == nil) != (ierr == nil) {
			t.Fatalf("paths disagree: Records %v, ValidateRecords %v, All %v", rerr, verr, ierr)
		}
		if rerr == nil && (len(recs) != int(n) || count2 != int(n)) {
			t.Fatalf("%d and %d records, header says %d", len(recs), count2, n)
		}
	})
}

// FuzzRoundTrip: records built from fuzzed fields, in any codec, decode to
// exactly what went in, and the batch survives Next.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint8(0), uint8(1), []byte("key"), []byte("value"), false, false, "h", []byte("hv"), int64(1_700_000_000_000), int64(-5))
	f.Add(uint8(1), uint8(3), []byte{}, []byte{}, true, false, "", []byte(nil), int64(0), int64(1))
	f.Add(uint8(2), uint8(7), []byte("k"), bytes.Repeat([]byte("ab"), 40_000), false, true, "x", []byte{}, int64(-1), int64(1<<40))
	f.Add(uint8(3), uint8(2), []byte(nil), []byte("v"), false, false, "trace", []byte("id"), int64(5), int64(0))
	f.Add(uint8(4), uint8(4), []byte("kk"), []byte("zstd value zstd value"), false, false, "a", []byte("b"), int64(99), int64(-99))
	f.Fuzz(func(t *testing.T, codec, n uint8, key, value []byte, nullKey, nullValue bool, hkey string, hval []byte, ts, step int64) {
		c := Compression(codec % 5)
		if nullKey {
			key = nil
		} else if key == nil {
			key = []byte{}
		}
		if nullValue {
			value = nil
		} else if value == nil {
			value = []byte{}
		}
		in := make([]Record, int(n%8)+1)
		for i := range in {
			r := Record{Timestamp: ts + int64(i)*step, Key: key, Value: value}
			if i%2 == 1 {
				r.Headers = []Header{{Key: hkey, Value: hval}, {Key: hkey + "2", Value: key}}
			}
			if i%3 == 2 {
				r.Key, r.Value = value, key // mix null and non-null across records
			}
			in[i] = r
		}
		opts := codecOpts(c)
		opts.BaseOffset = ts // any int64 works as a base offset
		b, err := Encode(opts, in...)
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		got, rest, err := Next(b)
		if err != nil || len(rest) != 0 {
			t.Fatalf("Next: %v", err)
		}
		recs, err := got.Records()
		if errors.Is(err, ErrTooLarge) {
			return // a fuzzed value over MaxDecompressedSize is not a bug
		}
		if err != nil {
			t.Fatalf("Records: %v", err)
		}
		requireRecordsEqual(t, recs, decodedForm(in, ts, nil))
		if err := got.ValidateRecords(); err != nil {
			t.Fatalf("ValidateRecords: %v", err)
		}
	})
}

// hostileSections are records sections that leaders once acknowledged and
// stored although nobody could read them back, with the record count the
// batch header claimed: the reported cases, as fuzzer seeds. The bombs are
// scaled down (8 MiB of zstd RLE blocks, 4 MiB of gzip): they still exceed
// any limit the fuzzer picks, and small seeds keep minimization quick.
func hostileSections(t testing.TB) []struct {
	codec Compression
	count int32
	data  []byte
} {
	three := mustEncode(t, DefaultBatchOptions(), sampleRecords(3)...)[HeaderSize:]
	one := mustEncode(t, DefaultBatchOptions(), Record{Key: []byte("k"), Value: []byte("v")})[HeaderSize:]
	rec := func(body ...byte) []byte { return append(appendVarint(nil, int64(len(body))), body...) }
	garbage := make([]byte, 300)
	for i := range garbage {
		garbage[i] = byte(i*131 + 7)
	}
	out := []struct {
		codec Compression
		count int32
		data  []byte
	}{
		{CompressionNone, 50, three},
		{CompressionNone, 1, rec(0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 2, 'v', 0)},
		{CompressionNone, 1, rec(0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0)},
		{CompressionNone, 1, garbage},
		{CompressionNone, math.MaxInt32, one},
		{CompressionZstd, 1, zstdRLEFrame(64)},
		{CompressionGzip, 1, compressZeros(t, CompressionGzip, 4<<20)},
	}
	for _, c := range allCodecs[1:] {
		out = append(out, struct {
			codec Compression
			count int32
			data  []byte
		}{c, 3, garbage})
	}
	return out
}

// FuzzValidateRecordsLimit: the leader's check of a producer's batch. Any
// records section, codec, count and limit: no panic; every error is
// corruption; whatever it accepts decodes under the same limit to exactly
// the records the header counts, and whatever decoding refuses (under that
// limit or the default one) it refuses too, with the same error.
func FuzzValidateRecordsLimit(f *testing.F) {
	for _, s := range seedBatches(f)[:len(allCodecs)] {
		b := Batch(s)
		section := []byte(b[HeaderSize:])
		raw := mustEncode(f, DefaultBatchOptions(), sampleRecords(5)...)
		f.Add(uint8(b.Compression()), uint32(b.NumRecords()), false, uint32(len(raw)-HeaderSize), section)
		f.Add(uint8(b.Compression()), uint32(b.NumRecords()), true, uint32(len(raw)-HeaderSize-1), section)
	}
	for _, h := range hostileSections(f) {
		f.Add(uint8(h.codec), uint32(h.count), false, uint32(1<<20), h.data)
	}
	// Records without a timestamp (-1) and with a negative one, after a
	// first record at the count<<20 the target writes as the first
	// timestamp: the times the check reports skip -1 for Min only.
	for _, ts := range [][]int64{{2 << 20, NoTimestamp}, {2 << 20, -5}, {3 << 20, NoTimestamp, 1 << 40}} {
		recs := make([]Record, len(ts))
		for i := range ts {
			recs[i].Timestamp = ts[i]
		}
		section := []byte(mustEncode(f, DefaultBatchOptions(), recs...)[HeaderSize:])
		f.Add(uint8(CompressionNone), uint32(len(ts)), false, uint32(1<<20), section)
	}
	f.Fuzz(func(t *testing.T, codec uint8, count uint32, logAppend bool, limit uint32, section []byte) {
		n := max(int32(count&math.MaxInt32), 1)
		lim := int(limit%(2<<20)) + 1
		b := make([]byte, HeaderSize, HeaderSize+len(section))
		binary.BigEndian.PutUint32(b[8:], uint32(HeaderSize-LengthOffset+len(section)))
		b[16] = Magic
		attrs := uint16(codec % 5)
		if logAppend {
			attrs |= attrLogAppendTime
		}
		binary.BigEndian.PutUint16(b[21:], attrs)
		binary.BigEndian.PutUint32(b[23:], uint32(n-1))
		binary.BigEndian.PutUint64(b[27:], uint64(count)<<20) // any first timestamp
		binary.BigEndian.PutUint32(b[57:], uint32(n))
		b = append(b, section...)
		fixCRC(b)
		batch := Batch(b)

		verr := batch.ValidateRecordsLimit(lim)
		if verr != nil && !IsCorrupt(verr) {
			t.Fatalf("non-corruption error %v", verr)
		}
		// The CRC is right, so skipping it changes nothing.
		if cerr := batch.CheckRecords(lim); (cerr == nil) != (verr == nil) || (cerr != nil && cerr.Error() != verr.Error()) {
			t.Fatalf("CheckRecords says %v, ValidateRecordsLimit %v", cerr, verr)
		}
		times, terr := batch.CheckRecordTimes(lim)
		if (terr == nil) != (verr == nil) || (terr != nil && terr.Error() != verr.Error()) {
			t.Fatalf("CheckRecordTimes says %v, ValidateRecordsLimit %v", terr, verr)
		}
		recs, rerr := batch.RecordsLimit(lim)
		if (verr == nil) != (rerr == nil) || (verr != nil && verr.Error() != rerr.Error()) {
			t.Fatalf("validator says %v, RecordsLimit(%d) says %v", verr, lim, rerr)
		}
		if _, err := batch.Records(); err != nil && verr == nil {
			t.Fatalf("accepted under limit %d, but Records fails: %v", lim, err)
		}
		if verr != nil {
			return
		}
		if len(recs) != int(n) {
			t.Fatalf("accepted %d records, header says %d", len(recs), n)
		}
		for i, r := range recs {
			if r.Offset != int64(i) {
				t.Fatalf("record %d has offset %d", i, r.Offset)
			}
		}
		// The times gathered while checking are the decoded records'.
		if want := timesOf(recs); times != want {
			t.Fatalf("CheckRecordTimes gave %+v, the decoded records have %+v", times, want)
		}
		got := 0
		for _, err := range batch.AllLimit(lim) {
			if err != nil {
				t.Fatalf("AllLimit after acceptance: %v", err)
			}
			got++
		}
		if got != int(n) {
			t.Fatalf("AllLimit gave %d records, header says %d", got, n)
		}
	})
}
