package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// withRecords makes a batch around a records section: count records, the
// codec given, length and CRC fixed, so only the records section is wrong.
func withRecords(t testing.TB, codec Compression, count int32, section []byte) Batch {
	t.Helper()
	b := clone(mustEncode(t, DefaultBatchOptions(), Record{Value: []byte("x")})[:HeaderSize])
	b = append(b, section...)
	binary.BigEndian.PutUint16(b[21:], uint16(codec))
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-LengthOffset))
	binary.BigEndian.PutUint32(b[23:], uint32(count-1))
	binary.BigEndian.PutUint32(b[57:], uint32(count))
	fixCRC(b)
	if err := Batch(b).Validate(); err != nil {
		t.Fatalf("header: %v", err)
	}
	return b
}

// zeroReader yields zeros forever: the content of a bomb.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// compressZeros compresses n zero bytes with a streaming encoder, so a bomb
// costs its compressed size, not n, to build. zstd states no content size.
func compressZeros(t testing.TB, c Compression, n int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch c {
	case CompressionGzip:
		w, _ = gzip.NewWriterLevel(&buf, gzip.BestCompression)
	case CompressionZstd:
		w, _ = zstd.NewWriter(&buf, zstd.WithWindowSize(8<<20))
	case CompressionLZ4:
		lw := lz4.NewWriter(&buf)
		if err := lw.Apply(lz4.BlockSizeOption(lz4.Block4Mb)); err != nil {
			t.Fatal(err)
		}
		w = lw
	case CompressionSnappy:
		return appendXerial(nil, make([]byte, n))
	default:
		t.Fatalf("no bomb for %v", c)
	}
	if _, err := io.CopyN(w, zeroReader{}, n); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zstdRLEFrame is a zstd frame of n blocks, each one byte repeated 128 KiB
// times (RLE), with an 8 MiB window and no content size: 4 bytes of input
// per 128 KiB of output.
func zstdRLEFrame(n int) []byte {
	f := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 13 << 3} // magic, FHD, window 2^(10+13)
	for i := range n {
		h := uint32(128<<10)<<3 | 1<<1 // size, type RLE
		if i == n-1 {
			h |= 1 // last block
		}
		f = append(f, byte(h), byte(h>>8), byte(h>>16), 0)
	}
	return f
}

// allocated returns the bytes f allocates (including any goroutine running
// meanwhile: run it alone).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestValidateRecordsLimitBombs: every codec stops at the limit. A section
// that expands far past it is ErrTooLarge, through the validator and the
// decoders alike, and refusing it allocates a small multiple of the limit
// (a buffer doubling up to it), never anything near what the input claims.
func TestValidateRecordsLimitBombs(t *testing.T) {
	const expand = 32 << 20
	bombs := map[string]Batch{}
	for _, c := range allCodecs[1:] {
		bombs[c.String()] = withRecords(t, c, 1, compressZeros(t, c, expand))
	}
	bombs["zstd-rle-2GiB"] = withRecords(t, CompressionZstd, 1, zstdRLEFrame(2<<30/(128<<10)))
	// A frame that states 2 GiB of content: refused from its header.
	var claim bytes.Buffer
	zw, _ := zstd.NewWriter(&claim)
	zw.ResetContentSize(&claim, 2<<30)
	if _, err := io.CopyN(zw, zeroReader{}, 1<<20); err != nil {
		t.Fatal(err)
	}
	zw.Close() // fails: the frame is short of what it states; the header is what matters
	bombs["zstd-claims-2GiB"] = withRecords(t, CompressionZstd, 1, claim.Bytes())
	// A gzip trailer lying about the size (the decoder uses it as a hint).
	lying := clone(compressZeros(t, CompressionGzip, expand))
	binary.LittleEndian.PutUint32(lying[len(lying)-4:], 0x7fffffff)
	bombs["gzip-lying-trailer"] = withRecords(t, CompressionGzip, 1, lying)

	for name, b := range bombs {
		for _, limit := range []int{1 << 20, 4 << 20} {
			var err error
			n := allocated(func() { err = b.ValidateRecordsLimit(limit) })
			if !errors.Is(err, ErrTooLarge) {
				t.Errorf("%s, limit %d: ValidateRecordsLimit: %v, want ErrTooLarge", name, limit, err)
			}
			// Beyond the output, a codec may need fixed buffers: an lz4
			// frame declares its block size (4 MiB from the writer many Go
			// clients use), and the reader holds a block of input and one
			// of output whatever the limit.
			fixed := 1 << 20
			if b.Compression() == CompressionLZ4 {
				fixed = 2*4<<20 + 2<<20
			}
			if bound := uint64(3*limit + fixed); n > bound {
				t.Errorf("%s, limit %d: refusing it allocated %d bytes, over %d", name, limit, n, bound)
			}
			if _, err := b.RecordsLimit(limit); !errors.Is(err, ErrTooLarge) {
				t.Errorf("%s, limit %d: RecordsLimit: %v, want ErrTooLarge", name, limit, err)
			}
			t.Logf("%s (%d bytes), limit %d: %d bytes allocated", name, len(b), limit, n)
		}
	}
}

// TestValidateRecordsLimitExact: the limit is the largest records section
// accepted, in every codec, through the validator and the decoder.
func TestValidateRecordsLimitExact(t *testing.T) {
	in := sampleRecords(12) // a 100 KiB value: several blocks of every codec
	raw := mustEncode(t, DefaultBatchOptions(), in...)
	size := len(raw) - HeaderSize
	for _, c := range allCodecs {
		b := mustEncode(t, codecOpts(c), in...)
		if err := b.ValidateRecordsLimit(size); err != nil {
			t.Errorf("%v: limit %d = the section's size: %v", c, size, err)
		}
		if _, err := b.RecordsLimit(size); err != nil {
			t.Errorf("%v: RecordsLimit(%d): %v", c, size, err)
		}
		if c == CompressionNone {
			continue // nothing is decompressed: the batch size is bounded elsewhere
		}
		if err := b.ValidateRecordsLimit(size - 1); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%v: limit %d, one byte short: %v, want ErrTooLarge", c, size-1, err)
		}
		if _, err := b.RecordsLimit(size - 1); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%v: RecordsLimit(%d): %v, want ErrTooLarge", c, size-1, err)
		}
	}
	// A zstd frame of no stated size, larger than the first guess, decodes
	// (the buffer grows) under a limit it fits.
	big := mustEncode(t, DefaultBatchOptions(), Record{Value: bytes.Repeat([]byte("abcdefgh"), 1<<17)})
	section := compressStream(t, big[HeaderSize:])
	b := withRecords(t, CompressionZstd, 1, section)
	if err := b.ValidateRecordsLimit(2 << 20); err != nil {
		t.Fatalf("streamed zstd frame of %d bytes in %d: %v", len(big)-HeaderSize, len(section), err)
	}
	if err := b.ValidateRecordsLimit(len(big) - HeaderSize - 1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("streamed zstd frame one byte over: %v", err)
	}
}

// compressStream compresses p with a streaming zstd encoder: no content
// size in the frame.
func compressStream(t testing.TB, p []byte) []byte {
	var buf bytes.Buffer
	w, _ := zstd.NewWriter(&buf)
	if _, err := w.Write(p); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestValidateRecordsLimitMessages: a refusal names the record and the
// field, and what is wrong with it.
func TestValidateRecordsLimitMessages(t *testing.T) {
	// rec prefixes a record body with its length.
	rec := func(body ...byte) []byte { return append(appendVarint(nil, int64(len(body))), body...) }
	// Attributes, timestamp delta 0, offset delta 0, key "k", value "v",
	// no headers.
	good := rec(0, 0, 0, 2, 'k', 2, 'v', 0)
	three := mustEncode(t, DefaultBatchOptions(), sampleRecords(3)...)[HeaderSize:]
	cases := []struct {
		name    string
		count   int32
		section []byte
		want    error
		text    string
	}{
		{"valid", 1, good, nil, ""},
		{"count 50 over 3 records", 50, three, ErrBadCount, "batch says 50 records, records section holds 3"},
		{"key length 2^31", 1, rec(0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0), ErrBadRecord, "record 0: bad key: 2147483648 out of range"},
		{"10-byte varint", 1, rec(0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 2, 'v', 0), ErrBadRecord, "record 0: bad key: 10-byte varint (at most 5)"},
		{"timestamp delta over 10 bytes", 1, rec(0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0, 0), ErrBadRecord, "record 0: bad timestamp delta: varint longer than 10 bytes"},
		{"offset delta 1 first", 1, rec(0, 0, 2, 0, 0, 0), ErrBadCount, "record 0 has offset delta 1"},
		{"null header key", 1, rec(0, 0, 0, 1, 1, 2, 1, 1), ErrBadRecord, "record 0: bad key of header 0: -1 (null) where a value is required"},
		{"header count over the bytes", 1, rec(0, 0, 0, 1, 1, 20), ErrBadRecord, "record 0: bad header count: 10 with 0 bytes after it"},
		{"value past the record", 1, rec(0, 0, 0, 1, 8, 0), ErrBadRecord, "record 0: bad value: 4 with 1 bytes after it"},
		{"record length past the section", 1, append([]byte{40}, good[1:]...), ErrBadRecord, "record 0 at byte 0: bad length: 20 with 8 bytes after it"},
		{"trailing bytes", 1, append(clone(good), 1, 2, 3), ErrBadCount, "3 bytes follow the last of 1 records"},
		{"left over inside the record", 1, rec(0, 0, 0, 1, 1, 0, 9), ErrBadRecord, "record 0: 1 bytes left over"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := withRecords(t, CompressionNone, c.count, c.section)
			err := b.ValidateRecordsLimit(1 << 20)
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("got %v, want %v with %q", err, c.want, c.text)
			}
			if _, rerr := b.Records(); rerr == nil || rerr.Error() != err.Error() {
				t.Fatalf("Records says %v, the validator %v", rerr, err)
			}
		})
	}
}

// TestValidateRecordsLimitAllocs: validating an uncompressed batch, what
// most produce requests carry, does not allocate. (Compressed batches
// recycle pooled buffers; BenchmarkValidateRecordsLimit reports them, since
// the race detector makes pools drop items at random.)
func TestValidateRecordsLimitAllocs(t *testing.T) {
	b := mustEncode(t, DefaultBatchOptions(), sampleRecords(12)...)
	allocs := testing.AllocsPerRun(50, func() {
		if err := b.ValidateRecordsLimit(1 << 20); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per validation, want none", allocs)
	}
}

// TestCheckRecords: the produce path's check after Validate skips only the
// CRC; the header's layout is still checked, so no input panics.
func TestCheckRecords(t *testing.T) {
	b := clone(mustEncode(t, DefaultBatchOptions(), sampleRecords(4)...))
	if err := Batch(b).CheckRecords(1 << 20); err != nil {
		t.Fatal(err)
	}
	b[18] ^= 1 // the CRC itself: the records are intact
	if err := Batch(b).Validate(); !errors.Is(err, ErrBadCRC) {
		t.Fatalf("Validate: %v", err)
	}
	if err := Batch(b).CheckRecords(1 << 20); err != nil {
		t.Fatalf("CheckRecords checked the CRC: %v", err)
	}
	for _, n := range []int{0, 10, HeaderSize - 1, HeaderSize, len(b) - 1} {
		if err := Batch(b[:n]).CheckRecords(1 << 20); !errors.Is(err, ErrBadLength) {
			t.Errorf("%d bytes: %v, want ErrBadLength", n, err)
		}
	}
	lying := withRecords(t, CompressionNone, 50, mustEncode(t, DefaultBatchOptions(), sampleRecords(3)...)[HeaderSize:])
	if err := lying.CheckRecords(1 << 20); !errors.Is(err, ErrBadCount) {
		t.Errorf("count 50 over 3 records: %v", err)
	}
}

// timesOf is what CheckRecordTimes must report for decoded records.
func timesOf(recs []Record) RecordTimes {
	times := RecordTimes{First: recs[0].Timestamp, Max: recs[0].Timestamp, Min: NoTimestamp}
	for _, r := range recs {
		times.Max = max(times.Max, r.Timestamp)
		if r.Timestamp != NoTimestamp && (times.Min == NoTimestamp || r.Timestamp < times.Min) {
			times.Min = r.Timestamp
		}
		if r.Key == nil {
			times.Keyless++
		}
	}
	return times
}

// TestCheckRecordTimes: the records check reports the first, largest and
// smallest (other than -1) timestamp, as readers decode them, for every
// codec, and for a LogAppendTime batch the append time throughout; it
// counts the records without a key (here every other one; an empty key is
// a key).
func TestCheckRecordTimes(t *testing.T) {
	for _, c := range []struct {
		name string
		ts   []int64
		want RecordTimes
	}{
		{"in order", []int64{10, 20, 30}, RecordTimes{First: 10, Max: 30, Min: 10}},
		{"out of order", []int64{20, 30, 10}, RecordTimes{First: 20, Max: 30, Min: 10}},
		{"no timestamps", []int64{-1, -1}, RecordTimes{First: -1, Max: -1, Min: -1}},
		{"some without", []int64{-1, 50, -1, 40}, RecordTimes{First: -1, Max: 50, Min: 40}},
		{"negative", []int64{5, -1000, -1}, RecordTimes{First: 5, Max: 5, Min: -1000}},
		{"extremes", []int64{math.MaxInt64, math.MinInt64}, RecordTimes{First: math.MaxInt64, Max: math.MaxInt64, Min: math.MinInt64}},
	} {
		recs := make([]Record, len(c.ts))
		for i, ts := range c.ts {
			recs[i] = Record{Timestamp: ts, Value: []byte("v")}
			if i%2 == 1 {
				recs[i].Key = []byte{}
			}
		}
		c.want.Keyless = (len(recs) + 1) / 2
		if n := timesOf(recs).Keyless; n != c.want.Keyless {
			t.Fatalf("%s: the oracle counts %d keyless records, want %d", c.name, n, c.want.Keyless)
		}
		for _, codec := range allCodecs {
			opts := DefaultBatchOptions()
			opts.Compression = codec
			got, err := mustEncode(t, opts, recs...).CheckRecordTimes(1 << 20)
			if err != nil || got != c.want {
				t.Errorf("%s, %v: %+v, %v; want %+v", c.name, codec, got, err, c.want)
			}
		}
	}
	opts := DefaultBatchOptions()
	opts.TimestampType = LogAppendTime
	b := mustEncode(t, opts, Record{Timestamp: 1}, Record{Timestamp: 2})
	b.SetLogAppendTime(99)
	if got, err := b.CheckRecordTimes(1 << 20); err != nil || got != (RecordTimes{First: 99, Max: 99, Min: 99, Keyless: 2}) {
		t.Errorf("LogAppendTime batch: %+v, %v; want the append time 99 throughout", got, err)
	}
	lying := withRecords(t, CompressionNone, 50, mustEncode(t, DefaultBatchOptions(), sampleRecords(3)...)[HeaderSize:])
	if got, err := lying.CheckRecordTimes(1 << 20); !errors.Is(err, ErrBadCount) || got != (RecordTimes{}) {
		t.Errorf("count 50 over 3 records: %+v, %v", got, err)
	}
}

// TestZstdWindows: a frame that asks for a window larger than the decoder
// grants is refused as too large before decoding; a block larger than its
// own frame's window is damage, not size.
func TestZstdWindows(t *testing.T) {
	// Window descriptor 2^(10+16) = 64 MiB, then one RLE block of 1 KiB.
	huge := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 16 << 3}
	h := uint32(1024)<<3 | 1<<1 | 1
	huge = append(huge, byte(h), byte(h>>8), byte(h>>16), 'x')
	if err := withRecords(t, CompressionZstd, 1, huge).ValidateRecordsLimit(1 << 20); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "window") {
		t.Errorf("64 MiB window under a 1 MiB limit: %v, want ErrTooLarge about the window", err)
	}
	// A single-segment frame stating 10 bytes (so a 1 KiB window) holding a
	// raw block of 8000.
	small := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, 10}
	h = uint32(8000)<<3 | 1
	small = append(small, byte(h), byte(h>>8), byte(h>>16))
	small = append(small, make([]byte, 8000)...)
	err := withRecords(t, CompressionZstd, 1, small).ValidateRecordsLimit(1 << 20)
	if !errors.Is(err, ErrBadRecord) {
		t.Errorf("block over its frame's window: %v, want ErrBadRecord", err)
	}
}
