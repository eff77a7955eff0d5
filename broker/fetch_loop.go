package broker

// FetchLoop: a partition read as a stream of answers, the way a consumer
// reads it through any front end. Batches up to the high watermark, then
// new ones as they commit; while nothing comes, an empty answer carrying
// the high watermark every MaxWait (a heartbeat). With StopAtEnd the loop
// ends once it has caught up, and sends no empty answer. With Decode each
// answer also carries its records at or after the offset it asked for, so
// a decoded read starts exactly at the requested offset. Every read is a
// Fetch: its byte cap, its quota (a wait, or THROTTLED) and its errors
// apply to each answer. A front end supplies send and translates; the loop
// ends at the first error from a read, from decoding, or from send, or
// when ctx ends, and returns it as it came.

import (
	"context"
	"time"

	"github.com/strata-log/strata/record"
)

// DefaultFetchMaxWait is how long a fetch loop waits at the end of the log
// before a heartbeat, when the request does not say.
const DefaultFetchMaxWait = 500 * time.Millisecond

// FetchLoopRequest asks for one partition from an offset, as a stream.
type FetchLoopRequest struct {
	Topic     string
	Partition int32
	Offset    int64
	MaxBytes  int           // per answer; 0 means 1 MiB; capped by limits.max_fetch_bytes
	MaxWait   time.Duration // between heartbeats; 0 means DefaultFetchMaxWait
	StopAtEnd bool          // end once caught up, instead of waiting for more
	Decode    bool          // decode each answer's records (FetchAnswer.Records)
	// Buffer lends each read its buffer, as FetchRequest.Buffer does: an
	// answer's Batches (and decoded Records, which may point into them)
	// are valid until send returns, and the buffer may be reused after.
	// (So are the cold reads': the loop releases each once send returns.)
	Buffer func(n int) []byte
}

// FetchAnswer is one answer of a fetch loop.
type FetchAnswer struct {
	FetchResult
	// Records, with Decode, are Batches' records at or after the offset
	// this answer was read from.
	Records []record.Record
}

// FetchLoop reads a partition as FetchLoopRequest says, calling send with
// each answer in order. It returns nil when StopAtEnd has caught up, and
// otherwise the error that ended it: a refusal from a read (THROTTLED,
// OFFSET_OUT_OF_RANGE, NOT_LEADER, ...), CORRUPT_DATA from decoding, the
// error send returned, or ctx's error.
func (b *Broker) FetchLoop(ctx context.Context, req FetchLoopRequest, send func(FetchAnswer) error) error {
	return fetchLoop(ctx, req, b.Fetch, send)
}

// fetchLoop is FetchLoop reading through fetch.
func fetchLoop(ctx context.Context, req FetchLoopRequest, fetch func(context.Context, FetchRequest) (FetchResult, error), send func(FetchAnswer) error) error {
	if req.Topic == "" {
		return InvalidRequest("topic is required")
	}
	if req.MaxBytes < 0 || req.MaxWait < 0 {
		return InvalidRequest("max_bytes and max_wait_ms must not be negative")
	}
	wait := req.MaxWait
	if wait == 0 {
		wait = DefaultFetchMaxWait
	}
	if req.StopAtEnd {
		wait = 0
	}
	offset := req.Offset
	for {
		res, err := fetch(ctx, FetchRequest{
			Topic:     req.Topic,
			Partition: req.Partition,
			Offset:    offset,
			MaxBytes:  req.MaxBytes,
			MaxWait:   wait,
			Buffer:    req.Buffer,
		})
		if err != nil {
			return err
		}
		ans := FetchAnswer{FetchResult: res}
		if req.Decode {
			if ans.Records, err = decodeRecords(req.Topic, req.Partition, res.Batches, offset, res.verified()); err != nil {
				res.Release()
				return err
			}
		}
		if len(res.Batches) > 0 || !req.StopAtEnd {
			err = send(ans)
		}
		// Sent (send returned): what the answer referred to may be reused.
		res.Release()
		if err != nil {
			return err
		}
		if req.StopAtEnd && res.NextOffset >= res.HighWatermark {
			return nil
		}
		offset = res.NextOffset
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// DecodeRecords decodes stored batches of a partition into records at or
// after from. Batches that fail their checks or do not decode were damaged
// in storage (the leader refuses such batches on produce): CORRUPT_DATA,
// naming where, never an internal error, which clients would retry
// forever. Records' keys, values and headers may point into data.
func DecodeRecords(topic string, partition int32, data []byte, from int64) ([]record.Record, error) {
	return decodeRecords(topic, partition, data, from, false)
}

// decodeRecords is DecodeRecords; verified says every batch's bytes passed
// their CRC check already (the cold reader checks them as they come from
// the store), and are not checked again.
func decodeRecords(topic string, partition int32, data []byte, from int64, verified bool) ([]record.Record, error) {
	split := record.Next
	if verified {
		split = record.NextVerified
	}
	var out []record.Record
	at := from // an offset the next batch holds, for errors
	for len(data) > 0 {
		b, rest, err := split(data)
		if err != nil {
			return nil, CorruptData(err, at, "%s/%d: the stored batch holding offset %d fails its checks: %v", topic, partition, at, err)
		}
		recs, err := b.Records()
		if err != nil {
			return nil, CorruptData(err, b.BaseOffset(), "%s/%d: the stored batch at offset %d does not decode: %v", topic, partition, b.BaseOffset(), err)
		}
		for _, r := range recs {
			if r.Offset >= from {
				out = append(out, r)
			}
		}
		data, at = rest, b.NextOffset()
	}
	return out, nil
}
