package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/bits"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// MaxDecompressedSize is the default bound on a batch's decompressed records
// section. A few bytes of gzip or zstd can claim gigabytes; a decoder that
// trusts them hands a remote producer an out-of-memory switch. Larger
// legitimate batches can be read with an explicit limit
// (Batch.RecordsLimit, Batch.AllLimit).
const MaxDecompressedSize = 64 << 20

// appendCompressed appends src compressed with c to dst. Encoders are pooled
// or shared because they are expensive to create (zstd especially).
func appendCompressed(dst []byte, c Compression, src []byte) ([]byte, error) {
	switch c {
	case CompressionNone:
		return append(dst, src...), nil
	case CompressionGzip:
		return appendGzip(dst, src)
	case CompressionSnappy:
		return appendXerial(dst, src), nil
	case CompressionLZ4:
		return appendLZ4(dst, src)
	case CompressionZstd:
		return zstdEncoder().EncodeAll(src, dst), nil
	}
	return dst, corruptf(ErrUnknownCompression, "codec %d", int(c))
}

// decompress returns src decompressed with c (src itself for
// CompressionNone), refusing more than limit bytes of output with
// ErrTooLarge. Malformed input gives ErrBadRecord. The output goes into
// buf's memory when it fits (buf's contents are overwritten), so a caller
// can recycle buffers; buf may be nil.
func decompress(c Compression, src, buf []byte, limit int) ([]byte, error) {
	// A records section is addressed with int32 lengths on the Java side;
	// clamping also keeps the zstd decoder key below overflow.
	limit = min(limit, math.MaxInt32)
	var (
		out []byte
		err error
	)
	buf = buf[:0]
	switch c {
	case CompressionNone:
		return src, nil
	case CompressionGzip:
		out, err = decompressGzip(src, buf, limit)
	case CompressionSnappy:
		out, err = decodeSnappy(src, buf, limit)
	case CompressionLZ4:
		out, err = decompressLZ4(src, buf, limit)
	case CompressionZstd:
		out, err = decompressZstd(src, buf, limit)
	default:
		return nil, corruptf(ErrUnknownCompression, "codec %d", int(c))
	}
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return nil, err
		}
		return nil, corruptf(ErrBadRecord, "%s: %v", c, err)
	}
	return out, nil
}

// sliceWriter is an io.Writer appending to a slice: the streaming encoders
// (gzip, lz4) write straight into the caller's buffer.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// gzipEncoder pairs a gzip writer with its sink so that both are pooled and
// steady-state compression does not allocate either.
type gzipEncoder struct {
	w   *gzip.Writer
	out sliceWriter
}

var gzipEncoders = sync.Pool{New: func() any {
	e := &gzipEncoder{}
	e.w = gzip.NewWriter(&e.out) // default level, as Kafka's producer
	return e
}}

func appendGzip(dst, src []byte) ([]byte, error) {
	e := gzipEncoders.Get().(*gzipEncoder)
	defer gzipEncoders.Put(e)
	e.out.b = dst
	e.w.Reset(&e.out)
	_, err := e.w.Write(src)
	if cerr := e.w.Close(); err == nil {
		err = cerr
	}
	dst, e.out.b = e.out.b, nil
	return dst, err
}

// gzipDecoder is a pooled gzip reader with the bytes.Reader it reads from,
// so that steady-state decoding allocates neither.
type gzipDecoder struct {
	zr  *gzip.Reader // nil until a stream's header has been read
	src bytes.Reader
}

var gzipDecoders = sync.Pool{New: func() any { return new(gzipDecoder) }}

func decompressGzip(src, buf []byte, limit int) ([]byte, error) {
	d := gzipDecoders.Get().(*gzipDecoder)
	defer func() {
		d.src.Reset(nil) // drop the reference to src before pooling
		gzipDecoders.Put(d)
	}()
	d.src.Reset(src)
	var err error
	if d.zr == nil {
		d.zr, err = gzip.NewReader(&d.src)
	} else {
		err = d.zr.Reset(&d.src)
	}
	if err != nil {
		return nil, err
	}
	// The gzip trailer states the size mod 2^32: a good first guess for the
	// buffer, trusted no further than deflate's best ratio (about 1032:1)
	// and the limit, so a lying trailer cannot make it allocate much.
	hint := 4 * len(src)
	if len(src) >= 4 {
		hint = min(int(binary.LittleEndian.Uint32(src[len(src)-4:]))+1, 1032*len(src))
	}
	return readLimited(d.zr, buf, hint, limit)
}

// lz4Encoder is a pooled LZ4 frame writer with Kafka's producer settings:
// 64 KiB independent blocks, no content checksum (the batch CRC covers it).
type lz4Encoder struct {
	w   *lz4.Writer
	out sliceWriter
}

var lz4Encoders = sync.Pool{New: func() any {
	e := &lz4Encoder{}
	e.w = lz4.NewWriter(&e.out)
	if err := e.w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false)); err != nil {
		panic("record: lz4 options: " + err.Error()) // constant options: a bug
	}
	return e
}}

func appendLZ4(dst, src []byte) ([]byte, error) {
	e := lz4Encoders.Get().(*lz4Encoder)
	defer lz4Encoders.Put(e)
	e.out.b = dst
	e.w.Reset(&e.out)
	_, err := e.w.Write(src)
	if cerr := e.w.Close(); err == nil {
		err = cerr
	}
	dst, e.out.b = e.out.b, nil
	return dst, err
}

// lz4Decoder is a pooled LZ4 frame reader with the bytes.Reader it reads
// from, so that steady-state decoding allocates neither.
type lz4Decoder struct {
	zr  *lz4.Reader
	src bytes.Reader
}

var lz4Decoders = sync.Pool{New: func() any { return &lz4Decoder{zr: lz4.NewReader(nil)} }}

func decompressLZ4(src, buf []byte, limit int) ([]byte, error) {
	d := lz4Decoders.Get().(*lz4Decoder)
	defer lz4Decoders.Put(d)
	d.src.Reset(src)
	d.zr.Reset(&d.src)
	out, err := readLimited(d.zr, buf, 4*len(src), limit)
	d.zr.Reset(nil) // drop the reference to src before pooling
	d.src.Reset(nil)
	return out, err
}

// zstdEncoder is shared: EncodeAll is safe for concurrent use and an encoder
// is costly to build, so one lives for the process. Created on first use so
// importers that never compress with zstd pay nothing.
var zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithZeroFrames(true))
	if err != nil {
		panic("record: zstd encoder: " + err.Error()) // constant options: a bug
	}
	return e
})

// zstdDecoders holds shared DecodeAll decoders keyed by their memory limit,
// a power of two at least minZstdWindow: the decoder refuses frames whose
// window exceeds it, and rounding keeps the set small whatever limits
// callers pass. Output is bounded by the capacity of the buffer it is
// decoded into (WithDecodeAllCapLimit), which decompressZstd chooses.
var zstdDecoders sync.Map // int -> *zstd.Decoder

// minZstdWindow is the smallest window every decoder accepts. Streaming
// encoders (as Kafka's Java producer uses) declare windows of up to 8 MiB
// whatever the content size, and 8 MiB is what the zstd format asks every
// decoder to support. Decoding into a buffer allocates no window of its own
// (the output is the history), so accepting a large window costs nothing.
const minZstdWindow = 8 << 20

const (
	// zstdMaxBlock is the most a zstd block decodes to.
	zstdMaxBlock = 128 << 10
	// zstdOverAlloc is spare room the decoder's fast copies may write
	// past the output.
	zstdOverAlloc = 64
	// zstdBlockSlack is room for one more block of output: with that much
	// spare capacity, a block that fails did not fail for want of room.
	zstdBlockSlack = zstdMaxBlock + zstdOverAlloc
)

// zstdMemory is the memory limit, and so the largest window, of the
// decoder for limit.
func zstdMemory(limit int) int {
	return 1 << bits.Len(uint(max(limit+zstdBlockSlack, minZstdWindow)-1))
}

func zstdDecoder(limit int) (*zstd.Decoder, error) {
	key := zstdMemory(limit)
	if d, ok := zstdDecoders.Load(key); ok {
		return d.(*zstd.Decoder), nil
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(uint64(key)), zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		return nil, err
	}
	if prev, loaded := zstdDecoders.LoadOrStore(key, d); loaded {
		d.Close()
		return prev.(*zstd.Decoder), nil
	}
	return d, nil
}

// decompressZstd decodes into a buffer whose capacity it chooses from the
// block headers (zstdSizeBound), never letting the decoder size its output:
// growing it 1.25x at a time, the decoder's own appends allocate about five
// times the output before any size limit stops them.
//
// Output that certainly exceeds the limit (frames stating their size, raw
// and RLE blocks) is refused before decoding. Output that fits the bound is
// decoded into exactly that much room, so any failure is damage. Otherwise
// the buffer holds the limit plus one block: output over the limit, or a
// failure with less than a block of room left, is ErrTooLarge. Memory thus
// stays within about twice the limit whatever the frames claim (a failing
// block may still grow the buffer once). It relies on DecodeAll returning
// what it decoded before an error.
func decompressZstd(src, buf []byte, limit int) ([]byte, error) {
	d, err := zstdDecoder(limit)
	if err != nil {
		return nil, err
	}
	last := limit + zstdBlockSlack // room when the output may exceed the limit
	room := last
	if low, high, window, ok := zstdSizeBound(src); ok {
		if low > uint64(limit) {
			return nil, corruptf(ErrTooLarge, "zstd frames state %d bytes of output, over %d", low, limit)
		}
		if window > uint64(zstdMemory(limit)) {
			return nil, corruptf(ErrTooLarge, "zstd frame asks for a window of %d bytes, over %d", window, zstdMemory(limit))
		}
		if high <= uint64(limit) {
			room = int(high) + zstdOverAlloc
		}
	}
	if cap(buf) < room {
		buf = make([]byte, 0, room)
	}
	room = max(room, min(cap(buf), last)) // a larger recycled buffer is free
	out, err := d.DecodeAll(src, buf[:0:room])
	switch {
	case err == nil && len(out) > limit:
		return nil, corruptf(ErrTooLarge, "zstd output exceeds %d bytes", limit)
	case err == nil:
		return out, nil
	case room >= last && (errors.Is(err, zstd.ErrDecoderSizeExceeded) || len(out)+zstdBlockSlack > room):
		return nil, corruptf(ErrTooLarge, "zstd output exceeds %d bytes", limit)
	}
	return nil, err
}

// zstdSizeBound walks the frames and block headers of src without decoding
// and returns what they say about the decoded size: at least low (frames
// that state their content size, raw and RLE blocks, which state theirs),
// at most high (compressed blocks decode to at most zstdMaxBlock); and the
// largest window a frame declares. ok is false when the headers do not
// parse; the decoder then says what is wrong.
func zstdSizeBound(src []byte) (low, high, window uint64, ok bool) {
	for len(src) > 0 {
		var h zstd.Header
		rest, err := h.DecodeAndStrip(src)
		if err != nil {
			return 0, 0, 0, false
		}
		if h.Skippable {
			if uint64(h.SkippableSize) > uint64(len(rest)) {
				return 0, 0, 0, false
			}
			src = rest[h.SkippableSize:]
			continue
		}
		window = max(window, h.WindowSize) // 0 for single-segment frames
		var stated, most uint64            // of this frame
		for last := false; !last; {
			if len(rest) < 3 {
				return 0, 0, 0, false
			}
			bh := uint32(rest[0]) | uint32(rest[1])<<8 | uint32(rest[2])<<16
			rest = rest[3:]
			last = bh&1 == 1
			size := int(bh >> 3)
			switch bh >> 1 & 3 {
			case 0: // raw: size bytes, copied
				if size > len(rest) {
					return 0, 0, 0, false
				}
				stated, most, rest = stated+uint64(size), most+uint64(size), rest[size:]
			case 1: // RLE: one byte, repeated size times
				if len(rest) < 1 {
					return 0, 0, 0, false
				}
				stated, most, rest = stated+uint64(size), most+uint64(size), rest[1:]
			case 2: // compressed: size bytes of input
				if size > len(rest) {
					return 0, 0, 0, false
				}
				most, rest = most+zstdMaxBlock, rest[size:]
			default:
				return 0, 0, 0, false
			}
		}
		if h.HasCheckSum {
			if len(rest) < 4 {
				return 0, 0, 0, false
			}
			rest = rest[4:]
		}
		if h.HasFCS {
			// A valid frame decodes to exactly what it states.
			stated, most = max(stated, h.FrameContentSize), min(most, h.FrameContentSize)
		}
		low, high, src = low+stated, high+most, rest
	}
	return low, high, window, true
}

// readLimited reads r to EOF into buf, failing with ErrTooLarge once more
// than limit bytes come out. The buffer grows by doubling up to exactly
// limit bytes, and one more byte of output is then read into a probe, so
// memory stays below twice the limit, not what the input claims. hint is
// the expected output size.
func readLimited(r io.Reader, buf []byte, hint, limit int) ([]byte, error) {
	if cap(buf) == 0 {
		buf = make([]byte, 0, min(max(hint, 512), limit))
	}
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= limit {
				if err := expectEOF(r, limit); err != nil {
					return nil, err
				}
				return buf, nil
			}
			grow := min(cap(buf), limit-len(buf))
			buf = append(buf, make([]byte, grow)...)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return nil, corruptf(ErrTooLarge, "output exceeds %d bytes", limit)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// expectEOF reads r, whose output has reached the limit, to its end:
// ErrTooLarge at the first further byte.
func expectEOF(r io.Reader, limit int) error {
	var probe [1]byte
	for {
		n, err := r.Read(probe[:])
		if n > 0 {
			return corruptf(ErrTooLarge, "output exceeds %d bytes", limit)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
