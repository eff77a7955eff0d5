package rpc

import (
	"context"
	"io"
	"log/slog"
	"net"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// testBroker is a broker serving gRPC on a loopback port, with clients.
type testBroker struct {
	*broker.Broker
	cfg     config.Broker
	srv     *Server
	addr    string
	conn    *grpc.ClientConn
	produce stratav1.ProduceServiceClient
	fetch   stratav1.FetchServiceClient
	admin   stratav1.AdminServiceClient
	meta    stratav1.MetadataServiceClient
	offsets stratav1.OffsetServiceClient
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// brokerConfig is a broker on loopback ports chosen by the kernel, with its
// data in dir.
func brokerConfig(t testing.TB, id int32, dir string) config.Broker {
	cfg := config.DefaultBroker()
	cfg.NodeID = id
	cfg.DataDir = dir
	cfg.Raft.Listen = freeport.Loopback(t)
	cfg.Gossip.Listen = freeport.Loopback(t)
	cfg.Gossip.Profile = "local"
	cfg.Admin.Listen = ""
	cfg.ObjectStore.Type = config.ObjectStoreNone
	return cfg
}

// startBroker starts a broker with cfg and serves it on a fresh port:
// one freeport hands out, as it does the Raft and gossip ports, so that it
// is never one of theirs (a port the kernel picks for 127.0.0.1:0 may be
// one freeport handed out and released, and the broker refuses listeners
// that share a port).
func startBroker(t testing.TB, cfg config.Broker, opts ...broker.Option) *testBroker {
	t.Helper()
	cfg.Listen = freeport.Loopback(t)
	return startBrokerAt(t, cfg, opts...)
}

// startBrokerAt starts a broker with cfg and serves it on cfg.Listen.
// harnessVersion is the software version the test brokers publish.
const harnessVersion = "v0.0.0-test"

func startBrokerAt(t testing.TB, cfg config.Broker, opts ...broker.Option) *testBroker {
	t.Helper()
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = lis.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts = append([]broker.Option{broker.WithVersion(harnessVersion)}, opts...)
	b, err := broker.Start(ctx, cfg, quietLogger(), NewPeers(nil, ""), opts...)
	if err != nil {
		lis.Close()
		t.Errorf("start broker %d: %v", cfg.NodeID, err)
		runtime.Goexit()
	}
	tb := &testBroker{Broker: b, cfg: cfg, srv: NewServer(b, nil), addr: cfg.Listen}
	go tb.srv.Serve(lis)
	tb.conn, err = grpc.NewClient(tb.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	tb.produce = stratav1.NewProduceServiceClient(tb.conn)
	tb.fetch = stratav1.NewFetchServiceClient(tb.conn)
	tb.admin = stratav1.NewAdminServiceClient(tb.conn)
	tb.meta = stratav1.NewMetadataServiceClient(tb.conn)
	tb.offsets = stratav1.NewOffsetServiceClient(tb.conn)
	t.Cleanup(func() { tb.stop(t) })
	return tb
}

// stop shuts the broker down as SIGTERM would: no new calls, in-flight ones
// finish, logs are fsynced and closed. Stopping twice is harmless.
func (tb *testBroker) stop(t testing.TB) {
	if tb.srv == nil {
		return
	}
	tb.conn.Close()
	tb.srv.GracefulStop()
	if err := tb.Close(); err != nil {
		t.Errorf("close broker: %v", err)
	}
	tb.srv = nil
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (tb *testBroker) createTopic(t testing.TB, name string, partitions int32, cfg map[string]string) *stratav1.TopicDescription {
	t.Helper()
	resp, err := tb.admin.CreateTopic(testCtx(t), &stratav1.CreateTopicRequest{Name: name, Partitions: partitions, Config: cfg})
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	return resp.Topic
}

// baseTime is the timestamp of the first record of every batchOf batch: a
// recent time, so that retention (7 days by default) keeps test data.
var baseTime = time.Now().Add(-time.Hour).UnixMilli()

// batchOf encodes records with values v0..vn-1 (as given) into one batch.
func batchOf(t testing.TB, values ...string) record.Batch {
	t.Helper()
	bl := record.NewBuilder(record.DefaultBatchOptions())
	for i, v := range values {
		bl.Add(record.Record{Timestamp: baseTime + int64(i), Key: []byte("k" + v), Value: []byte(v)})
	}
	b, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readAll fetches a partition from offset to its high watermark and returns
// the raw batches and the decoded records at or after offset.
func (tb *testBroker) readAll(t testing.TB, topic string, partition int32, offset int64) ([]byte, []record.Record) {
	t.Helper()
	stream, err := tb.fetch.Fetch(testCtx(t), &stratav1.FetchRequest{Topic: topic, Partition: partition, Offset: offset, StopAtEnd: true})
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	var recs []record.Record
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return raw, recs
		}
		if err != nil {
			t.Fatalf("fetch %s/%d from %d: %v", topic, partition, offset, err)
		}
		raw = append(raw, resp.Batches...)
		for data := resp.Batches; len(data) > 0; {
			b, rest, err := record.Next(data)
			if err != nil {
				t.Fatalf("fetched a bad batch: %v", err)
			}
			rs, err := b.Records()
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				if r.Offset >= offset {
					recs = append(recs, r)
				}
			}
			data = rest
		}
	}
}
