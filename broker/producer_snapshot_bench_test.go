package broker

import (
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/record"
)

// BenchmarkProducerSnapshotOfSegment: the snapshot of a sealed segment of
// 32 MiB of 1 MiB idempotent batches, written from the state recorded as
// the log rolled ("recorded") or computed by reading the segment again
// ("from-log", what a replica does for a base it did not record). Only
// ensureAt is timed; MB/s are of the segment.
func BenchmarkProducerSnapshotOfSegment(b *testing.B) {
	const segmentBytes = 32 << 20
	for _, mode := range []string{"recorded", "from-log"} {
		b.Run(mode, func(b *testing.B) {
			opts := hotlog.DefaultOptions()
			opts.Config.SegmentBytes = segmentBytes
			opts.Logger = quietLogger()
			l, err := hotlog.Open(b.TempDir(), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			s := newProducerState()
			s.attach(l, quietLogger())
			ps := s.snaps.Load()
			bopts := record.DefaultBatchOptions()
			bopts.ProducerID = 1
			recs := make([]record.Record, 1000)
			for i := range recs {
				recs[i] = record.Record{Timestamp: 1_700_000_000_000, Value: make([]byte, 1024)}
			}
			batch, err := record.Encode(bopts, recs...)
			if err != nil {
				b.Fatal(err)
			}
			// fill appends until the log rolls and returns the sealed end.
			fill := func() int64 {
				base := l.ActiveBaseOffset()
				for l.ActiveBaseOffset() == base || l.LogEndOffset() == l.ActiveBaseOffset() {
					s.mu.Lock()
					if err := s.ensureBuiltLocked(l); err != nil {
						b.Fatal(err)
					}
					if _, err := l.AppendVerified(batch, 0); err != nil {
						b.Fatal(err)
					}
					s.appendedLocked(batch)
					s.mu.Unlock()
				}
				return l.ActiveBaseOffset()
			}
			b.SetBytes(segmentBytes)
			b.StopTimer()
			var cpu time.Duration
			for range b.N {
				x := fill()
				if mode == "from-log" {
					s.takeCaptured(x)
				}
				before := processCPU(b)
				b.StartTimer()
				if _, err := ps.ensureAt(x); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += processCPU(b) - before
			}
			// CPU time holds better than wall time on a shared machine.
			b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
		})
	}
}

// processCPU is the user and system time the process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
