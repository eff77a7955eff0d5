package record

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// Kafka's record fields use zigzag varints, as protobuf's sint32/sint64:
// the zigzag mapping does not depend on the width, so one encoder serves
// varint (int32) and varlong (int64); only the decoders differ in the range
// they accept.

// appendVarint appends the zigzag varint of v.
func appendVarint(b []byte, v int64) []byte {
	return binary.AppendVarint(b, v)
}

// varintSize is the encoded size of v in bytes.
func varintSize(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	// 1 byte per started group of 7 bits; 0 still takes one byte.
	return (bits.Len64(u|1) + 6) / 7
}

// readVarint decodes a Kafka varint (at most 5 bytes, int32 range) at
// b[pos:] and returns the value and the position after it.
func readVarint(b []byte, pos int) (int32, int, bool) {
	u, n := binary.Uvarint(b[pos:])
	if n <= 0 || n > binary.MaxVarintLen32 || u > math.MaxUint32 {
		return 0, pos, false
	}
	x := uint32(u)
	return int32(x>>1) ^ -int32(x&1), pos + n, true
}

// readVarlong decodes a Kafka varlong (at most 10 bytes) at b[pos:].
func readVarlong(b []byte, pos int) (int64, int, bool) {
	v, n := binary.Varint(b[pos:])
	if n <= 0 {
		return 0, pos, false
	}
	return v, pos + n, true
}
