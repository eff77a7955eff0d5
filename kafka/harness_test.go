package kafka

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil/inproc"
)

// noPeers is the transport of a broker alone: it never reaches another.
type noPeers struct{ broker.Peers }

func (noPeers) KnowsController(context.Context, broker.Peer) (bool, error) { return false, nil }
func (noPeers) VerifyBroker(context.Context, broker.BrokerIdentity) error  { return nil }
func (noPeers) Close() error                                               { return nil }

type testBroker struct {
	*broker.Broker
	srv    *Server
	addr   string // the Kafka listener's
	gossip string // the gossip listener's, for brokers joining (cluster_test.go)
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startBroker starts a broker alone, in process, with a Kafka listener on
// a loopback port, and stops both when the test ends.
func startBroker(t testing.TB, cfgs ...func(*Config)) *testBroker {
	t.Helper()
	return startBrokerWith(t, nil, cfgs...)
}

// startBrokerWith is startBroker with the broker's settings changed by
// bcfg (nil for none) after the defaults.
func startBrokerWith(t testing.TB, bcfg func(*config.Broker), cfgs ...func(*Config)) *testBroker {
	t.Helper()
	cfg := inproc.Config(t, 1, t.TempDir())
	cfg.ObjectStore.Type = config.ObjectStoreNone
	if bcfg != nil {
		bcfg(&cfg)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := broker.Start(testCtx(t), cfg, logger, noPeers{})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	kc := Config{Advertise: lis.Addr().String(), Logger: logger}
	for _, f := range cfgs {
		f(&kc)
	}
	srv, err := NewServer(b, kc)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	tb := &testBroker{Broker: b, srv: srv, addr: lis.Addr().String()}
	t.Cleanup(func() {
		srv.Close()
		if err := b.Close(); err != nil {
			t.Errorf("close broker: %v", err)
		}
	})
	return tb
}

func (tb *testBroker) createTopic(t testing.TB, name string, partitions int32) broker.TopicDescription {
	t.Helper()
	d, err := tb.CreateTopic(testCtx(t), name, partitions, 1, nil)
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	return d
}

// client is a kgo client of tb (idempotent unless opts say otherwise).
func (tb *testBroker) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tb.addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
