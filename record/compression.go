package record

import (
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
