package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// errStalled ends a fetch stream that stayed silent longer than a request
// timeout although the broker sends heartbeats: the connection is presumed
// dead and the fetcher reconnects.
var errStalled = errors.New("strata: fetch stream silent")

// errStreamEnded is a stream the broker closed without being asked to
// (no stop_at_end): the fetcher reconnects.
var errStreamEnded = newError(codes.Unavailable, "", true, "fetch stream ended by the broker")

// fetch is the goroutine of one assigned partition: it resolves the start
// offset, streams from the leader and hands records to Poll, reconnecting
// with backoff after NOT_LEADER or a broken stream, until the partition is
// unassigned, the consumer closes, the end is reached (WithStopAtEnd) or an
// error that a retry cannot fix is handed to Poll.
func (k *Consumer) fetch(ctx context.Context, a *assignment) {
	defer k.wg.Done()
	spec, pos := a.from, int64(-1)
	if spec.kind == specOffset {
		pos = spec.value
	}
	// A partition assigned right after CreateTopic may not be in every
	// broker's metadata yet: give it a request timeout to appear.
	if _, err := k.c.partitionCount(ctx, a.tp.Topic, a.tp.Partition); err != nil {
		if ctx.Err() == nil {
			k.emit(ctx, chunk{a: a, err: wrapOp("fetch "+a.tp.String(), err)})
		}
		return
	}
	seek := false // the next resolved position replaces Poll's (a reset)
	attempt := 0
	for ctx.Err() == nil {
		if pos < 0 {
			off, err := k.c.ListOffsets(ctx, a.tp.Topic, a.tp.Partition, spec)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if !IsRetriable(err) {
					k.emit(ctx, chunk{a: a, err: err})
					return
				}
				k.backoff(ctx, a, &attempt, err)
				continue
			}
			k.answered(a)
			pos = off
			if seek {
				if !k.emit(ctx, chunk{a: a, seeked: true, seek: pos}) {
					return
				}
			} else {
				a.position.CompareAndSwap(-1, pos)
			}
			seek = false
		}

		progressed, err := k.stream(ctx, a, &pos)
		if err == nil { // stop_at_end: everything below the high watermark is in
			k.emit(ctx, chunk{a: a, eof: true})
			return
		}
		if ctx.Err() != nil {
			return
		}
		if progressed {
			attempt = 0
		}
		switch {
		case errors.Is(err, ErrOffsetOutOfRange) && !k.cfg.resetOnOutOfRange.IsZero():
			k.log.Warn("strata: offset out of range, resetting", "partition", a.tp, "offset", pos,
				"reset", k.cfg.resetOnOutOfRange, "err", err)
			spec, pos, seek = k.cfg.resetOnOutOfRange, -1, true
		case fetchRetriable(err):
			k.backoff(ctx, a, &attempt, err)
		default:
			k.emit(ctx, chunk{a: a, err: wrapOp("fetch "+a.tp.String(), err)})
			return
		}
	}
}

// backoff logs a retriable failure and waits before the next attempt.
func (k *Consumer) backoff(ctx context.Context, a *assignment, attempt *int, err error) {
	k.log.Debug("strata: fetch failed, retrying", "partition", a.tp, "attempt", *attempt+1, "err", err)
	if !a.retrying {
		a.retrying = true
		if fn := k.cfg.onFetchRetry; fn != nil {
			fn(a.tp, err)
		}
	}
	_ = sleepCtx(ctx, defaultBackoff.delay(*attempt, retryAfter(err)))
	*attempt++
}

// answered notes that a broker answered the fetcher: if it was retrying,
// WithOnFetchRetry hears that it is back.
func (k *Consumer) answered(a *assignment) {
	if a.retrying {
		a.retrying = false
		if fn := k.cfg.onFetchRetry; fn != nil {
			fn(a.tp, nil)
		}
	}
}

// fetchRetriable tells which fetch failures end in a reconnect: those the
// broker calls retriable, and every broken stream (no details: the
// connection died, the broker went away, the stream stalled). Reading again
// from the same offset is always safe.
func fetchRetriable(err error) bool {
	if errors.Is(err, errStalled) {
		return true
	}
	e, ok := AsError(err)
	if !ok {
		return false
	}
	if e.Reason != "" {
		return e.Retriable
	}
	switch e.Code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Internal,
		codes.Unknown, codes.Aborted, codes.ResourceExhausted:
		return true
	}
	return false
}

// largestBatch is the largest batch a broker stores (max.message.bytes
// tops out at 64 MiB), which a fetch response carries whole even when it is
// larger than the bytes asked for.
const largestBatch = 64 << 20

// fetchResponseLimit bounds one fetch response a consumer takes: the bytes
// it asked for, or one batch beyond them, and room for the framing. Without
// it gRPC's default of 4 MiB refuses larger responses, and the consumer
// would retry the same fetch for ever.
func fetchResponseLimit(fetchMaxBytes int) int {
	return int(min(int64(fetchMaxBytes)+largestBatch+1<<20, math.MaxInt32))
}

// stream runs one Fetch stream from *pos and hands what it reads to Poll,
// advancing *pos. It returns nil when the broker ended the stream at the
// high watermark as asked (stop_at_end), else the error that ended it;
// progressed says whether records were delivered.
func (k *Consumer) stream(ctx context.Context, a *assignment, pos *int64) (progressed bool, err error) {
	cc, err := k.c.leaderConn(ctx, a.tp)
	if err != nil {
		return false, err
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timeout := k.c.cfg.requestTimeout
	watchdog := time.AfterFunc(timeout, func() { cancel(errStalled) })
	defer watchdog.Stop()

	st, err := stratav1.NewFetchServiceClient(cc).Fetch(sctx, &stratav1.FetchRequest{
		Topic:     a.tp.Topic,
		Partition: a.tp.Partition,
		Offset:    *pos,
		MaxBytes:  int32(k.cfg.fetchMaxBytes),
		Decode:    k.cfg.serverDecode,
		StopAtEnd: k.cfg.stopAtEnd,
	}, grpc.MaxCallRecvMsgSize(fetchResponseLimit(k.cfg.fetchMaxBytes)))
	for err == nil {
		var resp *stratav1.FetchResponse
		resp, err = st.Recv()
		if err != nil {
			break
		}
		watchdog.Stop() // Poll may take its time; that is not a silent broker
		k.answered(a)
		a.hw.Store(resp.GetHighWatermark())
		var recs []*Record
		var next int64
		if k.cfg.serverDecode {
			recs, next = fromWire(a.tp, resp.GetRecords(), *pos)
			// Past records a compacted log no longer has (and batches left
			// empty), as the broker says, so a reconnect does not read
			// them again.
			next = max(next, resp.GetNextOffset())
		} else if recs, next, err = decodeBatches(a.tp, resp.GetBatches(), *pos); err != nil {
			return progressed, err
		}
		if len(recs) > 0 {
			if !k.emit(ctx, chunk{a: a, recs: recs}) {
				return progressed, ctx.Err()
			}
			progressed = true
		}
		*pos = next
		watchdog.Reset(timeout)
	}
	switch {
	case err == io.EOF && k.cfg.stopAtEnd:
		return progressed, nil
	case err == io.EOF:
		return progressed, errStreamEnded
	case context.Cause(sctx) == errStalled && ctx.Err() == nil:
		return progressed, fmt.Errorf("%w for %s", errStalled, timeout)
	}
	return progressed, k.c.partitionError(ctx, a.tp, err)
}

// emit hands a chunk to Poll, waiting for room in the buffer; false when
// ctx ended first.
func (k *Consumer) emit(ctx context.Context, ch chunk) bool {
	n := int64(len(ch.recs))
	if n > 0 {
		if err := k.records.acquire(ctx, n, nil); err != nil {
			return false
		}
	}
	select {
	case k.out <- ch:
		return true
	case <-ctx.Done():
		k.records.release(n)
		return false
	}
}

// decodeBatches splits a fetch response's concatenated batches, verifying
// each (record.Next checks lengths, magic and CRC, so a damaged batch is an
// error and never data), and returns the records at or after pos, in offset
// order, and the offset that follows the last batch. The records alias data
// when the batches are not compressed.
func decodeBatches(tp TopicPartition, data []byte, pos int64) ([]*Record, int64, error) {
	next := pos
	var out []*Record
	for len(data) > 0 {
		b, rest, err := record.Next(data)
		if err != nil {
			if errors.Is(err, record.ErrShortBuffer) {
				err = fmt.Errorf("%w: response ends inside a batch", record.ErrCorrupt)
			}
			return nil, pos, corruptData(tp, next, err)
		}
		data = rest
		if b.NextOffset() <= next || b.IsControl() {
			// Before the position (the first batch may begin earlier), or
			// a transaction marker, which carries no application record.
			next = max(next, b.NextOffset())
			continue
		}
		recs, err := b.Records()
		if err != nil {
			return nil, pos, corruptData(tp, b.BaseOffset(), err)
		}
		slab := make([]Record, len(recs))
		for i, r := range recs {
			if r.Offset < next {
				continue
			}
			slab[i] = Record{
				Topic: tp.Topic, Partition: tp.Partition, Offset: r.Offset,
				Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: time.UnixMilli(r.Timestamp),
			}
			out = append(out, &slab[i])
		}
		next = b.NextOffset()
	}
	return out, next, nil
}

// corruptData is the error of a fetched batch that failed its checks or
// does not decode: CORRUPT_DATA, as the broker reports stored data that
// fails on read (reading it again gives the same bytes), with the offset
// in the metadata. It also wraps the record package's error
// (errors.Is(err, record.ErrBadCRC) holds).
func corruptData(tp TopicPartition, offset int64, err error) error {
	e := newError(codes.DataLoss, "CORRUPT_DATA", false, "%s: batch at offset %d: %s", tp, offset, bare(err))
	e.Metadata = map[string]string{"offset": strconv.FormatInt(offset, 10), "retriable": "false"}
	return &chainError{msg: e.Error(), errs: []error{e, err}}
}

// fromWire converts the records of a decoded fetch response, skipping
// those below pos.
func fromWire(tp TopicPartition, recs []*stratav1.Record, pos int64) ([]*Record, int64) {
	next := pos
	out := make([]*Record, 0, len(recs))
	slab := make([]Record, len(recs))
	for i, r := range recs {
		if r.GetOffset() < next {
			continue
		}
		var hdrs []Header
		if len(r.GetHeaders()) > 0 {
			hdrs = make([]Header, len(r.GetHeaders()))
			for j, h := range r.GetHeaders() {
				hdrs[j] = Header{Key: h.GetKey(), Value: h.GetValue()}
			}
		}
		slab[i] = Record{
			Topic: tp.Topic, Partition: tp.Partition, Offset: r.GetOffset(),
			Key: r.Key, Value: r.Value, Headers: hdrs, Timestamp: time.UnixMilli(r.GetTimestampMs()),
		}
		out = append(out, &slab[i])
		next = r.GetOffset() + 1
	}
	return out, next
}
