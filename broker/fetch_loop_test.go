package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/record"
)

// loopLog is a partition as a fetch loop sees it: batches, a high
// watermark that tests move, and a fetch that answers one batch at a time
// and long-polls as Broker.Fetch does.
type loopLog struct {
	mu      sync.Mutex
	batches []record.Batch // contiguous from offset 0
	hw      int64
	moved   chan struct{} // closed and replaced when hw moves
	asked   []FetchRequest
	fail    error // the next fetch's error, once
}

func newLoopLog() *loopLog { return &loopLog{moved: make(chan struct{})} }

// add appends a batch of n records with values "v<offset>" and commits it.
func (l *loopLog) add(t *testing.T, n int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	bl := record.NewBuilder(record.DefaultBatchOptions())
	for i := range n {
		bl.Add(record.Record{Timestamp: 1000, Value: fmt.Appendf(nil, "v%d", l.hw+int64(i))})
	}
	b, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	b.SetBaseOffset(l.hw)
	l.batches = append(l.batches, b)
	l.hw += int64(n)
	close(l.moved)
	l.moved = make(chan struct{})
}

func (l *loopLog) read(offset int64) FetchResult {
	res := FetchResult{NextOffset: offset, HighWatermark: l.hw}
	for _, b := range l.batches {
		if b.BaseOffset() <= offset && offset < b.NextOffset() {
			res.Batches, res.NextOffset = b, b.NextOffset()
		}
	}
	return res
}

func (l *loopLog) fetch(ctx context.Context, req FetchRequest) (FetchResult, error) {
	l.mu.Lock()
	l.asked = append(l.asked, req)
	if err := l.fail; err != nil {
		l.fail = nil
		l.mu.Unlock()
		return FetchResult{}, err
	}
	res, moved := l.read(req.Offset), l.moved
	l.mu.Unlock()
	if len(res.Batches) > 0 || req.MaxWait <= 0 {
		return res, nil
	}
	t := time.NewTimer(req.MaxWait)
	defer t.Stop()
	select {
	case <-moved:
	case <-t.C:
	case <-ctx.Done():
		return FetchResult{}, ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.read(req.Offset), nil
}

func (l *loopLog) waits() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var w []time.Duration
	for _, r := range l.asked {
		w = append(w, r.MaxWait)
	}
	return w
}

// TestFetchLoopStopAtEnd: batches up to the high watermark, no empty
// answer, no waiting, and the end once caught up; decoded records start
// exactly at the offset asked.
func TestFetchLoopStopAtEnd(t *testing.T) {
	l := newLoopLog()
	l.add(t, 3) // 0..2
	l.add(t, 2) // 3..4
	var got []FetchAnswer
	err := fetchLoop(t.Context(), FetchLoopRequest{Topic: "t", Offset: 1, StopAtEnd: true, Decode: true, MaxWait: time.Hour},
		l.fetch, func(a FetchAnswer) error { got = append(got, a); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].NextOffset != 3 || got[1].NextOffset != 5 || got[1].HighWatermark != 5 {
		t.Fatalf("answers %+v", got)
	}
	var values []string
	for _, a := range got {
		for _, r := range a.Records {
			values = append(values, fmt.Sprintf("%d:%s", r.Offset, r.Value))
		}
	}
	if fmt.Sprint(values) != "[1:v1 2:v2 3:v3 4:v4]" {
		t.Fatalf("records %v", values)
	}
	for _, w := range l.waits() {
		if w != 0 {
			t.Fatalf("a stop-at-end read waited %v", w)
		}
	}

	// Already at the end: nothing is sent and the loop ends.
	got = nil
	if err := fetchLoop(t.Context(), FetchLoopRequest{Topic: "t", Offset: 5, StopAtEnd: true}, l.fetch,
		func(a FetchAnswer) error { got = append(got, a); return nil }); err != nil || len(got) != 0 {
		t.Fatalf("at the end: %v, %d answers", err, len(got))
	}
}

// TestFetchLoopFollows: without StopAtEnd the loop sends what is there,
// then a heartbeat carrying the high watermark every MaxWait, then new
// batches as they commit, until ctx ends.
func TestFetchLoopFollows(t *testing.T) {
	l := newLoopLog()
	l.add(t, 2)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	answers := make(chan FetchAnswer, 100)
	done := make(chan error, 1)
	go func() {
		done <- fetchLoop(ctx, FetchLoopRequest{Topic: "t", MaxWait: 20 * time.Millisecond}, l.fetch,
			func(a FetchAnswer) error { answers <- a; return nil })
	}()
	next := func() FetchAnswer {
		t.Helper()
		select {
		case a := <-answers:
			return a
		case <-time.After(10 * time.Second):
			t.Fatal("no answer")
		}
		return FetchAnswer{}
	}
	if a := next(); len(a.Batches) == 0 || a.NextOffset != 2 {
		t.Fatalf("first answer %+v", a)
	}
	if a := next(); len(a.Batches) != 0 || a.HighWatermark != 2 || a.NextOffset != 2 || a.Records != nil {
		t.Fatalf("heartbeat %+v", a)
	}
	l.add(t, 1)
	for {
		a := next()
		if len(a.Batches) == 0 {
			continue // a heartbeat sent before the batch committed
		}
		if a.NextOffset != 3 || a.HighWatermark != 3 {
			t.Fatalf("new batch %+v", a)
		}
		break
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("loop ended with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not end with its context")
	}
	for _, w := range l.waits() {
		if w != 20*time.Millisecond {
			t.Fatalf("a read waited %v, want MaxWait", w)
		}
	}
}

// TestFetchLoopDefaultWait: MaxWait 0 is DefaultFetchMaxWait.
func TestFetchLoopDefaultWait(t *testing.T) {
	l := newLoopLog()
	l.add(t, 1)
	stop := errors.New("stop")
	err := fetchLoop(t.Context(), FetchLoopRequest{Topic: "t"}, l.fetch, func(FetchAnswer) error { return stop })
	if err != stop {
		t.Fatalf("loop ended with %v, want send's error", err)
	}
	if w := l.waits(); len(w) != 1 || w[0] != DefaultFetchMaxWait {
		t.Fatalf("waits %v", w)
	}
}

// TestFetchLoopErrors: a bad request is INVALID_REQUEST before any read; a
// read's refusal (here THROTTLED) and send's error end the loop as they
// came; a damaged batch is CORRUPT_DATA when decoding, naming its offset.
func TestFetchLoopErrors(t *testing.T) {
	l := newLoopLog()
	l.add(t, 2)
	send := func(FetchAnswer) error { return nil }
	for _, req := range []FetchLoopRequest{{}, {Topic: "t", MaxBytes: -1}, {Topic: "t", MaxWait: -time.Second}} {
		if err := fetchLoop(t.Context(), req, l.fetch, send); ReasonOf(err) != ReasonInvalidRequest {
			t.Errorf("%+v: %v, want INVALID_REQUEST", req, err)
		}
	}
	if len(l.asked) != 0 {
		t.Fatalf("a bad request read: %+v", l.asked)
	}

	throttled := refuse(ReasonThrottled, nil, "over quota")
	l.fail = throttled
	if err := fetchLoop(t.Context(), FetchLoopRequest{Topic: "t", StopAtEnd: true}, l.fetch, send); err != throttled {
		t.Fatalf("refused read: %v", err)
	}

	l.add(t, 1)
	l.batches[1][len(l.batches[1])-1] ^= 0xff // the CRC no longer holds
	var sent int
	err := fetchLoop(t.Context(), FetchLoopRequest{Topic: "t", StopAtEnd: true, Decode: true}, l.fetch,
		func(FetchAnswer) error { sent++; return nil })
	var be *Error
	if !errors.As(err, &be) || be.Reason != ReasonCorruptData || be.Meta["offset"] != "2" || sent != 1 {
		t.Fatalf("damaged batch: %v (meta %v) after %d answers", err, be, sent)
	}
	// Undecoded, the same batches go out as they are.
	sent = 0
	if err := fetchLoop(t.Context(), FetchLoopRequest{Topic: "t", StopAtEnd: true}, l.fetch,
		func(FetchAnswer) error { sent++; return nil }); err != nil || sent != 2 {
		t.Fatalf("undecoded: %v after %d answers", err, sent)
	}
}

// TestDecodeRecords: records at or after from, across batches; nothing
// for no data; CORRUPT_DATA naming the batch for a torn one.
func TestDecodeRecords(t *testing.T) {
	l := newLoopLog()
	l.add(t, 3)
	l.add(t, 3)
	data := append(append([]byte(nil), l.batches[0]...), l.batches[1]...)
	recs, err := DecodeRecords("t", 0, data, 2)
	if err != nil || len(recs) != 4 || recs[0].Offset != 2 || string(recs[3].Value) != "v5" || recs[0].Timestamp != 1000 {
		t.Fatalf("decoded %+v, %v", recs, err)
	}
	if recs, err := DecodeRecords("t", 0, nil, 7); err != nil || recs != nil {
		t.Fatalf("no data: %+v, %v", recs, err)
	}
	_, err = DecodeRecords("t", 4, data[:len(data)-1], 1)
	var be *Error
	if !errors.As(err, &be) || be.Reason != ReasonCorruptData || be.Meta["offset"] != "3" {
		t.Fatalf("torn batch: %v", err)
	}
}
