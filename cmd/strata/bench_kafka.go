package main

// The Kafka path of strata bench: with --kafka ADDR, bench produce and
// bench consume move their records through the broker's Kafka listener with
// franz-go, a Kafka client, instead of Strata's gRPC client, with the same
// settings, payloads and measurements, so the two front ends compare in one
// sitting. The topic is still found or created, and its ends read, over
// gRPC.

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

const kafkaFlagHelp = "Kafka listener (host:port) to move the records through instead of gRPC, to compare the two front ends"

// benchProducer is what bench produce sends records with.
type benchProducer interface {
	// produce sends one record; done gets its outcome.
	produce(ctx context.Context, key, value []byte, done func(error))
	// flush waits for every record sent to have its outcome.
	flush(ctx context.Context) error
	close()
}

// grpcProducer sends with Strata's client.
type grpcProducer struct {
	p     *client.Producer
	topic string
}

func (g grpcProducer) produce(ctx context.Context, key, value []byte, done func(error)) {
	r := &client.Record{Topic: g.topic, Partition: client.AnyPartition, Key: key, Value: value}
	g.p.Produce(ctx, r, func(_ *client.Record, err error) { done(err) })
}
func (g grpcProducer) flush(ctx context.Context) error { return g.p.Flush(ctx) }
func (g grpcProducer) close()                          { g.p.Close() }

// kafkaProducer sends with franz-go through a Kafka listener.
type kafkaProducer struct {
	cl    *kgo.Client
	topic string
}

func (k kafkaProducer) produce(ctx context.Context, key, value []byte, done func(error)) {
	r := &kgo.Record{Topic: k.topic, Key: key, Value: value}
	if len(key) == 0 {
		r.Key = nil
	}
	k.cl.Produce(ctx, r, func(_ *kgo.Record, err error) { done(err) })
}
func (k kafkaProducer) flush(ctx context.Context) error { return k.cl.Flush(ctx) }
func (k kafkaProducer) close()                          { k.cl.Close() }

// newKafkaProducer is the Kafka client the bench produce flags describe:
// idempotent unless acks are none (Kafka's idempotence needs acks=all),
// sticky per batch without keys, as Strata's producer. A request holds at
// most kafkaRequestBytes.
func (o *benchProduceOptions) newKafkaProducer(f *clientFlags, acks stratav1.Acks, codec record.Compression, batchBytes int64) (kafkaProducer, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.kafka),
		kgo.DefaultProduceTopic(o.topic),
		kgo.ProducerLinger(o.linger),
		kgo.ProducerBatchMaxBytes(int32(min(batchBytes, 1<<30))),
		kgo.BrokerMaxWriteBytes(kafkaRequestBytes(batchBytes)),
		kgo.MaxBufferedRecords(1 << 20),
		kgo.RecordDeliveryTimeout(f.timeout),
		kgo.ProducerBatchCompression(kafkaCodec(codec)),
	}
	switch acks {
	case stratav1.Acks_ACKS_NONE:
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	case stratav1.Acks_ACKS_LEADER:
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	default:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	if o.inFlight > 1 {
		opts = append(opts, kgo.MaxProduceRequestsInflightPerBroker(o.inFlight))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return kafkaProducer{}, usageErrorf("--kafka %s: %v", o.kafka, err)
	}
	return kafkaProducer{cl: cl, topic: o.topic}, nil
}

// kafkaRequestBytes bounds a produce request of the bench's Kafka client:
// two batches of batchBytes, at least 1 MiB (the Java producer's
// max.request.size), at most 1 GiB. Left at franz-go's 100 MiB, a request
// spread over a thousand partitions grew to tens of MB while the broker
// waited for it: building it cost the client 8 times the CPU per record of
// a one-partition run (docs/BENCHMARKS.md).
func kafkaRequestBytes(batchBytes int64) int32 {
	return int32(min(max(2*batchBytes, 1<<20), 1<<30))
}

func kafkaCodec(c record.Compression) kgo.CompressionCodec {
	switch c {
	case record.CompressionGzip:
		return kgo.GzipCompression()
	case record.CompressionSnappy:
		return kgo.SnappyCompression()
	case record.CompressionLZ4:
		return kgo.Lz4Compression()
	case record.CompressionZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// benchConsumer is what bench consume reads with.
type benchConsumer interface {
	// poll blocks for the next records and returns how many and their
	// payload bytes, counting at most limit records (0: no limit); io.EOF
	// once every partition is read to its end.
	poll(ctx context.Context, limit int64) (records, bytes int64, err error)
	close()
}

type grpcConsumer struct{ k *client.Consumer }

func (g grpcConsumer) poll(ctx context.Context, limit int64) (int64, int64, error) {
	recs, err := g.k.Poll(ctx)
	if err != nil {
		return 0, 0, err
	}
	var n, b int64
	for _, r := range recs {
		if limit > 0 && n == limit {
			break
		}
		n++
		b += int64(len(r.Key) + len(r.Value))
	}
	return n, b, nil
}
func (g grpcConsumer) close() { g.k.Close() }

// kafkaConsumer reads assigned partitions with franz-go until each has
// reached the end it had when the bench started.
type kafkaConsumer struct {
	cl   *kgo.Client
	ends map[int32]int64 // partitions not yet at their end
}

func newKafkaConsumer(addr, topic string, parts []int32, starts, ends []int64, fetchMax int64) (*kafkaConsumer, error) {
	assign := map[int32]kgo.Offset{}
	left := map[int32]int64{}
	for i, p := range parts {
		if starts[i] < ends[i] {
			assign[p] = kgo.NewOffset().At(starts[i])
			left[p] = ends[i]
		}
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
		// --fetch-max-bytes bounds each partition's share, as it bounds
		// each partition's stream over gRPC; a request as a whole may
		// carry Kafka's default 50 MiB.
		kgo.FetchMaxBytes(int32(min(max(fetchMax, 50<<20), 1<<30))),
		kgo.FetchMaxPartitionBytes(int32(min(fetchMax, 1<<30))),
	)
	if err != nil {
		return nil, usageErrorf("--kafka %s: %v", addr, err)
	}
	return &kafkaConsumer{cl: cl, ends: left}, nil
}

func (k *kafkaConsumer) poll(ctx context.Context, limit int64) (int64, int64, error) {
	for len(k.ends) > 0 {
		fs := k.cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		var firstErr error
		fs.EachError(func(t string, p int32, err error) {
			if firstErr == nil && !errors.Is(err, context.Canceled) {
				firstErr = fmt.Errorf("%s/%d: %w", t, p, err)
			}
		})
		if firstErr != nil {
			return 0, 0, firstErr
		}
		var n, b int64
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := k.ends[r.Partition]
			if !ok || r.Offset >= end || (limit > 0 && n == limit) {
				return
			}
			n++
			b += int64(len(r.Key) + len(r.Value))
			if r.Offset == end-1 {
				delete(k.ends, r.Partition)
			}
		})
		if n > 0 {
			return n, b, nil
		}
	}
	return 0, 0, io.EOF
}
func (k *kafkaConsumer) close() { k.cl.Close() }
