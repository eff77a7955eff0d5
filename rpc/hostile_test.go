package rpc

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/grpc/codes"

	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// Hostile batches: a header that passes its length, magic and CRC checks
// over a records section nobody can read back. Each was once acknowledged
// and stored, and from then on every consumer decoding the partition failed
// at its offset. Each is built with the record package's builder, then its
// bytes are edited and its CRC recomputed, as a broken or malicious client
// would send it.

// hostileBatch builds a batch of n records of about size bytes each with
// codec: what the edits below start from.
func hostileBatch(t testing.TB, codec record.Compression, n, size int) record.Batch {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.Compression = codec
	bl := record.NewBuilder(opts)
	rng := rand.New(rand.NewPCG(3, uint64(n)))
	for i := range n {
		v := make([]byte, size)
		for j := range v {
			v[j] = 'a' + byte(rng.IntN(6))
		}
		bl.Add(record.Record{Timestamp: baseTime + int64(i), Key: []byte("kkkk"), Value: v})
	}
	b, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixBatch recomputes the length field, the count (and lastOffsetDelta
// with it) and the CRC after an edit, so the header checks pass.
func fixBatch(b []byte, count int32) record.Batch {
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-record.LengthOffset))
	binary.BigEndian.PutUint32(b[23:], uint32(count-1))
	binary.BigEndian.PutUint32(b[57:], uint32(count))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// withSection replaces the records section, keeping the header's codec.
func withSection(b record.Batch, section []byte, count int32) record.Batch {
	out := append(append([]byte(nil), b[:record.HeaderSize]...), section...)
	return fixBatch(out, count)
}

// firstKeyAt is the position of the first record's key length: after the
// record's length (one byte for records under 64 bytes), its attributes,
// timestamp delta 0 and offset delta 0.
const firstKeyAt = record.HeaderSize + 4

// zeros yields zero bytes forever: what a bomb expands to.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// bomb is a records section that decompresses to 2 GiB of zeros: 32
// gzip members or zstd frames of 64 MiB each, which both formats allow one
// after another in a stream and every decoder reads as one. Compressing 64
// MiB once and repeating it builds the bomb in milliseconds, even under the
// race detector, and it still costs only its compressed size to send (a
// zstd frame from a streaming encoder states no content size: the decoder
// finds out by decoding).
func bomb(t testing.TB, codec record.Compression) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch codec {
	case record.CompressionGzip:
		w = gzip.NewWriter(&buf)
	case record.CompressionZstd:
		w, _ = zstd.NewWriter(&buf)
	default:
		t.Fatalf("no bomb for %v", codec)
	}
	if _, err := io.CopyN(w, zeros{}, 64<<20); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.Repeat(buf.Bytes(), 32)
}

// garble overwrites a compressed section after its first bytes (the
// codec's magic and frame header, so the decoder gets past them) with
// pseudo-random bytes.
func garble(b record.Batch) record.Batch {
	out := append([]byte(nil), b...)
	rng := rand.New(rand.NewPCG(5, 8))
	for i := record.HeaderSize + 16; i < len(out); i++ {
		out[i] = byte(rng.Uint32())
	}
	return fixBatch(out, b.NumRecords())
}

// hostileTopicMax is max.message.bytes of the topic the hostile batches go
// to: room for the 2 MiB a 2 GiB gzip bomb takes, so that it is refused for
// what it expands to, not for its size.
const hostileTopicMax = 4 << 20

type hostileCase struct {
	name  string
	batch func(t testing.TB) record.Batch
	// want is part of the refusal's message: which record and field, or
	// the decompression bound.
	want string
	// bomb: refusing it must not allocate anywhere near its expansion.
	bomb bool
}

func hostileCases() []hostileCase {
	tooLarge := "records section decompresses to more than 4194304 bytes (max.message.bytes of topic hostile)"
	cases := []hostileCase{
		{"record count 50 over 3 records", func(t testing.TB) record.Batch {
			b := hostileBatch(t, record.CompressionNone, 3, 10)
			return fixBatch(append([]byte(nil), b...), 50)
		}, "batch says 50 records, records section holds 3", false},
		{"a 10-byte varint", func(t testing.TB) record.Batch {
			// The key length byte and the 4-byte key, plus the value's
			// length byte and its first 4 bytes, become one 10-byte varint.
			b := append([]byte(nil), hostileBatch(t, record.CompressionNone, 1, 10)...)
			copy(b[firstKeyAt:], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
			return fixBatch(b, 1)
		}, "record 0: bad key: 10-byte varint (at most 5)", false},
		{"a key length of 2^31", func(t testing.TB) record.Batch {
			// The key length byte and the 4-byte key become the 5-byte
			// varint of 2^31.
			b := append([]byte(nil), hostileBatch(t, record.CompressionNone, 1, 10)...)
			copy(b[firstKeyAt:], []byte{0x80, 0x80, 0x80, 0x80, 0x10})
			return fixBatch(b, 1)
		}, "record 0: bad key: 2147483648 out of range", false},
		{"random bytes as the records section", func(t testing.TB) record.Batch {
			b := hostileBatch(t, record.CompressionNone, 4, 50)
			section := make([]byte, len(b)-record.HeaderSize)
			rng := rand.New(rand.NewPCG(1, 1))
			for i := range section {
				section[i] = byte(rng.Uint32())
			}
			return withSection(b, section, 4)
		}, "record 0", false},
		{"a header claiming 2^31-1 records over one record", func(t testing.TB) record.Batch {
			b := hostileBatch(t, record.CompressionNone, 1, 10)
			return fixBatch(append([]byte(nil), b...), math.MaxInt32)
		}, "batch says 2147483647 records, records section holds 1", false},
		{"a zstd bomb of 2 GiB of zeros", func(t testing.TB) record.Batch {
			return withSection(hostileBatch(t, record.CompressionZstd, 1, 10), bomb(t, record.CompressionZstd), 1)
		}, tooLarge, true},
		{"a gzip bomb of 2 GiB of zeros", func(t testing.TB) record.Batch {
			return withSection(hostileBatch(t, record.CompressionGzip, 1, 10), bomb(t, record.CompressionGzip), 1)
		}, tooLarge, true},
	}
	for _, codec := range []record.Compression{record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd} {
		cases = append(cases, hostileCase{"garbage under " + codec.String(), func(t testing.TB) record.Batch {
			return garble(hostileBatch(t, codec, 20, 100))
		}, "record: bad record", false})
	}
	return cases
}

// TestProduceHostileBatches sends each hostile batch through gRPC and
// checks that it is refused as CORRUPT_BATCH with a message that says what
// is wrong, that the partition is exactly as before (log end, high
// watermark, bytes), that the next valid batch lands at the next offset,
// and that the whole partition still decodes.
func TestProduceHostileBatches(t *testing.T) {
	b1 := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	b1.createTopic(t, "hostile", 1, map[string]string{"max.message.bytes": "4194304"})
	produce := func(t *testing.T, batch record.Batch) (*stratav1.ProduceResponse, error) {
		return b1.produce.Produce(testCtx(t), &stratav1.ProduceRequest{Topic: "hostile", Batch: batch})
	}
	if _, err := produce(t, batchOf(t, "a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	want := int64(3) // records in the partition

	for _, c := range hostileCases() {
		t.Run(c.name, func(t *testing.T) {
			batch := c.batch(t)
			if err := batch.Validate(); err != nil {
				t.Fatalf("the header checks must pass for this case: %v", err)
			}
			before := b1.partitionFigures(t, "hostile")
			raw, _ := b1.readAll(t, "hostile", 0, 0)

			var err error
			alloc := allocatedBy(func() { _, err = produce(t, batch) })
			code, info, _ := errorInfo(err)
			if code != codes.InvalidArgument || info == nil || info.Reason != "CORRUPT_BATCH" || info.Domain != ErrorDomain {
				t.Fatalf("got %v (%v), want InvalidArgument CORRUPT_BATCH", err, info)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("message %q does not say %q", err, c.want)
			}
			if c.bomb && alloc > 256<<20 {
				t.Errorf("refusing the bomb allocated %d MiB", alloc>>20)
			}
			t.Logf("refused (%d KiB allocated meanwhile): %v", alloc>>10, err)

			after := b1.partitionFigures(t, "hostile")
			if after != before {
				t.Fatalf("the partition changed: %+v, was %+v", after, before)
			}
			if again, _ := b1.readAll(t, "hostile", 0, 0); !bytes.Equal(again, raw) {
				t.Fatal("the log bytes changed")
			}

			resp, err := produce(t, batchOf(t, "next"))
			if err != nil || resp.BaseOffset != want {
				t.Fatalf("the next valid batch: %v at %v, want offset %d", err, resp, want)
			}
			want++
			if n := b1.decodeAll(t, "hostile"); n != want {
				t.Fatalf("decoding the partition gave %d records, want %d", n, want)
			}
		})
	}
}

// partitionLog is what a refused produce must leave unchanged.
type partitionLog struct {
	LogEnd, HighWatermark, LocalBytes int64
}

func (tb *testBroker) partitionFigures(t testing.TB, topic string) partitionLog {
	t.Helper()
	resp, err := tb.admin.DescribeTopic(testCtx(t), &stratav1.DescribeTopicRequest{Name: topic})
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topic.Partitions[0]
	return partitionLog{p.LogEndOffset, p.HighWatermark, p.LocalBytes}
}

// decodeAll fetches partition 0 of topic with server-side decoding, from
// the start to the high watermark, and returns how many records came.
func (tb *testBroker) decodeAll(t testing.TB, topic string) int64 {
	t.Helper()
	stream, err := tb.fetch.Fetch(testCtx(t), &stratav1.FetchRequest{Topic: topic, Decode: true, StopAtEnd: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatalf("decoding fetch of %s: %v", topic, err)
		}
		for _, r := range resp.Records {
			if r.Offset != n {
				t.Fatalf("record at offset %d, want %d", r.Offset, n)
			}
			n++
		}
	}
}

// allocatedBy returns the bytes allocated while f ran, by the whole process:
// the broker serves the call in this process too.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
