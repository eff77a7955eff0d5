package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// TestKafkaColdReadAheadOutlivesTheRequest: a kgo consumer replaying
// history that is only in MinIO through the Kafka listener has each chunk
// fetched from the bucket once, as a gRPC fetch stream has. A Kafka Fetch
// is a request answered and done; read-ahead of the chunks after it used
// to live only as long as that request, so it was cancelled as each answer
// was sent and the next fetch sent the GET again.
func TestKafkaColdReadAheadOutlivesTheRequest(t *testing.T) {
	m := miniotest.Start(t)
	admin, kafkaAddr := freeport.Loopback(t), freeport.Loopback(t)
	b := newBroker(t, 1, s3Flags(m, "--admin-listen", admin, "--kafka-listen", kafkaAddr, "--tiering-chunk-bytes", "1MiB")...)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const topic, records, size = "history", 24 << 10, 1024
	if _, err := c.CreateTopic(ctx, topic, 1, 1, coldOnly("8MiB")); err != nil {
		t.Fatal(err)
	}
	tp := &tieredProducer{acked: map[int64]int64{}}
	p := newTieredProducer(c, client.WithAcks(stratav1.Acks_ACKS_LEADER))
	tp.produce(ctx, p, topic, 0, records, size, func(int64) time.Time { return time.Time{} })
	if err := p.Flush(ctx); err != nil || len(tp.failed) > 0 {
		t.Fatalf("produce: %v %v", err, tp.failed)
	}
	p.Close()
	waitOnlyInBucket(ctx, t, c, topic)

	// Each replay starts with an empty cache: a restarted broker.
	chunkGets := func(replay func()) float64 {
		b.stop()
		b.start()
		replay()
		return scrape(t, admin)["strata_cold_chunk_gets_total"]
	}
	grpcGets := chunkGets(func() {
		if n, _ := fetchAll(ctx, t, b.addr, topic, 1); n < records*size {
			t.Fatalf("the gRPC replay read %d bytes", n)
		}
	})
	kafkaGets := chunkGets(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for next := int64(0); next < records; {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				t.Fatalf("kgo replay at offset %d: %v", next, err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if r.Offset != next {
					t.Fatalf("kgo read offset %d, want %d", r.Offset, next)
				}
				next++
			})
		}
	})
	if grpcGets < 20 || kafkaGets != grpcGets {
		t.Fatalf("chunk GETs of the replay: %v through Kafka, %v over gRPC; want the same, each chunk once", kafkaGets, grpcGets)
	}
	t.Logf("chunk GETs of the replay: %v through Kafka, %v over gRPC", kafkaGets, grpcGets)
}
