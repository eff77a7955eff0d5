package rpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
)

// A fetch response may be as large as the consumer asked for (or one
// batch larger): the Go client must take it, not refuse it at gRPC's
// 4 MiB default and retry the same fetch for ever.
func TestConsumerTakesResponsesLargerThanFourMiB(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	tb.createTopic(t, "large", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.New(ctx, []string{tb.addr}, client.WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	const records, size = 96, 100 << 10 // 9.6 MB, in batches of up to 1 MiB
	p := c.NewProducer(client.WithBatchBytes(1 << 20))
	value := bytes.Repeat([]byte("v"), size)
	for range records {
		p.Produce(ctx, &client.Record{Topic: "large", Partition: 0, Value: value}, nil)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()

	k := c.NewConsumer(client.WithStopAtEnd(true), client.WithFetchMaxBytes(16<<20))
	defer k.Close()
	if err := k.Assign("large", 0, client.Earliest()); err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		recs, err := k.Poll(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d records: %v", got, err)
		}
		got += len(recs)
	}
	if got != records {
		t.Fatalf("read %d records, want %d", got, records)
	}
}
