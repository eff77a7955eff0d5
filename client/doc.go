// Package client is the Go client of Strata: a producer that batches
// records per partition, a consumer that streams assigned partitions, a
// consumer group member, and the admin calls (topics, offsets, groups,
// metadata), over Strata's gRPC API.
//
// One Client per process holds the cluster metadata (which broker leads
// which partition) and one gRPC connection per broker:
//
//	c, err := client.New(ctx, []string{"localhost:7400"})
//	defer c.Close()
//
//	p := c.NewProducer(client.WithLinger(10 * time.Millisecond))
//	defer p.Close()
//	p.Produce(ctx, &client.Record{Topic: "events", Partition: client.AnyPartition, Value: v},
//		func(r *client.Record, err error) { ... })
//
//	k := c.NewConsumer()
//	defer k.Close()
//	k.Assign("events", 0, client.Earliest())
//	recs, err := k.Poll(ctx)
//
// Members of a consumer group share the partitions of the topics they read
// (GroupConsumer), and resume from the group's committed positions:
//
//	g, err := c.NewGroupConsumer("billing", []string{"events"})
//	defer g.Close(ctx)
//	for {
//		recs, err := g.Poll(ctx) // commits what earlier Polls returned
//		...
//	}
//
// Batches are Kafka RecordBatch v2, built with package record, and records
// with a key land on the partition Kafka's Java producer would choose
// (KeyPartition), so keyed data keeps its layout when it moves between the
// two systems.
//
// # Ordering and delivery
//
// Records of one partition are written in the order they were produced,
// retries included, with WithMaxInFlightPerPartition 1 (the default), and
// with up to 5 under idempotence (see that option). The producer is
// idempotent by default (WithIdempotence): a retry after a lost answer, a
// timeout or a leader failover does not write a batch twice, so every
// acknowledged record is in its partition exactly once. Without idempotence
// delivery is at least once.
//
// # Errors
//
// Every error starts with "strata: ". Errors from brokers are *Error values
// carrying the gRPC code, a machine-readable reason and whether a retry can
// help; test them with errors.Is against the ErrXxx sentinels, read their
// details with AsError, and ask IsRetriable before retrying a call yourself.
// Invalid options are reported as ErrInvalidConfig naming the option, its
// value and what is allowed.
package client
