// Package inproc runs a Strata broker inside a test's process, on loopback
// ports, for the tests of the front ends and the command line. It imports
// rpc, so rpc's own tests cannot use it: they keep their harness
// (rpc/harness_test.go), which does the same and adds gRPC clients.
package inproc

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/rpc"
)

// Config is broker id's default configuration with its data in dir, every
// listener on a loopback port from freeport, gossip tuned for one host and
// no admin endpoint.
func Config(t testing.TB, id int32, dir string) config.Broker {
	t.Helper()
	cfg := config.DefaultBroker()
	cfg.NodeID = id
	cfg.DataDir = dir
	cfg.Listen = freeport.Loopback(t)
	cfg.Raft.Listen = freeport.Loopback(t)
	cfg.Gossip.Listen = freeport.Loopback(t)
	cfg.Gossip.Profile = "local"
	cfg.Admin.Listen = ""
	return cfg
}

// Start starts a plaintext broker of cfg in this process and serves gRPC
// on cfg.Listen. The caller stops both (srv.GracefulStop, then b.Close),
// so a test can stop the broker and start it again on the same data.
func Start(t testing.TB, cfg config.Broker, opts ...broker.Option) (*broker.Broker, *rpc.Server) {
	t.Helper()
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b, err := broker.Start(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), rpc.NewPeers(nil, ""), opts...)
	if err != nil {
		lis.Close()
		t.Fatalf("start broker: %v", err)
	}
	srv := rpc.NewServer(b, nil)
	go srv.Serve(lis)
	return b, srv
}
