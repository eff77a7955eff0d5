package client

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/record"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// testRecord makes record i of a partition with a recognisable key, value,
// header and timestamp.
func testRecord(tp TopicPartition, i, valueSize int) *Record {
	v := bytes.Repeat([]byte{byte('a' + i%26)}, valueSize)
	return &Record{
		Topic: tp.Topic, Partition: tp.Partition,
		Key:       []byte(fmt.Sprintf("key-%d", i)),
		Value:     v,
		Headers:   []Header{{Key: "i", Value: []byte(fmt.Sprint(i))}},
		Timestamp: t0.Add(time.Duration(i) * time.Millisecond),
	}
}

// appendAll appends records to tp at time now, without callbacks.
func appendAll(a *accumulator, now time.Time, recs ...*Record) {
	for _, r := range recs {
		pq, _ := a.queue(TopicPartition{r.Topic, r.Partition})
		a.append(pq, pendingRecord{r: r, ctx: context.Background(), fn: func(*Record, error) {}}, recordSize(r), now)
	}
}

// takeAll takes every due batch of tp at time now, encodes it, checks it
// as a reader would (record.Next validates lengths and CRC) and finishes it.
func takeAll(t testing.TB, a *accumulator, tp TopicPartition, now time.Time) []record.Batch {
	t.Helper()
	pq, _ := a.queue(tp)
	var out []record.Batch
	for {
		b, _ := a.next(pq, now)
		if b == nil {
			return out
		}
		if err := a.encode(b); err != nil {
			t.Fatal(err)
		}
		got, rest, err := record.Next(b.data)
		if err != nil || len(rest) != 0 {
			t.Fatalf("encoded batch: %v (%d bytes left)", err, len(rest))
		}
		if int(got.NumRecords()) != len(b.recs) {
			t.Fatalf("batch has %d records, %d pending", got.NumRecords(), len(b.recs))
		}
		out = append(out, append(record.Batch(nil), b.data...))
		a.finish(pq, b)
	}
}

// checkRecords decodes batches and compares them with want, in order.
func checkRecords(t *testing.T, batches []record.Batch, want []*Record) {
	t.Helper()
	i := 0
	for _, b := range batches {
		recs, err := b.Records()
		if err != nil {
			t.Fatal(err)
		}
		for j, r := range recs {
			if i >= len(want) {
				t.Fatalf("more records than produced")
			}
			w := want[i]
			if r.Offset != int64(j) || !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) ||
				r.Timestamp != w.Timestamp.UnixMilli() || len(r.Headers) != len(w.Headers) ||
				r.Headers[0].Key != w.Headers[0].Key || !bytes.Equal(r.Headers[0].Value, w.Headers[0].Value) {
				t.Fatalf("record %d: got %+v, want %+v", i, r, w)
			}
			i++
		}
	}
	if i != len(want) {
		t.Fatalf("decoded %d records, produced %d", i, len(want))
	}
}

func TestAccumulatorBatchesBySize(t *testing.T) {
	const batchBytes = 1000
	tp := TopicPartition{"t", 0}
	a := newAccumulator(batchBytes, time.Hour, record.CompressionNone, nil)
	var want []*Record
	for i := range 100 {
		want = append(want, testRecord(tp, i, 50))
	}
	appendAll(a, t0, want...)

	// The linger is an hour away: only full batches are due.
	full := takeAll(t, a, tp, t0)
	if len(full) < 5 {
		t.Fatalf("%d full batches for ~8 KB of records in 1 KB batches", len(full))
	}
	for i, b := range full {
		if b.Size() > batchBytes {
			t.Errorf("batch %d is %d bytes, over %d", i, b.Size(), batchBytes)
		}
		if b.Size() < batchBytes*3/4 {
			t.Errorf("full batch %d is only %d bytes", i, b.Size())
		}
		if b.ProducerID() != record.NoProducerID || b.BaseSequence() != -1 {
			t.Errorf("batch %d has a producer identity", i)
		}
	}
	// The rest goes when its linger has passed.
	rest := takeAll(t, a, tp, t0.Add(time.Hour))
	if len(rest) != 1 {
		t.Fatalf("%d batches after the linger, want the one open batch", len(rest))
	}
	checkRecords(t, append(full, rest...), want)
}

func TestAccumulatorLinger(t *testing.T) {
	tp := TopicPartition{"t", 3}
	a := newAccumulator(1<<20, 10*time.Millisecond, record.CompressionNone, nil)
	pq, created := a.queue(tp)
	if !created {
		t.Fatal("first queue() did not report creation")
	}
	if _, again := a.queue(tp); again {
		t.Fatal("second queue() reported creation")
	}
	if b, wait := a.next(pq, t0); b != nil || wait != -1 {
		t.Fatalf("empty partition: batch %v, wait %s", b, wait)
	}
	r := testRecord(tp, 0, 10)
	wake := a.append(pq, pendingRecord{r: r, ctx: context.Background()}, recordSize(r), t0)
	if !wake {
		t.Error("opening a batch must wake the sender to arm its timer")
	}
	r2 := testRecord(tp, 1, 10)
	if a.append(pq, pendingRecord{r: r2, ctx: context.Background()}, recordSize(r2), t0.Add(3*time.Millisecond)) {
		t.Error("adding to an open batch woke the sender")
	}
	// The linger counts from the batch's first record.
	if b, wait := a.next(pq, t0.Add(4*time.Millisecond)); b != nil || wait != 6*time.Millisecond {
		t.Fatalf("before the linger: batch %v, wait %s", b, wait)
	}
	b, _ := a.next(pq, t0.Add(10*time.Millisecond))
	if b == nil || len(b.recs) != 2 {
		t.Fatalf("after the linger: %v", b)
	}
}

func TestAccumulatorFlushIgnoresLinger(t *testing.T) {
	tp := TopicPartition{"t", 0}
	a := newAccumulator(1<<20, time.Hour, record.CompressionNone, nil)
	appendAll(a, t0, testRecord(tp, 0, 10))
	if got := takeAll(t, a, tp, t0); len(got) != 0 {
		t.Fatal("batch sent before its linger")
	}
	if p := a.pending(); len(p) != 1 {
		t.Fatalf("pending: %d batches", len(p))
	}
	a.flushing.Add(1)
	got := takeAll(t, a, tp, t0)
	a.flushing.Add(-1)
	if len(got) != 1 {
		t.Fatalf("flush sent %d batches", len(got))
	}
	if p := a.pending(); len(p) != 0 {
		t.Fatalf("pending after flush: %d batches", len(p))
	}
}

func TestAccumulatorLargeRecordAlone(t *testing.T) {
	tp := TopicPartition{"t", 0}
	a := newAccumulator(1000, time.Hour, record.CompressionNone, nil)
	small1, big, small2 := testRecord(tp, 0, 10), testRecord(tp, 1, 5000), testRecord(tp, 2, 10)
	appendAll(a, t0, small1, big, small2)
	got := takeAll(t, a, tp, t0)
	// small1 is closed by big not fitting; big is closed at once since it
	// is over the size; small2 waits for its linger.
	if len(got) != 2 || got[0].NumRecords() != 1 || got[1].NumRecords() != 1 {
		t.Fatalf("batches: %d", len(got))
	}
	got = append(got, takeAll(t, a, tp, t0.Add(time.Hour))...)
	checkRecords(t, got, []*Record{small1, big, small2})
}

func TestAccumulatorPartitionsIndependent(t *testing.T) {
	a := newAccumulator(1<<20, time.Millisecond, record.CompressionNone, nil)
	want := map[TopicPartition][]*Record{}
	for i := range 60 {
		tp := TopicPartition{fmt.Sprintf("t%d", i%2), int32(i % 3)}
		r := testRecord(tp, i, 20)
		want[tp] = append(want[tp], r)
		appendAll(a, t0, r)
	}
	for tp, recs := range want {
		got := takeAll(t, a, tp, t0.Add(time.Millisecond))
		if len(got) != 1 {
			t.Fatalf("%s: %d batches", tp, len(got))
		}
		checkRecords(t, got, recs)
	}
}

func TestAccumulatorCompression(t *testing.T) {
	for _, codec := range []record.Compression{record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			tp := TopicPartition{"t", 0}
			a := newAccumulator(64<<10, 0, codec, nil)
			var want []*Record
			for i := range 500 {
				want = append(want, testRecord(tp, i, 100))
			}
			appendAll(a, t0, want...)
			got := takeAll(t, a, tp, t0)
			for _, b := range got {
				if b.Compression() != codec {
					t.Fatalf("batch compressed with %s", b.Compression())
				}
			}
			checkRecords(t, got, want)
		})
	}
}

// The sticky partitioner moves on when a batch of its partition closes, so
// null-key records fill one batch at a time.
func TestAccumulatorStickyBatches(t *testing.T) {
	part := NewDefaultPartitioner()
	l := part.(BatchListener)
	a := newAccumulator(2000, time.Hour, record.CompressionNone, func(tp TopicPartition) { l.OnBatchClosed(tp.Topic, tp.Partition) })
	const n = 4
	var order []int32
	for i := range 200 {
		r := &Record{Topic: "t", Value: bytes.Repeat([]byte{'x'}, 100), Timestamp: t0}
		r.Partition = part.Partition(r, n)
		if len(order) == 0 || order[len(order)-1] != r.Partition {
			order = append(order, r.Partition)
		}
		appendAll(a, t0, r)
		_ = i
	}
	// ~20 KB in 2 KB batches: about ten runs, each a full batch.
	if len(order) < 8 {
		t.Fatalf("null-key records used %d runs of partitions: %v", len(order), order)
	}
	for i := 1; i < len(order); i++ {
		if order[i] == order[i-1] {
			t.Fatalf("runs %v", order)
		}
	}
	total := 0
	for p := range int32(n) {
		for _, b := range takeAll(t, a, TopicPartition{"t", p}, t0.Add(time.Hour)) {
			total += int(b.NumRecords())
		}
	}
	if total != 200 {
		t.Fatalf("%d records in batches, want 200", total)
	}
}

// Appenders and a sender racing on one partition: every record ends in
// exactly one batch, and each appender's records keep their order.
func TestAccumulatorConcurrent(t *testing.T) {
	tp := TopicPartition{"t", 0}
	a := newAccumulator(4096, 0, record.CompressionNone, nil)
	pq, _ := a.queue(tp)
	const writers, each = 4, 2000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r := &Record{Topic: "t", Key: []byte{byte(w)}, Value: fmt.Appendf(nil, "%d", i), Timestamp: t0}
				if a.append(pq, pendingRecord{r: r, ctx: context.Background()}, recordSize(r), t0) {
					pq.wake()
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	next := make([]int, writers)
	seen := 0
	check := func(b *batch) {
		if err := a.encode(b); err != nil {
			t.Error(err)
			return
		}
		recs, err := b.data.Records()
		if err != nil {
			t.Error(err)
			return
		}
		for _, r := range recs {
			w := int(r.Key[0])
			if string(r.Value) != fmt.Sprint(next[w]) {
				t.Errorf("writer %d: got %s, want %d", w, r.Value, next[w])
			}
			next[w]++
			seen++
		}
		a.finish(pq, b)
	}
	for finished := false; !finished; {
		select {
		case <-pq.kick:
		case <-done:
			finished = true
		}
		for b, _ := a.next(pq, t0); b != nil; b, _ = a.next(pq, t0) {
			check(b)
		}
	}
	if seen != writers*each {
		t.Fatalf("%d records in batches, want %d", seen, writers*each)
	}
}

func TestAccumulatorRebuild(t *testing.T) {
	tp := TopicPartition{"t", 0}
	a := newAccumulator(1<<20, 0, record.CompressionNone, nil)
	var want []*Record
	for i := range 10 {
		want = append(want, testRecord(tp, i, 10))
	}
	appendAll(a, t0, want...)
	pq, _ := a.queue(tp)
	b, _ := a.next(pq, t0)
	if err := a.encode(b); err != nil {
		t.Fatal(err)
	}
	// Drop the odd records, as a retry does for those whose context ended.
	kept := b.recs[:0]
	var keptRecs []*Record
	for i, pr := range b.recs {
		if i%2 == 0 {
			kept = append(kept, pr)
			keptRecs = append(keptRecs, pr.r)
		}
	}
	b.recs = kept
	if err := a.rebuild(b); err != nil {
		t.Fatal(err)
	}
	checkRecords(t, []record.Batch{b.data}, keptRecs)
	a.finish(pq, b)
}

func TestAccumulatorDrain(t *testing.T) {
	a := newAccumulator(200, time.Hour, record.CompressionNone, nil)
	tp := TopicPartition{"t", 0}
	for i := range 10 {
		appendAll(a, t0, testRecord(tp, i, 50))
	}
	got := a.drain()
	n := 0
	for _, b := range got {
		n += len(b.recs)
		a.finish(nil, b)
	}
	if n != 10 {
		t.Fatalf("drained %d records", n)
	}
	if len(a.pending()) != 0 {
		t.Fatal("batches left after drain")
	}
}

// BenchmarkAccumulator measures the producer's hot path without a network:
// partition choice, append (encoding into the builder), and closing and
// encoding full 1 MiB batches, for small records.
func BenchmarkAccumulator(b *testing.B) {
	for _, bc := range []struct {
		name  string
		codec record.Compression
		parts int32
	}{
		{"none/1-partition", record.CompressionNone, 1},
		{"none/16-partitions", record.CompressionNone, 16},
		{"lz4/16-partitions", record.CompressionLZ4, 16},
		{"zstd/16-partitions", record.CompressionZstd, 16},
	} {
		b.Run(bc.name, func(b *testing.B) {
			a := newAccumulator(1<<20, time.Hour, bc.codec, nil)
			part := NewDefaultPartitioner()
			queues := make([]*partQueue, bc.parts)
			for p := range queues {
				queues[p], _ = a.queue(TopicPartition{"bench", int32(p)})
			}
			value := bytes.Repeat([]byte("0123456789abcdef"), 6) // 96 bytes
			keys := make([][]byte, 1024)
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "user-%06d", i)
			}
			recs := make([]Record, 4096) // reused: a producer's caller owns its records
			ctx := context.Background()
			noop := func(*Record, error) {}
			b.SetBytes(int64(len(value) + len(keys[0])))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r := &recs[i%len(recs)]
				*r = Record{Topic: "bench", Partition: AnyPartition, Key: keys[i%len(keys)], Value: value, Timestamp: t0}
				r.Partition = part.Partition(r, bc.parts)
				pq := queues[r.Partition]
				if a.append(pq, pendingRecord{r: r, ctx: ctx, fn: noop}, recordSize(r), t0) {
					for bt, _ := a.next(pq, t0); bt != nil; bt, _ = a.next(pq, t0) {
						if err := a.encode(bt); err != nil {
							b.Fatal(err)
						}
						a.finish(pq, bt)
					}
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
