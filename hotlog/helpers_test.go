package hotlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/strata-log/strata/record"
)

// testOptions returns options with small segments and index intervals, so a
// few batches exercise rolling and indexing, and a quiet logger.
func testOptions(fsys FS) Options {
	o := DefaultOptions()
	o.FS = fsys
	o.SegmentBytes = 8 << 10
	o.MaxBatchBytes = 4 << 10
	o.IndexIntervalBytes = 512
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return o
}

func mustOpen(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return l
}

func seqOf(r record.Record) int { return int(binary.BigEndian.Uint64(r.Value)) }

// readRecords reads every record from offset to upTo, checking the batches on
// the way: each must validate and follow the previous one.
func readRecords(t testing.TB, l *Log, from, upTo int64) []record.Record {
	t.Helper()
	var out []record.Record
	expect := int64(-1)
	for off := from; off < upTo; {
		res, err := l.Read(off, 1500, upTo)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(res.Data) == 0 {
			t.Fatalf("read at %d below %d returned nothing", off, upTo)
		}
		for rest := res.Data; len(rest) > 0; {
			b, next, err := record.Next(rest)
			if err != nil {
				t.Fatalf("batch in read at %d: %v", off, err)
			}
			if expect >= 0 && b.BaseOffset() != expect {
				t.Fatalf("batch base %d, want %d", b.BaseOffset(), expect)
			}
			recs, err := b.Records()
			if err != nil {
				t.Fatalf("decode batch at %d: %v", b.BaseOffset(), err)
			}
			for _, r := range recs {
				if r.Offset >= off {
					out = append(out, r)
				}
			}
			expect, rest = b.NextOffset(), next
		}
		off = res.NextOffset
	}
	return out
}

// checkSeq asserts records are offsets from..from+len-1 carrying sequence
// numbers seq0, seq0+1, ... in order.
func checkSeq(t testing.TB, recs []record.Record, from int64, seq0 int) {
	t.Helper()
	for i, r := range recs {
		if r.Offset != from+int64(i) || seqOf(r) != seq0+i {
			t.Fatalf("record %d: offset %d seq %d, want offset %d seq %d", i, r.Offset, seqOf(r), from+int64(i), seq0+i)
		}
	}
}

func wantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

func sameBytes(a, b []byte) bool { return bytes.Equal(a, b) }
