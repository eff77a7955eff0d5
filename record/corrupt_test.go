package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// TestCorruption produces each sentinel from a real malformed batch, through
// every entry point that should report it.
func TestCorruption(t *testing.T) {
	valid := mustEncode(t, DefaultBatchOptions(), sampleRecords(4)...)
	put32 := func(b []byte, off int, v uint32) { binary.BigEndian.PutUint32(b[off:], v) }

	cases := []struct {
		name string
		edit func(b []byte) []byte
		want error
		// Where the error shows: Next and Validate see header problems,
		// only record decoding sees the rest.
		validateOK bool
	}{
		{"flipped record byte", func(b []byte) []byte { b[len(b)-2] ^= 0x40; return b }, ErrBadCRC, false},
		{"flipped header byte", func(b []byte) []byte { b[30] ^= 1; return b }, ErrBadCRC, false},
		{"flipped crc", func(b []byte) []byte { b[18] ^= 1; return b }, ErrBadCRC, false},
		{"magic 1", func(b []byte) []byte { b[16] = 1; return b }, ErrBadMagic, false},
		{"magic 3", func(b []byte) []byte { b[16] = 3; return b }, ErrBadMagic, false},
		{"length below header", func(b []byte) []byte { put32(b, 8, 10); return b }, ErrBadLength, false},
		{"negative length", func(b []byte) []byte { put32(b, 8, 0xffff_fff0); return b }, ErrBadLength, false},
		{"length over MaxBatchSize", func(b []byte) []byte { put32(b, 8, MaxBatchSize); return b }, ErrBadLength, false},
		{"count above lastOffsetDelta+1", func(b []byte) []byte { put32(b, 57, 5); fixCRC(b); return b }, ErrBadCount, false},
		{"zero records", func(b []byte) []byte { put32(b, 57, 0); put32(b, 23, 0xffffffff); fixCRC(b); return b }, ErrBadCount, false},
		{"unknown codec", func(b []byte) []byte { b[22] |= 5; fixCRC(b); return b }, ErrUnknownCompression, false},
		{"count says more records than present", func(b []byte) []byte {
			put32(b, 57, 5)
			put32(b, 23, 4)
			fixCRC(b)
			return b
		}, ErrBadCount, true},
		{"count says fewer records than present", func(b []byte) []byte {
			put32(b, 57, 3)
			put32(b, 23, 2)
			fixCRC(b)
			return b
		}, ErrBadCount, true},
		{"record length overruns", func(b []byte) []byte { b[HeaderSize] = 0x7e; fixCRC(b); return b }, ErrBadRecord, true},
		{"bad offset delta", func(b []byte) []byte { b[HeaderSize+3] = 0x04; fixCRC(b); return b }, ErrBadCount, true},
		{"trailing byte", func(b []byte) []byte {
			b = append(b, 0)
			put32(b, 8, uint32(len(b)-12))
			fixCRC(b)
			return b
		}, ErrBadCount, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := Batch(c.edit(clone(valid)))
			verr := b.Validate()
			rerr := b.ValidateRecords()
			_, derr := b.Records()
			var ierr error
			for _, err := range b.All() {
				ierr = err
			}
			errs := map[string]error{"ValidateRecords": rerr, "Records": derr, "All": ierr}
			if c.validateOK {
				if verr != nil {
					t.Fatalf("Validate: %v", verr)
				}
			} else {
				errs["Validate"] = verr
				_, _, nerr := Next(b)
				errs["Next"] = nerr
			}
			for name, err := range errs {
				if !errors.Is(err, c.want) {
					t.Errorf("%s: %v, want %v", name, err, c.want)
				}
				if !errors.Is(err, ErrCorrupt) || !IsCorrupt(err) {
					t.Errorf("%s: %v is not a corruption error", name, err)
				}
			}
		})
	}
}

func TestShortBufferIsNotCorruption(t *testing.T) {
	valid := mustEncode(t, DefaultBatchOptions(), sampleRecords(4)...)
	for _, n := range []int{0, 5, LengthOffset, LengthOffset + 5, HeaderSize, len(valid) - 1} {
		_, rest, err := Next(valid[:n])
		if err != ErrShortBuffer || IsCorrupt(err) {
			t.Fatalf("Next of %d bytes: %v, want ErrShortBuffer", n, err)
		}
		if len(rest) != n {
			t.Fatalf("Next of %d bytes consumed input on error", n)
		}
	}
	// The same truncation seen as a whole batch is corruption.
	if err := valid[:len(valid)-1].Validate(); !errors.Is(err, ErrBadLength) {
		t.Fatalf("Validate of truncated batch: %v", err)
	}
	if err := valid[:20].Validate(); !errors.Is(err, ErrBadLength) {
		t.Fatalf("Validate of 20 bytes: %v", err)
	}
}

// TestNextBadMagicEarly: garbage is reported as corruption as soon as the
// magic byte is visible, not as a short buffer waiting for more bytes.
func TestNextBadMagicEarly(t *testing.T) {
	b := clone(mustEncode(t, DefaultBatchOptions(), sampleRecords(4)...))
	b[16] = 0
	if _, _, err := Next(b[:20]); !errors.Is(err, ErrBadMagic) {
		t.Fatalf("Next: %v, want ErrBadMagic", err)
	}
}

// TestDecompressionLimit: every codec refuses output over the limit.
func TestDecompressionLimit(t *testing.T) {
	rec := Record{Value: bytes.Repeat([]byte{'z'}, 2<<20)}
	for _, codec := range allCodecs[1:] {
		t.Run(codec.String(), func(t *testing.T) {
			b := mustEncode(t, codecOpts(codec), rec)
			if _, err := b.RecordsLimit(1 << 20); !errors.Is(err, ErrTooLarge) || !IsCorrupt(err) {
				t.Fatalf("RecordsLimit(1 MiB): %v, want ErrTooLarge", err)
			}
			for _, err := range b.AllLimit(1 << 20) {
				if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("AllLimit(1 MiB): %v, want ErrTooLarge", err)
				}
			}
			if _, err := b.RecordsLimit(3 << 20); err != nil {
				t.Fatalf("RecordsLimit(3 MiB): %v", err)
			}
		})
	}
}

// TestDecompressionBomb: a small batch that expands past MaxDecompressedSize
// fails with the default limit instead of allocating it.
func TestDecompressionBomb(t *testing.T) {
	huge := Record{Value: make([]byte, MaxDecompressedSize+1)}
	for _, codec := range []Compression{CompressionGzip, CompressionZstd} {
		b := mustEncode(t, codecOpts(codec), huge)
		if len(b) > 1<<20 {
			t.Fatalf("%v bomb is %d bytes", codec, len(b))
		}
		if err := b.ValidateRecords(); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("%v: ValidateRecords: %v, want ErrTooLarge", codec, err)
		}
	}

	// A snappy block claiming 4 GiB of output in a few bytes: refused from
	// its stated length, before any allocation.
	b := clone(mustEncode(t, codecOpts(CompressionSnappy), Record{Value: []byte("x")}))
	b = append(b[:HeaderSize], 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	fixCRC(b)
	if _, err := Batch(b).Records(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("snappy claim: %v, want ErrTooLarge", err)
	}
}

func TestGarbageCompressedSection(t *testing.T) {
	for _, codec := range allCodecs[1:] {
		b := clone(mustEncode(t, codecOpts(codec), sampleRecords(6)...))
		for i := HeaderSize + 2; i < len(b); i += 7 {
			b[i] ^= 0x5a
		}
		fixCRC(b)
		_, err := Batch(b).Records()
		if err == nil || !IsCorrupt(err) {
			t.Errorf("%v: garbage decoded: %v", codec, err)
		}
	}
}
