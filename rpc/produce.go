package rpc

// Produce: one batch for one partition, sent as simple records (which
// broker.BatchOf encodes into one batch with the requested compression;
// timestamp 0 means now) or as one encoded batch, stored as sent. A resend
// of an idempotent producer's batch is answered with the original offsets and
// duplicate set. A caller over its produce quota is refused with THROTTLED
// and a RetryInfo saying when to try again.
//
// InitProducer: a producer id from the controller, with epoch 0.

import (
	"context"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/record"
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
