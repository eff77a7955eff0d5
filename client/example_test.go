package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/record"
)

// These examples need a running cluster; they are compiled, not run.

func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, []string{"localhost:7400", "localhost:7401"},
		client.WithLogger(slog.Default()),
		client.WithRequestTimeout(15*time.Second),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
}

// Produce asynchronously, with a callback per record; Flush or Close wait
// for the answers.
func ExampleProducer() {
	ctx := context.Background()
	c, err := client.New(ctx, []string{"localhost:7400"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	p := c.NewProducer(
		client.WithLinger(10*time.Millisecond),
		client.WithCompression(record.CompressionZstd),
	)
	defer p.Close()

	for i := range 1000 {
		r := &client.Record{
			Topic:     "orders",
			Partition: client.AnyPartition,
			Key:       fmt.Appendf(nil, "customer-%d", i%50), // same customer, same partition
			Value:     fmt.Appendf(nil, `{"order":%d}`, i),
		}
		p.Produce(ctx, r, func(r *client.Record, err error) {
			if err != nil {
				log.Printf("order %s: %v", r.Value, err)
				return
			}
			log.Printf("order %s at %s/%d offset %d", r.Value, r.Topic, r.Partition, r.Offset)
		})
	}
	if err := p.Flush(ctx); err != nil {
		log.Fatal(err)
	}

	// Or wait for a few records in place.
	r := &client.Record{Topic: "orders", Partition: client.AnyPartition, Value: []byte("last")}
	if err := p.ProduceSync(ctx, r); err != nil {
		log.Fatal(err)
	}
	fmt.Println("written at offset", r.Offset)
}

// Read two partitions from a point in time, committing positions as a
// group would.
func ExampleConsumer() {
	ctx := context.Background()
	c, err := client.New(ctx, []string{"localhost:7400"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	k := c.NewConsumer(client.WithResetOnOutOfRange(client.Earliest()))
	defer k.Close()
	since := client.AtTime(time.Now().Add(-time.Hour))
	for _, part := range []int32{0, 1} {
		if err := k.Assign("orders", part, since); err != nil {
			log.Fatal(err)
		}
	}
	for range 10 {
		recs, err := k.Poll(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range recs {
			fmt.Printf("%s/%d@%d %s\n", r.Topic, r.Partition, r.Offset, r.Value)
		}
		commit := map[client.TopicPartition]int64{}
		for _, part := range []int32{0, 1} {
			if pos := k.Position("orders", part); pos >= 0 {
				commit[client.TopicPartition{Topic: "orders", Partition: part}] = pos
			}
		}
		if err := c.CommitOffsets(ctx, "billing", commit); err != nil {
			log.Print(err)
		}
	}
}

// Instances of one service share a topic as members of a consumer group:
// each gets some of the partitions, and takes over those of an instance
// that stops. Records come from Poll; positions are committed every 5 s,
// and when a partition moves away or the member closes.
func ExampleGroupConsumer() {
	ctx := context.Background()
	c, err := client.New(ctx, []string{"localhost:7400"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	g, err := c.NewGroupConsumer("billing", []string{"orders"},
		client.WithOnAssigned(func(_ context.Context, tps []client.TopicPartition) { log.Printf("assigned %v", tps) }),
		client.WithOnRevoked(func(_ context.Context, tps []client.TopicPartition) { log.Printf("revoked %v", tps) }))
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close(ctx) // commits, and hands the partitions over at once
	for range 10 {
		recs, err := g.Poll(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range recs {
			fmt.Printf("%s/%d@%d %s\n", r.Topic, r.Partition, r.Offset, r.Value)
		}
	}
}

// Read everything a partition holds now, then stop.
func ExampleWithStopAtEnd() {
	ctx := context.Background()
	c, err := client.New(ctx, []string{"localhost:7400"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	k := c.NewConsumer(client.WithStopAtEnd(true))
	defer k.Close()
	if err := k.Assign("orders", 0, client.Earliest()); err != nil {
		log.Fatal(err)
	}
	n := 0
	for {
		recs, err := k.Poll(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		n += len(recs)
	}
	fmt.Println(n, "records")
}

// Create a topic unless it exists, then look at it.
func ExampleClient_CreateTopic() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, []string{"localhost:7400"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	_, err = c.CreateTopic(ctx, "orders", 6, 3, map[string]string{
		"retention.ms":        "-1", // keep forever: old segments live in the object store
		"local.retention.ms":  "86400000",
		"min.insync.replicas": "2",
	})
	if err != nil && !errors.Is(err, client.ErrTopicAlreadyExists) {
		log.Fatal(err)
	}
	desc, err := c.DescribeTopic(ctx, "orders")
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range desc.GetPartitions() {
		fmt.Printf("partition %d: leader %d, high watermark %d\n",
			p.GetMetadata().GetPartition(), p.GetMetadata().GetLeader(), p.GetHighWatermark())
	}
	latest, err := c.ListOffsets(ctx, "orders", 0, client.Latest())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next offset of orders/0:", latest)
}
