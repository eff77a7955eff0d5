package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

func TestNewRejectsInvalidOptions(t *testing.T) {
	cases := []struct {
		opt Option
		key string
	}{
		{WithMetadataMaxAge(0), "WithMetadataMaxAge"},
		{WithMetadataMinRefreshInterval(-time.Second), "WithMetadataMinRefreshInterval"},
		{WithRequestTimeout(0), "WithRequestTimeout"},
	}
	for _, c := range cases {
		_, err := New(context.Background(), []string{"127.0.0.1:1"}, c.opt)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.key) || !strings.HasPrefix(err.Error(), "strata: ") {
			t.Errorf("%s: %v", c.key, err)
		}
	}
	if _, err := New(context.Background(), nil); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "bootstrap") {
		t.Errorf("no bootstrap: %v", err)
	}
	// Every invalid option is reported, not just the first.
	_, err := New(context.Background(), []string{"x:1"}, WithMetadataMaxAge(-1), WithRequestTimeout(-1))
	if err == nil || !strings.Contains(err.Error(), "WithMetadataMaxAge") || !strings.Contains(err.Error(), "WithRequestTimeout") {
		t.Errorf("two bad options: %v", err)
	}
}

func TestClientOptionsApply(t *testing.T) {
	cfg := defaultClientConfig()
	for _, o := range []Option{WithMetadataMaxAge(time.Minute), WithRequestTimeout(time.Second),
		WithMetadataMinRefreshInterval(0), WithLogger(nil), WithDialOptions()} {
		o.applyClient(&cfg)
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.metadataMaxAge != time.Minute || cfg.requestTimeout != time.Second || cfg.logger == nil {
		t.Errorf("config %+v", cfg)
	}
}

func TestProducerOptionValidation(t *testing.T) {
	cases := []struct {
		opt ProducerOption
		key string
	}{
		{WithMaxBufferedBytes(0), "WithMaxBufferedBytes"},
		{WithBatchBytes(0), "WithBatchBytes"},
		{WithBatchBytes(record.MaxBatchSize + 1), "WithBatchBytes"},
		{WithLinger(-time.Millisecond), "WithLinger"},
		{WithCompression(record.Compression(7)), "WithCompression"},
		{WithAcks(stratav1.Acks(42)), "WithAcks"},
		{WithMaxInFlightPerPartition(0), "WithMaxInFlightPerPartition"},
		{WithMaxInFlightPerPartition(6), "WithMaxInFlightPerPartition"}, // idempotent by default
		{WithRetries(-2), "WithRetries"},
		{WithRetryBackoff(0, time.Second), "WithRetryBackoff"},
		{WithRetryBackoff(time.Second, time.Millisecond), "WithRetryBackoff"},
		{WithDeliveryTimeout(0), "WithDeliveryTimeout"},
		{WithPartitioner(nil), "WithPartitioner"},
	}
	c := newClient(defaultClientConfig(), []string{"127.0.0.1:1"})
	defer c.Close()
	for _, tc := range cases {
		p := c.NewProducer(tc.opt)
		var got error
		p.Produce(context.Background(), &Record{Topic: "t"}, func(_ *Record, err error) { got = err })
		if !errors.Is(got, ErrInvalidConfig) || !strings.Contains(got.Error(), tc.key) {
			t.Errorf("%s: Produce got %v", tc.key, got)
		}
		if err := p.ProduceSync(context.Background(), &Record{Topic: "t"}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: ProduceSync got %v", tc.key, err)
		}
		if err := p.Flush(context.Background()); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Flush got %v", tc.key, err)
		}
		if err := p.Close(); err != nil {
			t.Errorf("%s: Close: %v", tc.key, err)
		}
	}
	// The defaults and sensible values pass.
	cfg := defaultProducerConfig()
	for _, o := range []ProducerOption{WithMaxBufferedBytes(1 << 30), WithBatchBytes(16 << 10), WithLinger(0),
		WithCompression(record.CompressionZstd), WithAcks(stratav1.Acks_ACKS_UNSPECIFIED), WithMaxInFlightPerPartition(5),
		WithRetries(0), WithRetries(-1), WithRetryBackoff(time.Millisecond, time.Millisecond), WithDeliveryTimeout(time.Second),
		WithPartitioner(NewDefaultPartitioner())} {
		o.applyProducer(&cfg)
	}
	if err := cfg.validate(); err != nil {
		t.Errorf("valid options refused: %v", err)
	}
	// Without idempotence, more than five in flight is allowed.
	for _, o := range []ProducerOption{WithIdempotence(false), WithMaxInFlightPerPartition(8)} {
		o.applyProducer(&cfg)
	}
	if err := cfg.validate(); err != nil {
		t.Errorf("eight in flight without idempotence refused: %v", err)
	}
}

func TestConsumerOptionValidation(t *testing.T) {
	cases := []struct {
		opt ConsumerOption
		key string
	}{
		{WithFetchMaxBytes(0), "WithFetchMaxBytes"},
		{WithFetchMaxBytes(1 << 31), "WithFetchMaxBytes"},
		{WithMaxBufferedRecords(0), "WithMaxBufferedRecords"},
		{WithResetOnOutOfRange(AtOffset(3)), "WithResetOnOutOfRange"},
	}
	c := newClient(defaultClientConfig(), []string{"127.0.0.1:1"})
	defer c.Close()
	for _, tc := range cases {
		k := c.NewConsumer(tc.opt)
		if err := k.Assign("t", 0, Earliest()); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: Assign got %v", tc.key, err)
		}
		if _, err := k.Poll(context.Background()); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Poll got %v", tc.key, err)
		}
		if err := k.Close(); err != nil {
			t.Errorf("%s: Close: %v", tc.key, err)
		}
	}
	cfg := defaultConsumerConfig()
	for _, o := range []ConsumerOption{WithFetchMaxBytes(64 << 10), WithMaxBufferedRecords(1), WithResetOnOutOfRange(Latest()),
		WithResetOnOutOfRange(AtTime(time.Now())), WithStopAtEnd(true), WithServerDecode(true)} {
		o.applyConsumer(&cfg)
	}
	if err := cfg.validate(); err != nil {
		t.Errorf("valid options refused: %v", err)
	}
}

func TestOffsetSpec(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 500e6, time.UTC)
	cases := []struct {
		spec OffsetSpec
		text string
		ok   bool
	}{
		{Earliest(), "Earliest()", true},
		{Latest(), "Latest()", true},
		{AtTime(at), "AtTime(2025-06-01T12:00:00.5Z)", true},
		{AtOffset(42), "AtOffset(42)", true},
		{AtOffset(-1), "AtOffset(-1)", false},
		{OffsetSpec{}, "OffsetSpec{}", false},
	}
	for _, c := range cases {
		if got := c.spec.String(); got != c.text {
			t.Errorf("String() = %q, want %q", got, c.text)
		}
		err := c.spec.validate("from")
		if (err == nil) != c.ok {
			t.Errorf("%s: validate = %v", c.text, err)
		}
		if err != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v is not ErrInvalidConfig", c.text, err)
		}
	}
	if !(OffsetSpec{}).IsZero() || Earliest().IsZero() {
		t.Error("IsZero")
	}
	// AtOffset needs no broker.
	c := newClient(defaultClientConfig(), []string{"127.0.0.1:1"})
	defer c.Close()
	if off, err := c.ListOffsets(context.Background(), "t", 0, AtOffset(17)); off != 17 || err != nil {
		t.Errorf("ListOffsets(AtOffset(17)) = %d, %v", off, err)
	}
	if _, err := c.ListOffsets(context.Background(), "t", 0, OffsetSpec{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("ListOffsets(zero spec): %v", err)
	}
}

func TestAssignRejectsZeroSpec(t *testing.T) {
	c := newClient(defaultClientConfig(), []string{"127.0.0.1:1"})
	defer c.Close()
	k := c.NewConsumer()
	defer k.Close()
	if err := k.Assign("t", 0, OffsetSpec{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Assign(zero spec): %v", err)
	}
	if err := k.Assign("t", 0, AtOffset(-5)); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Assign(AtOffset(-5)): %v", err)
	}
}
