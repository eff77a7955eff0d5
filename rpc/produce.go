package rpc

// Produce: one batch for one partition, sent as simple records (which
// broker.BatchOf encodes into one batch with the requested compression;
// timestamp 0 means now) or as one encoded batch, stored as sent. A resend
// of an idempotent producer's batch is answered with the original offsets and
// duplicate set. A caller over its produce quota is refused with THROTTLED
// and a RetryInfo saying when to try again.
//
// InitProducer: a producer id from the controller, with epoch 0.
//
// A request's batch is decoded in place (produceServiceDesc): it stays in
// the buffer gRPC received the request in, the broker rewrites its header
// there and writes it to the log from there, and the buffer goes back to
// the pool once the call has returned. proto.Unmarshal would copy every
// batch into a fresh allocation first.

import (
	"context"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/rpc/grpcmem"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

type produceService struct {
	stratav1.UnimplementedProduceServiceServer
	b *broker.Broker
}

func (s *produceService) Produce(ctx context.Context, req *stratav1.ProduceRequest) (*stratav1.ProduceResponse, error) {
	if req.Topic == "" {
		return nil, invalid("topic is required")
	}
	var batch record.Batch
	switch {
	case len(req.Records) > 0 && len(req.Batch) > 0:
		return nil, invalid("send records or batch, not both")
	case len(req.Batch) > 0:
		batch = record.Batch(req.Batch)
	case len(req.Records) > 0:
		var err error
		if batch, err = encodeRecords(req.Records, req.Compression); err != nil {
			return nil, err
		}
	default:
		return nil, invalid("no records and no batch")
	}
	acks, err := ackMode(req.Acks)
	if err != nil {
		return nil, err
	}
	res, err := s.b.Produce(ctx, broker.ProduceRequest{
		Topic:     req.Topic,
		Partition: req.Partition,
		Batch:     batch,
		Acks:      acks,
		Timeout:   time.Duration(req.TimeoutMs) * time.Millisecond,
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.ProduceResponse{
		BaseOffset:      res.BaseOffset,
		LastOffset:      res.LastOffset,
		LogAppendTimeMs: res.LogAppendTime,
		LogStartOffset:  res.LogStartOffset,
		Duplicate:       res.Duplicate,
	}, nil
}

// produceServiceDesc is the generated ProduceService with Produce decoded
// in place (produceHandler); NewServer registers it.
var produceServiceDesc = func() grpc.ServiceDesc {
	d := stratav1.ProduceService_ServiceDesc
	d.Methods = slices.Clone(d.Methods)
	for i := range d.Methods {
		if d.Methods[i].MethodName == "Produce" {
			d.Methods[i].Handler = produceHandler
		}
	}
	return d
}()

// produceHandler is the generated handler of Produce, except that the
// request's batch is a slice of the received buffer (decodeProduceRequest),
// which goes back to the pool when the call, interceptors included,
// returns: nothing the call leaves behind keeps the batch, as the log
// writes it before Produce returns.
func produceHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	frame := new(grpcmem.Frame)
	if err := dec(frame); err != nil {
		return nil, err
	}
	defer frame.Free()
	in, err := decodeProduceRequest(frame.Bytes())
	if err != nil {
		// What gRPC answers a request its codec cannot decode.
		return nil, status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
	}
	if interceptor == nil {
		return srv.(stratav1.ProduceServiceServer).Produce(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: stratav1.ProduceService_Produce_FullMethodName}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return srv.(stratav1.ProduceServiceServer).Produce(ctx, req.(*stratav1.ProduceRequest))
	})
}

// batchField is the number of ProduceRequest.batch.
var batchField = protowire.Number((&stratav1.ProduceRequest{}).ProtoReflect().Descriptor().Fields().ByName("batch").Number())

// decodeProduceRequest decodes a ProduceRequest as proto.Unmarshal does,
// except that Batch is a slice of b, not a copy.
func decodeProduceRequest(b []byte) (*stratav1.ProduceRequest, error) {
	req := new(stratav1.ProduceRequest)
	batch, err := unmarshalInPlace(b, batchField, req)
	if err != nil {
		return nil, err
	}
	if len(batch) > 0 {
		req.Batch = batch
	}
	return req, nil
}

func (s *produceService) InitProducer(ctx context.Context, _ *stratav1.InitProducerRequest) (*stratav1.InitProducerResponse, error) {
	id, epoch, err := s.b.InitProducer(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.InitProducerResponse{ProducerId: id, ProducerEpoch: int32(epoch)}, nil
}

func ackMode(a stratav1.Acks) (broker.Acks, error) {
	switch a {
	case stratav1.Acks_ACKS_UNSPECIFIED, stratav1.Acks_ACKS_ALL:
		return broker.AcksAll, nil
	case stratav1.Acks_ACKS_LEADER:
		return broker.AcksLeader, nil
	case stratav1.Acks_ACKS_NONE:
		return broker.AcksNone, nil
	}
	return 0, invalid("unknown acks %d", a)
}

var compressionOf = map[stratav1.Compression]record.Compression{
	stratav1.Compression_COMPRESSION_UNSPECIFIED: record.CompressionNone,
	stratav1.Compression_COMPRESSION_NONE:        record.CompressionNone,
	stratav1.Compression_COMPRESSION_GZIP:        record.CompressionGzip,
	stratav1.Compression_COMPRESSION_SNAPPY:      record.CompressionSnappy,
	stratav1.Compression_COMPRESSION_LZ4:         record.CompressionLZ4,
	stratav1.Compression_COMPRESSION_ZSTD:        record.CompressionZstd,
}

// encodeRecords builds one batch from simple records (broker.BatchOf).
func encodeRecords(recs []*stratav1.Record, c stratav1.Compression) (record.Batch, error) {
	codec, ok := compressionOf[c]
	if !ok {
		return nil, invalid("%v", errUnknownCompression(c))
	}
	rs := make([]record.Record, 0, len(recs))
	for _, r := range recs {
		rec := record.Record{Timestamp: r.TimestampMs, Key: r.Key, Value: r.Value} // nil stays null
		for _, h := range r.Headers {
			rec.Headers = append(rec.Headers, record.Header{Key: h.Key, Value: h.Value})
		}
		rs = append(rs, rec)
	}
	batch, err := broker.BatchOf(rs, codec)
	if err != nil {
		return nil, toStatus(err)
	}
	return batch, nil
}

type errUnknownCompression stratav1.Compression

func (e errUnknownCompression) Error() string {
	return "unknown compression " + stratav1.Compression(e).String()
}
