package record

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"testing"
)

// TestGoldenUncompressed spells out one batch byte by byte from the Kafka
// layout, independently of the encoder, so a field in the wrong place, the
// wrong width or the wrong endianness fails here.
func TestGoldenUncompressed(t *testing.T) {
	const ts = 1_700_000_000_123
	// The record, by hand: zigzag varints, so n encodes as 2n.
	rec := []byte{
		0x20,      // length 16 (zigzag 32)
		0x00,      // attributes
		0x00,      // timestampDelta 0
		0x00,      // offsetDelta 0
		0x02, 'k', // key length 1, key
		0x0a, 'h', 'e', 'l', 'l', 'o', // value length 5, value
		0x02,      // 1 header
		0x02, 'h', // header key length 1, key
		0x02, 'v', // header value length 1, value
	}
	if len(rec)-1 != 16 {
		t.Fatalf("hand-made record body is %d bytes, length byte says 16", len(rec)-1)
	}

	var want []byte
	want = binary.BigEndian.AppendUint64(want, 42)                     // [0:8] baseOffset
	want = binary.BigEndian.AppendUint32(want, uint32(61-12+len(rec))) // [8:12] batchLength
	want = binary.BigEndian.AppendUint32(want, 7)                      // [12:16] partitionLeaderEpoch
	want = append(want, 2)                                             // [16] magic
	want = append(want, 0, 0, 0, 0)                                    // [17:21] crc, below
	want = binary.BigEndian.AppendUint16(want, 0)                      // [21:23] attributes
	want = binary.BigEndian.AppendUint32(want, 0)                      // [23:27] lastOffsetDelta
	want = binary.BigEndian.AppendUint64(want, ts)                     // [27:35] baseTimestamp
	want = binary.BigEndian.AppendUint64(want, ts)                     // [35:43] maxTimestamp
	want = binary.BigEndian.AppendUint64(want, 1234)                   // [43:51] producerId
	want = binary.BigEndian.AppendUint16(want, 5)                      // [51:53] producerEpoch
	want = binary.BigEndian.AppendUint32(want, 9)                      // [53:57] baseSequence
	want = binary.BigEndian.AppendUint32(want, 1)                      // [57:61] records count
	if len(want) != 61 {
		t.Fatalf("hand-made header is %d bytes", len(want))
	}
	want = append(want, rec...)
	crc := crc32.Checksum(want[21:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(want[17:21], crc)

	got := mustEncode(t, BatchOptions{
		BaseOffset: 42, LeaderEpoch: 7, ProducerID: 1234, ProducerEpoch: 5, BaseSequence: 9,
	}, Record{Timestamp: ts, Key: []byte("k"), Value: []byte("hello"), Headers: []Header{{Key: "h", Value: []byte("v")}}})
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded batch differs\n got %s\nwant %s", hex.EncodeToString(got), hex.EncodeToString(want))
	}

	checks := []struct {
		name      string
		got, want int64
	}{
		{"BaseOffset", got.BaseOffset(), 42},
		{"BatchLength", int64(got.BatchLength()), int64(len(want) - 12)},
		{"Size", int64(got.Size()), int64(len(want))},
		{"LeaderEpoch", int64(got.LeaderEpoch()), 7},
		{"Magic", int64(got.Magic()), 2},
		{"CRC", int64(got.CRC()), int64(crc)},
		{"Attributes", int64(got.Attributes()), 0},
		{"Compression", int64(got.Compression()), int64(CompressionNone)},
		{"TimestampType", int64(got.TimestampType()), int64(CreateTime)},
		{"LastOffsetDelta", int64(got.LastOffsetDelta()), 0},
		{"LastOffset", got.LastOffset(), 42},
		{"NextOffset", got.NextOffset(), 43},
		{"FirstTimestamp", got.FirstTimestamp(), ts},
		{"MaxTimestamp", got.MaxTimestamp(), ts},
		{"ProducerID", got.ProducerID(), 1234},
		{"ProducerEpoch", int64(got.ProducerEpoch()), 5},
		{"BaseSequence", int64(got.BaseSequence()), 9},
		{"NumRecords", int64(got.NumRecords()), 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	recs, err := got.Records()
	if err != nil {
		t.Fatal(err)
	}
	requireRecordsEqual(t, recs, []Record{{Offset: 42, Timestamp: ts, Key: []byte("k"), Value: []byte("hello"), Headers: []Header{{Key: "h", Value: []byte("v")}}}})
}

// TestInteropVectors decodes batches written by another Kafka client
// (IBM/sarama's published test vectors): CRC-32C placement, record layout,
// plain (unframed) snappy, and LZ4 frames as Kafka writes them.
func TestInteropVectors(t *testing.T) {
	header := func(length uint32, crc string, codec byte) []byte {
		h := make([]byte, 0, 61)
		h = binary.BigEndian.AppendUint64(h, 0)
		h = binary.BigEndian.AppendUint32(h, length)
		h = binary.BigEndian.AppendUint32(h, 0)
		h = append(h, 2)
		c, _ := hex.DecodeString(crc)
		h = append(h, c...)
		h = append(h, 0, codec)
		h = binary.BigEndian.AppendUint32(h, 0)
		h = append(h, 0, 0, 1, 88, 141, 205, 89, 56) // first timestamp 1479847795000
		h = append(h, make([]byte, 8+8+2+4)...)      // max timestamp, producer id/epoch, sequence
		return binary.BigEndian.AppendUint32(h, 1)
	}
	cases := []struct {
		name    string
		codec   Compression
		batch   []byte
		records []byte
	}{
		{"none", CompressionNone, header(70, "547961fd", 0), []byte{
			40, 0, 10, 0, 8, 1, 2, 3, 4, 6, 5, 6, 7, 2, 6, 8, 9, 10, 4, 11, 12}},
		{"gzip", CompressionGzip, header(95, "e74acea5", 1), []byte{
			31, 139, 8, 0, 0, 9, 110, 136, 0, 255, 0, 21, 0, 234, 255, 40, 0, 10, 0, 8, 1, 2,
			3, 4, 6, 5, 6, 7, 2, 6, 8, 9, 10, 4, 11, 12, 3, 0, 173, 201, 88, 103, 21, 0, 0, 0}},
		{"snappy-unframed", CompressionSnappy, header(72, "15009f61", 2), []byte{
			21, 80, 40, 0, 10, 0, 8, 1, 2, 3, 4, 6, 5, 6, 7, 2, 6, 8, 9, 10, 4, 11, 12}},
		{"lz4", CompressionLZ4, header(89, "a94a77c5", 3), []byte{
			4, 34, 77, 24, 100, 112, 185, 21, 0, 0, 128, 40, 0, 10, 0, 8, 1, 2, 3, 4, 6, 5, 6, 7, 2,
			6, 8, 9, 10, 4, 11, 12, 0, 0, 0, 0, 12, 59, 239, 146}},
	}
	want := []Record{{
		Offset: 0, Timestamp: 1479847795005, Key: []byte{1, 2, 3, 4}, Value: []byte{5, 6, 7},
		Headers: []Header{{Key: "\x08\x09\x0a", Value: []byte{11, 12}}},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := Batch(append(c.batch, c.records...))
			if err := b.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if b.Compression() != c.codec {
				t.Fatalf("codec %v, want %v", b.Compression(), c.codec)
			}
			if err := b.ValidateRecords(); err != nil {
				t.Fatalf("ValidateRecords: %v", err)
			}
			recs, err := b.Records()
			if err != nil {
				t.Fatal(err)
			}
			requireRecordsEqual(t, recs, want)
		})
	}
}

// TestCompressedFraming pins the framing Kafka's Java producer writes:
// xerial for snappy, an LZ4 frame with 64 KiB independent blocks and no
// checksums, gzip and zstd magic numbers.
func TestCompressedFraming(t *testing.T) {
	rec := Record{Value: bytes.Repeat([]byte("framing "), 10_000)} // > 64 KiB: several blocks
	prefixes := map[Compression][]byte{
		CompressionGzip:   {0x1f, 0x8b, 8},
		CompressionSnappy: {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1},
		// magic, FLG 0x60 (version 1, independent blocks), BD 0x40 (64 KiB)
		CompressionLZ4:  {0x04, 0x22, 0x4d, 0x18, 0x60, 0x40},
		CompressionZstd: {0x28, 0xb5, 0x2f, 0xfd},
	}
	for codec, prefix := range prefixes {
		b := mustEncode(t, codecOpts(codec), rec)
		if got := b[HeaderSize:]; !bytes.HasPrefix(got, prefix) {
			t.Errorf("%v: records start % x, want % x", codec, got[:len(prefix)], prefix)
		}
		if b.Compression() != codec {
			t.Errorf("%v: attributes say %v", codec, b.Compression())
		}
	}
}
