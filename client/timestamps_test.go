package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/record"
)

// TestProducerTimestamps: the batches the Producer builds pass the broker's
// timestamp checks whatever order its records' times come in and however
// they are compressed; a record before 1970 is refused before it joins a
// batch, so the records sent beside it are written; a record too far
// ahead of the broker's clock gets the broker's INVALID_TIMESTAMP.
func TestProducerTimestamps(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, []string{tb.cfg.Listen})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "times", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, codec := range []record.Compression{record.CompressionNone, record.CompressionZstd} {
		p := c.NewProducer(client.WithCompression(codec), client.WithLinger(50*time.Millisecond))
		recs := []*client.Record{
			{Topic: "times", Timestamp: now.Add(-time.Minute)},
			{Topic: "times", Timestamp: now.Add(30 * time.Minute)},
			{Topic: "times", Timestamp: time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)},
			{Topic: "times", Timestamp: time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)},
			{Topic: "times"},
		}
		errs := make([]error, len(recs))
		done := make(chan struct{}, len(recs))
		for i, r := range recs {
			p.Produce(ctx, r, func(_ *client.Record, err error) { errs[i] = err; done <- struct{}{} })
		}
		for range recs {
			<-done
		}
		for i, err := range errs {
			if i == 3 {
				if !errors.Is(err, client.ErrInvalidTimestamp) {
					t.Errorf("%v: a record of 1960: %v, want INVALID_TIMESTAMP", codec, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%v: record %d at %v: %v", codec, i, recs[i].Timestamp, err)
			}
		}
		err := p.ProduceSync(ctx, &client.Record{Topic: "times", Timestamp: now.Add(2 * time.Hour)})
		if e, ok := client.AsError(err); !errors.Is(err, client.ErrInvalidTimestamp) || !ok || e.Metadata["latest"] == "" {
			t.Errorf("%v: a record two hours ahead: %v, want the broker's INVALID_TIMESTAMP", codec, err)
		}
		p.Close()
	}
}
