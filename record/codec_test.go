package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
)

// withSection replaces a batch's records section (and codec) and fixes the
// length and CRC: how another client's compressed output is put in a batch.
func withSection(t *testing.T, raw Batch, codec Compression, section []byte) Batch {
	t.Helper()
	b := append(clone(raw[:HeaderSize]), section...)
	binary.BigEndian.PutUint16(b[21:], uint16(codec))
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	fixCRC(b)
	if err := Batch(b).Validate(); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestZstdStreamingFrames: frames from a streaming encoder (no content size,
// a window sized by the level, as Kafka's Java producer writes) decode under
// a limit smaller than their window, and are refused when their content is
// over it.
func TestZstdStreamingFrames(t *testing.T) {
	for _, size := range []int{100, 4 << 20} {
		raw := mustEncode(t, DefaultBatchOptions(), Record{Value: bytes.Repeat([]byte{'a'}, size)})
		var buf bytes.Buffer
		w, err := zstd.NewWriter(&buf, zstd.WithWindowSize(8<<20))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(raw[HeaderSize:]); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b := withSection(t, raw, CompressionZstd, buf.Bytes())
		recs, err := b.RecordsLimit(1 << 20)
		if size > 1<<20 {
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%d bytes under a 1 MiB limit: %v, want ErrTooLarge", size, err)
			}
			continue
		}
		if err != nil || len(recs) != 1 || len(recs[0].Value) != size {
			t.Fatalf("%d bytes under a 1 MiB limit: %v", size, err)
		}
	}
}

// TestSnappyFramings: one plain snappy block (librdkafka, sarama) and
// xerial chunks (Kafka's Java producer) both decode; so do several xerial
// chunks written by a third party (klauspost's xerial writer, 32 KiB
// chunks).
func TestSnappyFramings(t *testing.T) {
	in := sampleRecords(12) // includes a 100 KiB value: several chunks
	raw := mustEncode(t, DefaultBatchOptions(), in...)
	section := []byte(raw[HeaderSize:])
	want := decodedForm(in, 0, nil)

	plain := withSection(t, raw, CompressionSnappy, s2.EncodeSnappy(nil, section))
	theirs := withSection(t, raw, CompressionSnappy, xerial.Encode(nil, section))
	ours := mustEncode(t, codecOpts(CompressionSnappy), in...)
	if !bytes.Equal(ours[HeaderSize:], theirs[HeaderSize:]) {
		t.Error("our xerial framing differs from the reference writer's")
	}
	for name, b := range map[string]Batch{"plain block": plain, "xerial": ours, "reference xerial": theirs} {
		got, err := b.Records()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		requireRecordsEqual(t, got, want)
	}
	// Our xerial chunks each hold at most 32 KiB of input, as xerial's.
	chunks := 0
	for rest := []byte(ours[HeaderSize+len(xerialHeader):]); len(rest) > 0; chunks++ {
		chunk, next, err := nextXerialChunk(rest)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := s2.DecodedLen(chunk); n > 32<<10 {
			t.Fatalf("chunk %d holds %d bytes", chunks, n)
		}
		rest = next
	}
	if want := (len(section) + 32<<10 - 1) / (32 << 10); chunks != want {
		t.Fatalf("%d chunks, want %d", chunks, want)
	}
}
