package record

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchRecords are n records with 1 KiB values of words from a small
// vocabulary: compressible the way log lines and JSON are, not the way
// zeros are.
func benchRecords(n int) []Record {
	words := []string{"order", "user", "id", "created", "status", "ok", "amount", "eur", "2024", "{", "}", ":", ","}
	rng := rand.New(rand.NewPCG(7, 7))
	recs := make([]Record, n)
	for i := range recs {
		v := make([]byte, 0, 1024)
		for len(v) < 1024 {
			v = append(v, words[rng.IntN(len(words))]...)
			v = append(v, ' ')
		}
		recs[i] = Record{
			Timestamp: 1_700_000_000_000 + int64(i),
			Key:       fmt.Appendf(nil, "user-%d", rng.IntN(10_000)),
			Value:     v[:1024],
			Headers:   []Header{{Key: "trace", Value: []byte("0af7651916cd43dd")}},
		}
	}
	return recs
}

func BenchmarkValidate64KiB(b *testing.B) {
	bld := NewBuilder(DefaultBatchOptions())
	for _, r := range benchRecords(64) {
		if bld.EstimatedSize() >= 64<<10-1100 {
			break
		}
		bld.Add(r)
	}
	batch, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if err := batch.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuilder encodes batches of 64 records of 1 KiB with a reused
// Builder and buffer, as a producer does in steady state.
func BenchmarkBuilder(b *testing.B) {
	recs := benchRecords(64)
	for _, codec := range allCodecs {
		b.Run(codec.String(), func(b *testing.B) {
			opts := codecOpts(codec)
			bld := NewBuilder(opts)
			var buf []byte
			raw := 0
			for _, r := range recs {
				raw += len(r.Key) + len(r.Value)
			}
			b.SetBytes(int64(raw))
			b.ReportAllocs()
			var size int
			for b.Loop() {
				bld.Reset(opts)
				for _, r := range recs {
					bld.Add(r)
				}
				batch, out, err := bld.AppendTo(buf[:0])
				if err != nil {
					b.Fatal(err)
				}
				buf, size = out, len(batch)
			}
			b.ReportMetric(float64(size), "batch-bytes")
		})
	}
}

// BenchmarkDecode decodes the same batches back to records.
func BenchmarkDecode(b *testing.B) {
	recs := benchRecords(64)
	for _, codec := range allCodecs {
		b.Run(codec.String(), func(b *testing.B) {
			batch := mustEncode(b, codecOpts(codec), recs...)
			raw := 0
			for _, r := range recs {
				raw += len(r.Key) + len(r.Value)
			}
			b.SetBytes(int64(raw))
			b.ReportAllocs()
			for b.Loop() {
				got, err := batch.Records()
				if err != nil || len(got) != len(recs) {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidateRecords is the broker's optional deep check on produce.
func BenchmarkValidateRecords(b *testing.B) {
	recs := benchRecords(64)
	for _, codec := range allCodecs {
		b.Run(codec.String(), func(b *testing.B) {
			batch := mustEncode(b, codecOpts(codec), recs...)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if err := batch.ValidateRecords(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidateRecordsLimit is the leader's check of every produced
// batch (records of 1 KiB values) at the default max.message.bytes: header
// is Validate (length, magic, CRC), all that produce checked before;
// records is CheckRecords, what the records check adds after it; full is
// ValidateRecordsLimit, both at once. Throughput is of the batch as sent.
func BenchmarkValidateRecordsLimit(b *testing.B) {
	const limit = 1048588 // max.message.bytes by default
	for _, size := range []int{16 << 10, 1 << 20} {
		var recs []Record
		for _, r := range benchRecords(2048) {
			if HeaderSize+(len(recs)+1)*(len(r.Value)+48) > size {
				break
			}
			recs = append(recs, r)
		}
		for _, codec := range []Compression{CompressionNone, CompressionLZ4, CompressionZstd} {
			batch := mustEncode(b, codecOpts(codec), recs...)
			for _, check := range []struct {
				name string
				f    func() error
			}{
				{"header", batch.Validate},
				{"records", func() error { return batch.CheckRecords(limit) }},
				{"full", func() error { return batch.ValidateRecordsLimit(limit) }},
			} {
				b.Run(fmt.Sprintf("%dKiB/%v/%s", size>>10, codec, check.name), func(b *testing.B) {
					b.SetBytes(int64(len(batch)))
					b.ReportAllocs()
					for b.Loop() {
						if err := check.f(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkRecompress is the leader's cost of a topic's compression.type:
// a 64-record batch of 1 KiB records (about 64 KiB uncompressed) produced
// in one codec, stored in another. Bytes are the uncompressed records, so
// MB/s compares codecs by the data a producer sends.
func BenchmarkRecompress(b *testing.B) {
	recs := benchRecords(64)
	plain, err := Encode(DefaultBatchOptions(), recs...)
	if err != nil {
		b.Fatal(err)
	}
	for _, pair := range [][2]Compression{
		{CompressionNone, CompressionZstd},
		{CompressionNone, CompressionLZ4},
		{CompressionNone, CompressionSnappy},
		{CompressionNone, CompressionGzip},
		{CompressionSnappy, CompressionZstd},
		{CompressionZstd, CompressionNone},
	} {
		from, to := pair[0], pair[1]
		b.Run(from.String()+"-to-"+to.String(), func(b *testing.B) {
			src, err := Recompress(plain, from, MaxDecompressedSize)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(plain) - HeaderSize))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Recompress(src, to, MaxDecompressedSize); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
