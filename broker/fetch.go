package broker

// Fetch and ListOffsets: reads from a partition this broker leads.
//
// A fetch returns whole batches from the one holding the requested offset,
// never past the high watermark, so a consumer sees only committed records.
// At the end it waits up to MaxWait for more (a long poll). An offset below
// the log start or past the log end is OFFSET_OUT_OF_RANGE with the valid
// range in the error. MaxBytes is capped by limits.max_fetch_bytes: a
// larger request is served that much, not refused. Over the caller's fetch
// quota a fetch is delayed or THROTTLED (quota.go).

import (
	"context"
	"errors"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/corrupt"
	"github.com/strata-log/strata/tiering"
)

// FetchRequest asks for batches of one partition from an offset.
type FetchRequest struct {
	Topic     string
	Partition int32
	Offset    int64
	MaxBytes  int           // 0 means 1 MiB; capped by limits.max_fetch_bytes
	MaxWait   time.Duration // at the end of the log, how long to wait for more
	// Buffer, if set, lends the buffer of n bytes that a read of the local
	// log fills: FetchResult.Batches is then a slice of the last one it
	// lent (a read may ask twice, when its first batch is larger than
	// planned), and the caller may reuse it once done with the result (as
	// the fetch stream does, a response at a time, instead of allocating one
	// per response). It is asked only when there is data to read; reads
	// from the cold tier do not use it.
	Buffer func(n int) []byte
	// ReadAhead, if set, is how long read-ahead that a cold read starts
	// may go on (tiering.WithReadAhead); unset, as long as the fetch's ctx.
	// A front end whose fetches are short requests from a consumer that
	// keeps fetching (Kafka) passes its connection's lifetime, so chunks
	// fetched ahead are not cancelled each time an answer is sent.
	ReadAhead context.Context
}

// FetchResult holds whole batches, byte-identical to what was appended.
type FetchResult struct {
	Batches        []byte
	NextOffset     int64
	HighWatermark  int64
	LogStartOffset int64
	// cold is the cold read Batches came from, if they did: its chunk
	// stays in memory, not recycled, until Release.
	cold tiering.ColdRead
}

// Release says the caller is done with Batches: a response holding them
// has been sent (or dropped). Batches read from the cold tier are a slice
// of a cached chunk, whose buffer is recycled only once every reader of it
// has released it; a result never released keeps its chunk's memory from
// the cold reader for good. It does nothing for a result read from the
// local log (whose buffer is the caller's, see FetchRequest.Buffer), and
// nothing the second time.
func (r FetchResult) Release() { r.cold.Release() }

// verified reports whether Batches came from the cold tier, whose reader
// checked every batch's bytes (CRC and all) as they came from the store:
// nothing on the way to the consumer needs to check them again.
func (r FetchResult) verified() bool { return len(r.cold.Batches) > 0 }

const defaultFetchBytes = 1 << 20

// Fetch reads committed batches. The leader serves its local log, and,
// below the local log's start, the cold tier; any other broker serves the
// cold tier too (history is in the shared bucket) and answers NOT_LEADER for
// offsets the cold tier does not hold.
func (b *Broker) Fetch(ctx context.Context, req FetchRequest) (FetchResult, error) {
	req.MaxBytes = b.limits.fetchBytes(req.MaxBytes)
	held, err := b.limits.admitFetch(ctx)
	b.metrics.quotaHeldNanos.Add(int64(held))
	if err != nil {
		if ReasonOf(err) == ReasonThrottled {
			b.metrics.throttle(throttleFetchQuota)
		}
		return FetchResult{}, err
	}
	readCtx := ctx
	if req.ReadAhead != nil {
		readCtx = tiering.WithReadAhead(ctx, req.ReadAhead)
	}
	res, err := b.fetch(readCtx, req)
	b.limits.chargeFetch(ctx, len(res.Batches))
	return res, err
}

func (b *Broker) fetch(ctx context.Context, req FetchRequest) (FetchResult, error) {
	return b.role.fetch(ctx, req)
}

func (b clusterMember) fetch(ctx context.Context, req FetchRequest) (FetchResult, error) {
	p, err := b.leaderPartition(req.Topic, req.Partition)
	if err != nil {
		if ReasonOf(err) == ReasonNotLeader || ReasonOf(err) == ReasonLeaderNotAvailable {
			if res, ok := b.coldFetchAnywhere(ctx, req); ok {
				return res, nil
			}
		}
		return FetchResult{}, err
	}
	if err := b.ensureTier(ctx, p); err != nil {
		return FetchResult{}, err
	}
	res, err := p.read(req)
	if err != nil && req.Offset < p.log.LogStartOffset() && b.cold != nil {
		// Below the local log: the cold tier holds it. The start is read
		// after the local read failed, not before it, so a read that races
		// local retention at the boundary goes to the cold tier too (a
		// segment is deleted only once the manifest lists it). The cold
		// reader is asked whatever remote.storage.enable says now: history
		// uploaded before it was switched off is still the partition's.
		return b.coldFetch(ctx, p, req)
	}
	if err != nil && req.Offset < p.log.LogStartOffset() && b.cold == nil && p.cfg.Load().RemoteStorageEnable {
		return FetchResult{}, p.noStoreError(req.Offset, err)
	}
	if err != nil || len(res.Batches) > 0 || req.MaxWait <= 0 {
		return p.withLogStart(res), err
	}
	wctx, cancel := context.WithTimeout(ctx, req.MaxWait)
	defer cancel()
	if err := p.log.WaitForHighWatermark(wctx, req.Offset); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			res, err := p.read(req) // nothing new: an empty answer
			return p.withLogStart(res), err
		}
		if errors.Is(err, hotlog.ErrClosed) {
			return FetchResult{}, refuse(ReasonUnavailable, err, "%s is closing", p.name())
		}
		return FetchResult{}, err
	}
	res, err = p.read(req)
	return p.withLogStart(res), err
}

// logStart is the first offset a consumer can read: the cold tier's start
// when it holds older offsets than the local log, else the local start.
func (p *partition) logStart() int64 {
	local := p.log.LogStartOffset()
	if cs := p.tier.Load().coldStart; cs >= 0 && cs < local {
		return cs
	}
	return local
}

func (p *partition) withLogStart(res FetchResult) FetchResult {
	res.LogStartOffset = p.logStart()
	return res
}

// noStoreError answers a read below the local log of a tiered topic on a
// broker without an object store (object_store.type none): the offsets
// this broker can serve start at its local log, and the message says
// where the older ones went, rather than leaving an out-of-range answer
// to pass for lost history.
func (p *partition) noStoreError(offset int64, err error) error {
	start, hw := p.log.LogStartOffset(), p.log.HighWatermark()
	return refuse(ReasonOffsetOutOfRange, err,
		"offset %d of %s is out of range: valid offsets here are %d to %d; the topic has remote.storage.enable, but this broker has no object store (object_store.type none), so it cannot read history in the cold tier",
		offset, p.name(), start, hw).
		with("log_start_offset", itoa(start)).with("high_watermark", itoa(hw)).with("key", "object_store.type")
}

// coldFetch serves a leader's read below its local log from the cold tier.
func (b *Broker) coldFetch(ctx context.Context, p *partition, req FetchRequest) (FetchResult, error) {
	r, err := b.cold.Read(ctx, p.ref(), req.Offset, req.MaxBytes)
	if err != nil {
		return FetchResult{}, coldError(p.name(), req.Offset, p.logStart(), p.log.HighWatermark(), false, err)
	}
	return FetchResult{Batches: r.Batches, NextOffset: r.NextOffset, HighWatermark: p.log.HighWatermark(), LogStartOffset: p.logStart(), cold: r}, nil
}

// coldFetchAnywhere serves a read from the cold tier on a broker that does
// not lead the partition; ok is false when the cold tier does not hold the
// offset (the caller then answers NOT_LEADER). The high watermark it reports
// is the cold tier's end: what this broker knows to be committed.
func (b *Broker) coldFetchAnywhere(ctx context.Context, req FetchRequest) (FetchResult, bool) {
	if b.cold == nil {
		return FetchResult{}, false
	}
	t, ok := b.meta.Metadata().Topic(req.Topic)
	if !ok {
		return FetchResult{}, false
	}
	ref := tiering.PartitionRef{Topic: t.Name, TopicID: t.ID, Partition: req.Partition}
	h, err := b.cold.Head(ctx, ref)
	if err != nil || h == nil || h.Empty() || req.Offset < h.StartOffset() || req.Offset >= h.EndOffset() {
		return FetchResult{}, false
	}
	r, err := b.cold.Read(ctx, ref, req.Offset, req.MaxBytes)
	if err != nil {
		return FetchResult{}, false
	}
	return FetchResult{Batches: r.Batches, NextOffset: r.NextOffset, HighWatermark: h.EndOffset(), LogStartOffset: h.StartOffset(), cold: r}, true
}

// coldError translates a cold read's failure, for a leader and for a read
// replica alike. start and hw are the partition's valid offsets as the
// caller knows them. An offset out of range names them, unless bucketRange:
// a read replica has no log of its own, so the range it names is the cold
// tier's as the read found it (the writer's retention moved it since the
// caller's head was read), with a high watermark never below hw.
func coldError(name string, offset, start, hw int64, bucketRange bool, err error) error {
	var oor *tiering.OutOfColdRangeError
	switch {
	case errors.As(err, &oor):
		if bucketRange {
			start, hw = oor.Start, max(oor.End, hw)
		}
		return refuse(ReasonOffsetOutOfRange, err, "offset %d of %s is out of range: valid offsets are %d to %d", offset, name, start, hw).
			with("log_start_offset", itoa(start)).with("high_watermark", itoa(hw))
	case corrupt.Is(err):
		return refuse(ReasonCorruptData, err, "%s: the cold tier holds damaged data: %v", name, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return refuse(ReasonStorageError, err, "%s: reading the cold tier: %v", name, err)
}

func (p *partition) read(req FetchRequest) (FetchResult, error) {
	hw := p.log.HighWatermark()
	res, err := p.log.ReadWith(req.Buffer, req.Offset, req.MaxBytes, hw)
	if err != nil {
		return FetchResult{}, p.readError(req.Offset, err)
	}
	return FetchResult{Batches: res.Data, NextOffset: res.NextOffset, HighWatermark: hw, LogStartOffset: p.log.LogStartOffset()}, nil
}

func (p *partition) readError(offset int64, err error) error {
	var re *hotlog.RangeError
	if errors.As(err, &re) {
		hw, start := p.log.HighWatermark(), p.logStart()
		return refuse(ReasonOffsetOutOfRange, err, "offset %d of %s is out of range: valid offsets are %d to %d", offset, p.name(), start, hw).
			with("log_start_offset", itoa(start)).with("high_watermark", itoa(hw))
	}
	if errors.Is(err, hotlog.ErrClosed) {
		return refuse(ReasonUnavailable, err, "%s is closing", p.name())
	}
	if corrupt.Is(err) {
		return CorruptData(err, offset, "%s: the local log holds damaged data: %v", p.name(), err)
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

// ListOffsets resolves a query on a partition this broker leads, across
// both tiers. A time after every committed record answers the high
// watermark.
func (b *Broker) ListOffsets(ctx context.Context, topic string, partition int32, q OffsetQuery) (OffsetAnswer, error) {
	return b.role.listOffsets(ctx, topic, partition, q)
}

func (b clusterMember) listOffsets(ctx context.Context, topic string, partition int32, q OffsetQuery) (OffsetAnswer, error) {
	p, err := b.leaderPartition(topic, partition)
	if err != nil {
		return OffsetAnswer{}, err
	}
	if err := b.ensureTier(ctx, p); err != nil {
		return OffsetAnswer{}, err
	}
	ans := OffsetAnswer{TimestampMs: -1, LogStartOffset: p.logStart(), HighWatermark: p.log.HighWatermark()}
	switch {
	case q.Earliest:
		ans.Offset = ans.LogStartOffset
	case q.Latest:
		ans.Offset = ans.HighWatermark
	default:
		var cold, hot timeAnswer
		if ans.LogStartOffset < p.log.LogStartOffset() && b.cold != nil {
			off, ts, found, err := b.cold.OffsetForTimestamp(ctx, p.ref(), q.TimestampMs)
			if err != nil {
				return OffsetAnswer{}, coldError(p.name(), 0, ans.LogStartOffset, ans.HighWatermark, false, err)
			}
			cold = timeAnswer{off, ts, found}
		}
		off, ts, found, err := p.log.OffsetForTimestamp(q.TimestampMs)
		if err != nil {
			return OffsetAnswer{}, p.readError(0, err)
		}
		hot = timeAnswer{off, ts, found}
		ans.Offset, ans.TimestampMs = earlierAnswer(cold, hot, ans.HighWatermark)
	}
	return ans, nil
}

// timeAnswer is one tier's first record at or after a time.
type timeAnswer struct {
	offset, timestampMs int64
	found               bool
}

// earlierAnswer is the partition's first record at or after a time, from
// its tiers' answers: the earlier of the two below the high watermark, or
// the high watermark (and no timestamp) when neither tier has one. Both
// tiers are asked and neither is trusted to cover the other, since local
// retention may delete the segment holding the answer between the two
// lookups: the hot tier then answers with a later record, and only the
// cold tier's answer is right.
func earlierAnswer(cold, hot timeAnswer, highWatermark int64) (offset, timestampMs int64) {
	offset, timestampMs = highWatermark, -1
	for _, a := range []timeAnswer{cold, hot} {
		if a.found && a.offset < offset {
			offset, timestampMs = a.offset, a.timestampMs
		}
	}
	return offset, timestampMs
}
