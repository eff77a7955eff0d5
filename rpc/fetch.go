package rpc

// Fetch streams a partition from an offset: batches up to the high
// watermark, then new ones as they commit, with an empty heartbeat carrying
// the high watermark every max_wait_ms while nothing comes. With stop_at_end
// the stream ends once it has caught up. With decode, records are sent
// instead of batches, starting exactly at the requested offset. Each
// response carries at most max_bytes of batches (1 MiB when 0), and never
// more than the broker's limits.max_fetch_bytes: a larger max_bytes is
// served that much, not refused (a response always holds one whole batch).
// Over the caller's fetch quota the next response comes later, or the
// stream ends with THROTTLED and a RetryInfo.
//
// ListOffsets resolves earliest, latest, or a time.

import (
	"context"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/rpc/grpcmem"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

type fetchService struct {
	stratav1.UnimplementedFetchServiceServer
	b        *broker.Broker
	stopping context.Context // done when the server shuts down
}

// Fetch translates: the stream's rules are broker.FetchLoop's.
func (s *fetchService) Fetch(req *stratav1.FetchRequest, stream stratav1.FetchService_FetchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	defer context.AfterFunc(s.stopping, cancel)()
	var lent fetchBuffer
	defer lent.giveBack()
	var sendErr error
	err := s.b.FetchLoop(ctx, broker.FetchLoopRequest{
		Topic:     req.Topic,
		Partition: req.Partition,
		Offset:    req.Offset,
		MaxBytes:  int(req.MaxBytes),
		MaxWait:   time.Duration(req.MaxWaitMs) * time.Millisecond,
		StopAtEnd: req.StopAtEnd,
		Decode:    req.Decode,
		Buffer:    lent.borrow,
	}, func(res broker.FetchAnswer) error {
		resp := &stratav1.FetchResponse{
			HighWatermark:  res.HighWatermark,
			LogStartOffset: res.LogStartOffset,
			NextOffset:     res.NextOffset,
		}
		if req.Decode {
			resp.Records = protoRecords(res.Records)
		} else {
			resp.Batches = res.Batches
		}
		sendErr = stream.Send(resp)
		// Send has encoded the response: its bytes are free for the next.
		lent.giveBack()
		return sendErr
	})
	switch {
	case err == nil:
		return nil
	case sendErr != nil:
		return sendErr
	}
	return s.endStream(stream, err)
}

// fetchBuffer is what one fetch stream borrowed, from the pool gRPC
// messages use (grpcmem.Shared), for the response it is answering. Reading
// each response into a fresh buffer cost a fifth of a broker's CPU in a hot
// replay (allocation, zeroing, first touch of the memory). It is taken only
// when a read has data (an idle stream waiting at the end of the log holds
// none), and given back once the response is sent: gRPC's Send encodes the
// message before it returns, so the response no longer needs the bytes.
type fetchBuffer struct{ b *[]byte }

// borrow lends a buffer of n bytes for the fetch under way. Asked again
// within one fetch (a read whose first batch is larger than it planned
// for), it lends the same buffer if it is large enough: only the last one
// asked for holds the result.
func (f *fetchBuffer) borrow(n int) []byte {
	if f.b != nil && cap(*f.b) < n {
		grpcmem.Shared.Put(f.b)
		f.b = nil
	}
	if f.b == nil {
		f.b = grpcmem.Shared.Get(n)
	}
	return (*f.b)[:n]
}

func (f *fetchBuffer) giveBack() {
	if f.b != nil {
		if poisonFetchBuffers {
			full := (*f.b)[:cap(*f.b)]
			for i := range full {
				full[i] = 0xa5
			}
		}
		grpcmem.Shared.Put(f.b)
		f.b = nil
	}
}

// poisonFetchBuffers, set by tests, overwrites each buffer given back, so
// that one given back before its response was sent shows.
var poisonFetchBuffers = false

// endStream says why a stream ends: the client left, the server is
// stopping, or err.
func (s *fetchService) endStream(stream stratav1.FetchService_FetchServer, err error) error {
	switch {
	case stream.Context().Err() != nil:
		return nil // the client went away
	case s.stopping.Err() != nil:
		return toStatus(broker.Unavailable("the broker is shutting down"))
	}
	return toStatus(err)
}

// protoRecords is decoded records as the proto carries them; they share
// their keys, values and headers' values with recs.
func protoRecords(recs []record.Record) []*stratav1.Record {
	var out []*stratav1.Record
	for _, r := range recs {
		pr := &stratav1.Record{Key: r.Key, Value: r.Value, TimestampMs: r.Timestamp, Offset: r.Offset}
		for _, h := range r.Headers {
			pr.Headers = append(pr.Headers, &stratav1.Header{Key: h.Key, Value: h.Value})
		}
		out = append(out, pr)
	}
	return out
}

func (s *fetchService) ListOffsets(ctx context.Context, req *stratav1.ListOffsetsRequest) (*stratav1.ListOffsetsResponse, error) {
	var q broker.OffsetQuery
	switch query := req.Query.(type) {
	case *stratav1.ListOffsetsRequest_Spec:
		switch query.Spec {
		case stratav1.OffsetSpec_OFFSET_SPEC_EARLIEST:
			q.Earliest = true
		case stratav1.OffsetSpec_OFFSET_SPEC_LATEST:
			q.Latest = true
		default:
			return nil, invalid("spec must be EARLIEST or LATEST")
		}
	case *stratav1.ListOffsetsRequest_TimestampMs:
		q.TimestampMs = query.TimestampMs
	default:
		return nil, invalid("a spec or a timestamp_ms is required")
	}
	ans, err := s.b.ListOffsets(ctx, req.Topic, req.Partition, q)
	if err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.ListOffsetsResponse{
		Offset:         ans.Offset,
		TimestampMs:    ans.TimestampMs,
		LogStartOffset: ans.LogStartOffset,
		HighWatermark:  ans.HighWatermark,
	}, nil
}
