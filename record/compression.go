package record

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Compression is the codec of a batch's records section, stored in bits 0-2
// of the attributes. The values are Kafka's.
type Compression int8

// Compression codecs.
const (
	CompressionNone   Compression = 0
	CompressionGzip   Compression = 1
	CompressionSnappy Compression = 2
	CompressionLZ4    Compression = 3
	CompressionZstd   Compression = 4
)

// compressionNames is indexed by Compression; it also drives ParseCompression
// and its error message, so a new codec is added in one place.
var compressionNames = [...]string{
	CompressionNone:   "none",
	CompressionGzip:   "gzip",
	CompressionSnappy: "snappy",
	CompressionLZ4:    "lz4",
	CompressionZstd:   "zstd",
}

// Valid reports whether c is a codec this package can encode and decode.
func (c Compression) Valid() bool { return c >= 0 && int(c) < len(compressionNames) }

// String returns the codec name as Kafka's compression.type spells it:
// "none", "gzip", "snappy", "lz4" or "zstd".
func (c Compression) String() string {
	if c.Valid() {
		return compressionNames[c]
	}
	return "Compression(" + strconv.Itoa(int(c)) + ")"
}

// ParseCompression parses a codec name, ignoring case. The error names the
// value and the allowed ones; it is a configuration error, not corruption.
func ParseCompression(s string) (Compression, error) {
	for i, name := range compressionNames {
		if strings.EqualFold(s, name) {
			return Compression(i), nil
		}
	}
	return 0, fmt.Errorf("record: unknown compression %q (allowed: %s)", s, strings.Join(compressionNames[:], ", "))
}

// Recompress returns b with its records section in codec c: the same
// records byte for byte once decompressed, and the same header (base
// offset, leader epoch, offsets, timestamps, producer id, epoch and
// sequence, timestamp type and flags) but for the codec bits, the length
// and the CRC, which are recomputed. It is how a topic's compression.type
// is applied to what producers send. The section is decompressed bounded
// by maxDecompressed, as a read is; a batch already in c comes back as it
// is (not copied). b must have passed Validate.
func Recompress(b Batch, c Compression, maxDecompressed int) (Batch, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("record: unknown compression %d", c)
	}
	if b.Compression() == c {
		return b, nil
	}
	raw, err := decompress(b.Compression(), b[HeaderSize:], nil, maxDecompressed)
	if err != nil {
		return nil, err
	}
	out := make([]byte, HeaderSize, HeaderSize+len(raw))
	copy(out, b[:HeaderSize])
	out, err = appendCompressed(out, c, raw)
	if err != nil {
		return nil, err
	}
	if len(out) > MaxBatchSize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrBatchTooLarge, len(out), MaxBatchSize)
	}
	nb := Batch(out[:len(out):len(out)])
	binary.BigEndian.PutUint32(nb[offBatchLength:], uint32(len(nb)-LengthOffset))
	attrs := uint16(b.Attributes())&^attrCompressionMask | uint16(c)&attrCompressionMask
	binary.BigEndian.PutUint16(nb[offAttributes:], attrs)
	nb.updateCRC()
	return nb, nil
}
