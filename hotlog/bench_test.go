package hotlog

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/strata-log/strata/record"
)

// benchBatch is 63 records of 1 KiB: a batch of about 64 KiB.
func benchBatch(b *testing.B) record.Batch {
	bl := record.NewBuilder(record.DefaultBatchOptions())
	v := make([]byte, 1024)
	for i := range 63 {
		v[0] = byte(i)
		bl.Add(record.Record{Timestamp: 1_700_000_000_000 + int64(i), Key: []byte("key-0001"), Value: v})
	}
	batch, err := bl.Build()
	if err != nil {
		b.Fatal(err)
	}
	return batch
}

func benchOptions(policy FlushPolicy) Options {
	o := testOptions(DiskFS{})
	o.SegmentBytes = 128 << 20
	o.MaxBatchBytes = 1 << 20
	o.IndexIntervalBytes = 4096
	o.FlushPolicy = policy
	return o
}

// BenchmarkAppend appends ~64 KiB batches of 1 KiB records to a log on the
// local disk under each flush policy, from one appender and from eight, and
// closes it (so everything is fsynced) within the timing.
func BenchmarkAppend(b *testing.B) {
	for _, policy := range []FlushPolicy{FlushAlways, FlushInterval, FlushNever} {
		for _, appenders := range []int{1, 8} {
			b.Run(fmt.Sprintf("flush=%s/appenders=%d", policy, appenders), func(b *testing.B) {
				l, err := Open(b.TempDir(), benchOptions(policy))
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				size := len(benchBatch(b))
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				if appenders == 1 {
					batch := benchBatch(b)
					// Not b.Loop, which stops the timer before the Close below.
					for range b.N {
						if _, err := l.Append(batch, 0); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.SetParallelism((appenders + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
					b.RunParallel(func(pb *testing.PB) {
						batch := benchBatch(b)
						for pb.Next() {
							if _, err := l.Append(batch, 0); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				// Durable at the end, as dd conv=fdatasync is (make bench
				// compares them): Close fsyncs what the policy left.
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)*63/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// BenchmarkReadSequential reads a 64 MiB log front to back in 1 MiB reads,
// from the page cache.
func BenchmarkReadSequential(b *testing.B) {
	l, err := Open(b.TempDir(), benchOptions(FlushNever))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := benchBatch(b)
	for l.Size() < 64<<20 {
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	end := l.LogEndOffset()
	const chunk = 1 << 20
	b.SetBytes(chunk)
	b.ReportAllocs()
	off := int64(0)
	for b.Loop() {
		res, err := l.Read(off, chunk, end)
		if err != nil {
			b.Fatal(err)
		}
		off = res.NextOffset
		if off >= end {
			off = 0
		}
	}
}

// BenchmarkAppendReplica is a follower's write: chunks of four ~64 KiB
// batches with the offsets and epoch their leader gave them, checked and
// written under FlushNever, so that the figure is the CPU the follower
// spends per byte rather than the disk's fsync.
func BenchmarkAppendReplica(b *testing.B) {
	l, err := Open(b.TempDir(), benchOptions(FlushNever))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batches := make([]record.Batch, 4)
	size := 0
	for i := range batches {
		batches[i] = benchBatch(b)
		batches[i].SetLeaderEpoch(1)
		size += len(batches[i])
	}
	chunk := make([]byte, 0, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var next int64
	for b.Loop() {
		chunk = chunk[:0]
		for _, batch := range batches {
			batch.SetBaseOffset(next) // outside the CRC, as a leader sets it
			next = batch.NextOffset()
			chunk = append(chunk, batch...)
		}
		if _, err := l.AppendReplica(chunk); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadAcrossSegments reads a 16 MiB log of 64 sealed 256 KiB
// segments of ~4 KiB batches, one batch per read, from the page cache, with
// every segment file kept open (files=all, as before the FileCache) and
// with a cache of 4 files, so that the figure is what eviction costs a
// reader: in order (order=seq, a reopen every ~60 reads, at each new
// segment) and striding across segments (order=stride, a reopen on every
// read: the worst case).
func BenchmarkReadAcrossSegments(b *testing.B) {
	bl := record.NewBuilder(record.DefaultBatchOptions())
	v := make([]byte, 1024)
	for i := range 4 {
		bl.Add(record.Record{Timestamp: 1_700_000_000_000 + int64(i), Key: []byte("key-0001"), Value: v})
	}
	batch, err := bl.Build()
	if err != nil {
		b.Fatal(err)
	}
	for _, files := range []int{1 << 20, 4} {
		name := fmt.Sprint(files)
		if files == 1<<20 {
			name = "all"
		}
		o := benchOptions(FlushNever)
		o.SegmentBytes = 256 << 10
		o.Files = NewFileCache(files)
		l, err := Open(b.TempDir(), o)
		if err != nil {
			b.Fatal(err)
		}
		for l.Size() < 16<<20 {
			if _, err := l.Append(batch, 0); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Roll(); err != nil { // all sealed and fsynced: evictable
			b.Fatal(err)
		}
		end := l.LogEndOffset()
		segs := l.Segments()
		for _, order := range []string{"seq", "stride"} {
			b.Run(fmt.Sprintf("files=%s/order=%s", name, order), func(b *testing.B) {
				b.SetBytes(int64(len(batch)))
				b.ReportAllocs()
				before := o.Files.Stats()
				off, i := int64(0), 0
				for b.Loop() {
					if order == "stride" {
						off = segs[(i*7)%(len(segs)-1)].BaseOffset
						i++
					}
					res, err := l.Read(off, len(batch), end)
					if err != nil {
						b.Fatal(err)
					}
					off = res.NextOffset
					if off >= end {
						off = 0
					}
				}
				after := o.Files.Stats()
				b.ReportMetric(float64(after.Opens-before.Opens)/float64(b.N), "reopens/op")
			})
		}
		l.Close()
	}
}
