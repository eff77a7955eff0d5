package compact

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/record"
)

// benchLog is 400,000 updates to 10,000 keys (about 60 MB uncompressed),
// JSON-like values of about 100 bytes, in batches of 100 records, with the
// given codec.
func benchLog(b *testing.B, c record.Compression) ([]record.Batch, int64) {
	var batches []record.Batch
	var size int64
	rng := rand.New(rand.NewPCG(1, 2))
	off := int64(0)
	for i := range 4000 {
		opts := record.DefaultBatchOptions()
		opts.Compression, opts.BaseOffset = c, off
		bld := record.NewBuilder(opts)
		for j := range 100 {
			value := fmt.Sprintf(`{"id":%d,"state":"%x","at":%d,"tags":["a","b"]}`, i*100+j, rng.Uint64(), 1_700_000_000_000+int64(i))
			bld.Add(record.Record{Timestamp: int64(i), Key: []byte(fmt.Sprintf("key-%05d", (i*100+j*7919)%10000)), Value: []byte(value + value)})
		}
		bt, err := bld.Build()
		if err != nil {
			b.Fatal(err)
		}
		batches = append(batches, bt)
		size += int64(len(bt))
		off = bt.NextOffset()
	}
	return batches, size
}

// BenchmarkClean measures cleaning throughput: bytes of input log cleaned
// per second (MB/s as Go reports it), one pass with a map that fits, and
// the process's CPU seconds (user+system, GC included) per GB of input.
func BenchmarkClean(b *testing.B) {
	for _, c := range []record.Compression{record.CompressionNone, record.CompressionLZ4, record.CompressionZstd} {
		b.Run(c.String(), func(b *testing.B) {
			batches, size := benchLog(b, c)
			opts := Options{NowMs: 1 << 40, Rules: Rules{TombstoneHorizon: 1 << 62}, KeyMapBytes: 16 << 20}
			b.SetBytes(size)
			b.ResetTimer()
			cpu0 := cpuTime()
			for range b.N {
				if _, _, _, err := Clean(batches, 0, opts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((cpuTime()-cpu0).Seconds()/(float64(size)*float64(b.N)/1e9), "cpu-s/GB")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
