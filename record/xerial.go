package record

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/s2"
)

// Kafka's Java producer writes snappy through xerial's SnappyOutputStream:
// a 16-byte header (magic, version 1, minimum compatible version 1) then
// chunks of [int32 big-endian length][snappy block], each block encoding at
// most 32 KiB of input. Other clients (librdkafka, sarama) may write one
// plain snappy block instead; Kafka reads both, and so does decodeSnappy.
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}

const (
	xerialMagicLen  = 8        // the part of the header that identifies the framing
	xerialBlockSize = 32 << 10 // input bytes per chunk, as SnappyOutputStream
)

// appendXerial appends src snappy-compressed in xerial framing to dst.
func appendXerial(dst, src []byte) []byte {
	dst = append(dst, xerialHeader...)
	for len(src) > 0 {
		chunk := src[:min(len(src), xerialBlockSize)]
		src = src[len(chunk):]
		need := s2.MaxEncodedLen(len(chunk))
		start := len(dst) + 4
		if cap(dst)-start < need {
			dst = append(dst[:cap(dst)], make([]byte, start+need-cap(dst))...)
		}
		// EncodeSnappy writes into the spare capacity when it is large enough
		// (checked above), so the chunk is compressed in place.
		enc := s2.EncodeSnappy(dst[start:start+need], chunk)
		binary.BigEndian.PutUint32(dst[start-4:start], uint32(len(enc)))
		dst = dst[:start+len(enc)]
	}
	return dst
}

// decodeSnappy decodes a plain snappy block or xerial-framed chunks into
// buf's memory when it fits, refusing more than limit bytes of output. Each
// block states its decoded length up front, so the whole output size is
// known, and checked against the limit, before anything is allocated.
func decodeSnappy(src, buf []byte, limit int) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialHeader[:xerialMagicLen]) {
		n, err := s2.DecodedLen(src)
		if err != nil {
			return nil, err
		}
		if n > limit {
			return nil, corruptf(ErrTooLarge, "snappy output of %d bytes exceeds %d", n, limit)
		}
		return decodeSnappyBlock(reserve(buf, n), src, n)
	}
	if len(src) < len(xerialHeader) {
		return nil, fmt.Errorf("xerial header truncated at %d bytes", len(src))
	}
	// The version fields are not checked: Kafka ignores them as well.
	// First pass: framing and total size; second pass: decode.
	chunks := src[len(xerialHeader):]
	total := 0
	for rest := chunks; len(rest) > 0; {
		chunk, next, err := nextXerialChunk(rest)
		if err != nil {
			return nil, err
		}
		n, err := s2.DecodedLen(chunk)
		if err != nil {
			return nil, err
		}
		if total += n; total > limit {
			return nil, corruptf(ErrTooLarge, "snappy output exceeds %d bytes", limit)
		}
		rest = next
	}
	out := reserve(buf, total)
	for rest := chunks; len(rest) > 0; {
		chunk, next, _ := nextXerialChunk(rest) // framing checked above
		n, _ := s2.DecodedLen(chunk)
		var err error
		if out, err = decodeSnappyBlock(out, chunk, n); err != nil {
			return nil, err
		}
		rest = next
	}
	return out, nil
}

// nextXerialChunk splits the first [int32 length][block] chunk off a
// non-empty src.
func nextXerialChunk(src []byte) (chunk, rest []byte, err error) {
	if len(src) < 4 {
		return nil, nil, fmt.Errorf("xerial chunk length truncated: %d bytes", len(src))
	}
	n := binary.BigEndian.Uint32(src)
	if uint64(n) > uint64(len(src)-4) {
		return nil, nil, fmt.Errorf("xerial chunk of %d bytes overruns the %d left", n, len(src)-4)
	}
	return src[4 : 4+n : 4+n], src[4+n:], nil
}

// reserve returns buf emptied with room for n bytes.
func reserve(buf []byte, n int) []byte {
	if cap(buf) < n {
		return make([]byte, 0, n)
	}
	return buf[:0]
}

// decodeSnappyBlock appends the block, of decoded length n, to dst, which
// has room for it.
func decodeSnappyBlock(dst, block []byte, n int) ([]byte, error) {
	start := len(dst)
	if _, err := s2.Decode(dst[start:start+n], block); err != nil {
		return nil, err
	}
	return dst[:start+n], nil
}
