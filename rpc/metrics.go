package rpc

// Request metrics: interceptors that count produce and fetch requests, the
// bytes they carry, their errors by reason and their latency, per topic,
// into the broker's RequestMetrics (which WriteMetrics reports).
//
// They run first in the chains, before authentication and authorization,
// so refused calls count too, as errors with reason UNAUTHENTICATED or
// PERMISSION_DENIED: an operator sees a client being turned away where he
// watches its traffic. (A fetch stream is authorized message by message,
// inside the handler, so it would count either way.) The topic label stays
// bounded whoever calls: a topic the metadata does not hold is counted as
// "(unknown)".
//
// A produce is measured from its arrival to its answer. A fetch is a
// stream: it counts once as a request, its latency is the time to its first
// answer (at the tail of a partition that includes the long poll, up to
// max_wait_ms), and its bytes as they are sent.

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/strata-log/strata/broker"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

const (
	produceMethod = "/strata.v1.ProduceService/Produce"
	fetchMethod   = "/strata.v1.FetchService/Fetch"
)

// requestMetrics records into one broker's counters.
type requestMetrics struct {
	m *broker.RequestMetrics
}

func (rm requestMetrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info.FullMethod != produceMethod {
		return handler(ctx, req)
	}
	r, _ := req.(*stratav1.ProduceRequest)
	s := rm.m.Produce(r.GetTopic())
	s.Request()
	start := time.Now()
	resp, err := handler(ctx, req)
	s.Latency(time.Since(start))
	if err != nil {
		s.Failed(errorReason(err))
	} else {
		s.Sent(produceBytes(r))
	}
	return resp, err
}

func (rm requestMetrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if info.FullMethod != fetchMethod {
		return handler(srv, ss)
	}
	ms := &measuredFetch{ServerStream: ss, m: rm.m, start: time.Now()}
	err := handler(srv, ms)
	ms.end(err)
	return err
}

// measuredFetch counts one fetch stream's request and answers. The handler
// receives once and then only sends, from its own goroutine, so the fields
// need no lock.
type measuredFetch struct {
	grpc.ServerStream
	m        *broker.RequestMetrics
	start    time.Time
	stats    *broker.RequestStats // nil until the request arrived
	answered bool
}

func (s *measuredFetch) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil && s.stats == nil {
		if r, ok := m.(*stratav1.FetchRequest); ok {
			s.stats = s.m.Fetch(r.GetTopic())
			s.stats.Request()
		}
	}
	return err
}

func (s *measuredFetch) SendMsg(m any) error {
	err := s.ServerStream.SendMsg(m)
	if err == nil && s.stats != nil {
		s.answer()
		r, _ := m.(*stratav1.FetchResponse)
		s.stats.Sent(fetchBytes(r))
	}
	return err
}

// answer records the latency of the first answer.
func (s *measuredFetch) answer() {
	if !s.answered {
		s.answered = true
		s.stats.Latency(time.Since(s.start))
	}
}

// end records how the stream ended. A stream whose request never arrived
// names no topic and is not counted.
func (s *measuredFetch) end(err error) {
	if s.stats == nil {
		return
	}
	s.answer() // a stream that ended without an answer: its end is the answer
	if err != nil {
		s.stats.Failed(errorReason(err))
	}
}

// produceBytes is what a produce request carries: its batch, or its
// records' keys, values and headers.
func produceBytes(r *stratav1.ProduceRequest) int64 {
	if len(r.GetBatch()) > 0 {
		return int64(len(r.GetBatch()))
	}
	return recordBytes(r.GetRecords())
}

// fetchBytes is what a fetch response carries: batches, or decoded records.
func fetchBytes(r *stratav1.FetchResponse) int64 {
	return int64(len(r.GetBatches())) + recordBytes(r.GetRecords())
}

func recordBytes(recs []*stratav1.Record) int64 {
	var n int
	for _, rec := range recs {
		n += len(rec.GetKey()) + len(rec.GetValue())
		for _, h := range rec.GetHeaders() {
			n += len(h.GetKey()) + len(h.GetValue())
		}
	}
	return int64(n)
}

// errorReason is the label of a failed call: the reason of its ErrorInfo
// (TOPIC_NOT_FOUND, NOT_LEADER, ...), else its gRPC code in the same style
// (CANCELED, DEADLINE_EXCEEDED, ...). Both are fixed sets.
func errorReason(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		if errors.Is(err, context.Canceled) {
			return "CANCELED"
		}
		return "UNKNOWN"
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain && info.GetReason() != "" {
			return info.GetReason()
		}
	}
	return upperSnake(st.Code().String())
}

// upperSnake turns a gRPC code's name (DeadlineExceeded) into the style of
// the API's reasons (DEADLINE_EXCEEDED).
func upperSnake(s string) string {
	var sb strings.Builder
	for i, r := range s {
		if i > 0 && unicode.IsUpper(r) {
			sb.WriteByte('_')
		}
		sb.WriteRune(unicode.ToUpper(r))
	}
	return sb.String()
}
