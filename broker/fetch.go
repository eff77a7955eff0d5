package broker

// Fetch and ListOffsets: reads from a partition this broker leads.
//
// A fetch returns whole batches from the one holding the requested offset,
// never past the high watermark, so a consumer sees only committed records.
// At the end it waits up to MaxWait for more (a long poll). An offset below
// the log start or past the log end is OFFSET_OUT_OF_RANGE with the valid
// range in the error.

import (
	"context"
	"errors"
	"time"

	"github.com/strata-log/strata/hotlog"
)

// FetchRequest asks for batches of one partition from an offset.
type FetchRequest struct {
	Topic     string
	Partition int32
	Offset    int64
	MaxBytes  int           // 0 means 1 MiB
	MaxWait   time.Duration // at the end of the log, how long to wait for more
}

// FetchResult holds whole batches, byte-identical to what was appended.
type FetchResult struct {
	Batches        []byte
	NextOffset     int64
	HighWatermark  int64
	LogStartOffset int64
}

const defaultFetchBytes = 1 << 20

// Fetch reads committed batches from a partition this broker leads.
func (b *Broker) Fetch(ctx context.Context, req FetchRequest) (FetchResult, error) {
	p, err := b.leaderPartition(req.Topic, req.Partition)
	if err != nil {
		return FetchResult{}, err
	}
	if req.MaxBytes <= 0 {
		req.MaxBytes = defaultFetchBytes
	}
	res, err := p.read(req.Offset, req.MaxBytes)
	if err != nil || len(res.Batches) > 0 || req.MaxWait <= 0 {
		return res, err
	}
	wctx, cancel := context.WithTimeout(ctx, req.MaxWait)
	defer cancel()
	if err := p.log.WaitForHighWatermark(wctx, req.Offset); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return p.read(req.Offset, req.MaxBytes) // nothing new: an empty answer
		}
		if errors.Is(err, hotlog.ErrClosed) {
			return FetchResult{}, refuse(ReasonUnavailable, err, "%s is closing", p.name())
		}
		return FetchResult{}, err
	}
	return p.read(req.Offset, req.MaxBytes)
}

func (p *partition) read(offset int64, maxBytes int) (FetchResult, error) {
	hw := p.log.HighWatermark()
	res, err := p.log.Read(offset, maxBytes, hw)
	if err != nil {
		return FetchResult{}, p.readError(offset, err)
	}
	return FetchResult{Batches: res.Data, NextOffset: res.NextOffset, HighWatermark: hw, LogStartOffset: p.log.LogStartOffset()}, nil
}

func (p *partition) readError(offset int64, err error) error {
	var re *hotlog.RangeError
	if errors.As(err, &re) {
		hw := p.log.HighWatermark()
		return refuse(ReasonOffsetOutOfRange, err, "offset %d of %s is out of range: valid offsets are %d to %d", offset, p.name(), re.LogStart, hw).
			with("log_start_offset", itoa(re.LogStart)).with("high_watermark", itoa(hw))
	}
	if errors.Is(err, hotlog.ErrClosed) {
		return refuse(ReasonUnavailable, err, "%s is closing", p.name())
	}
	return refuse(ReasonStorageError, err, "%s: %v", p.name(), err)
}

// OffsetQuery names a position: the earliest or latest offset, or the first
// at or after a time.
type OffsetQuery struct {
	Earliest    bool
	Latest      bool
	TimestampMs int64 // used when neither flag is set
}

// OffsetAnswer is a position in a partition.
type OffsetAnswer struct {
	Offset         int64
	TimestampMs    int64 // the found record's time for a time query, else -1
	LogStartOffset int64
	HighWatermark  int64
}

// ListOffsets resolves a query on a partition this broker leads. A time after
// every committed record answers the high watermark.
func (b *Broker) ListOffsets(ctx context.Context, topic string, partition int32, q OffsetQuery) (OffsetAnswer, error) {
	p, err := b.leaderPartition(topic, partition)
	if err != nil {
		return OffsetAnswer{}, err
	}
	ans := OffsetAnswer{TimestampMs: -1, LogStartOffset: p.log.LogStartOffset(), HighWatermark: p.log.HighWatermark()}
	switch {
	case q.Earliest:
		ans.Offset = ans.LogStartOffset
	case q.Latest:
		ans.Offset = ans.HighWatermark
	default:
		off, ts, found, err := p.log.OffsetForTimestamp(q.TimestampMs)
		if err != nil {
			return OffsetAnswer{}, p.readError(0, err)
		}
		ans.Offset = ans.HighWatermark
		if found && off < ans.HighWatermark {
			ans.Offset, ans.TimestampMs = off, ts
		}
	}
	return ans, nil
}
