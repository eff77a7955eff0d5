package hotlog

import (
	"fmt"
	"testing"

	"github.com/strata-log/strata/compact"
	"github.com/strata-log/strata/record"
)

// BenchmarkCleanSegments measures the hot tier's cleaning end to end on
// the real disk: a key map over the sealed segments, then their rewrite
// through RewriteSegments (read, filter, re-frame, write, fsync, swap).
// The log is 200,000 updates of 10,000 keys, ~110-byte values, batches of
// 100, uncompressed; MB/s is sealed bytes cleaned per second. Each
// iteration cleans a fresh copy of the log, written outside the timer.
func BenchmarkCleanSegments(b *testing.B) {
	for _, c := range []record.Compression{record.CompressionNone, record.CompressionLZ4} {
		b.Run(c.String(), func(b *testing.B) {
			var size int64
			b.StopTimer()
			for range b.N {
				dir := b.TempDir()
				opts := testOptions(DiskFS{})
				opts.SegmentBytes = 8 << 20
				opts.MaxBatchBytes = 1 << 20
				opts.IndexIntervalBytes = 4096
				opts.FlushPolicy = FlushNever
				l := mustOpen(b, dir, opts)
				for i := range 2000 {
					o := record.DefaultBatchOptions()
					o.Compression = c
					bld := record.NewBuilder(o)
					for j := range 100 {
						v := fmt.Sprintf(`{"id":%d,"state":"%016x","at":%d,"tags":["a","b"]}`, i*100+j, uint64(i*7919+j)*0x9e3779b97f4a7c15, 1_700_000_000_000+int64(i))
						bld.Add(record.Record{Timestamp: int64(i), Key: []byte(fmt.Sprintf("key-%05d", (i*100+j*7919)%10000)), Value: []byte(v + v)})
					}
					bt, err := bld.Build()
					if err != nil {
						b.Fatal(err)
					}
					if _, err := l.Append(bt, 0); err != nil {
						b.Fatal(err)
					}
				}
				if err := l.Roll(); err != nil {
					b.Fatal(err)
				}
				if err := l.Flush(); err != nil {
					b.Fatal(err)
				}
				var bases []int64
				var segs int64
				for _, s := range l.Segments() {
					if s.Sealed {
						bases = append(bases, s.BaseOffset)
						segs += s.Size
					}
				}
				size = segs

				b.StartTimer()
				src := func(yield func(record.Batch, error) bool) {
					for _, base := range bases {
						for bt, err := range l.SegmentBatches(base) {
							if !yield(bt, err) {
								return
							}
						}
					}
				}
				m, mapEnd, err := compact.Build(src, 0, l.LogEndOffset(), 64<<20, 0)
				if err != nil {
					b.Fatal(err)
				}
				f := compact.Filter{Map: m, MapEnd: mapEnd, Rules: compact.Rules{TombstoneHorizon: 0}}
				if _, err := l.RewriteSegments(bases, func(_ SegmentInfo, batches Batches, emit func(record.Batch) error) error {
					_, err := f.Rewrite(batches, emit)
					return err
				}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				l.Close()
			}
			b.SetBytes(size)
		})
	}
}
