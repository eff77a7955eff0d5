package rpc

import (
	"context"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/rpc/grpcmem"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// maxMessageBytes bounds a request: the largest batch a topic may accept
// (max.message.bytes tops out at 64 MiB) and room for the rest.
const maxMessageBytes = 64<<20 + 1<<20

// Server is the gRPC front of one broker.
type Server struct {
	grpc   *grpc.Server
	health *health.Server
	// stopping ends open fetch streams when the server shuts down: they
	// would otherwise hold a graceful stop open for as long as consumers
	// stay connected.
	stopping context.Context
	stop     context.CancelFunc
}

// NewServer registers every service over b. With auth nil it serves
// plaintext and lets every caller do everything (a broker on loopback, for
// development); otherwise it serves TLS and authenticates and authorizes
// every call (auth.go).
func NewServer(b *broker.Broker, auth *Auth) *Server {
	// Request metrics come first, so that refused calls count too
	// (metrics.go).
	rm := requestMetrics{b.RequestMetrics()}
	opts := append([]grpc.ServerOption{grpc.MaxRecvMsgSize(maxMessageBytes),
		// Batches go out to followers and consumers in messages of up to
		// a few MiB: written 32 KiB (gRPC's default) at a time, the write
		// system calls were a fifth of a leader's CPU. The buffer is
		// shared, taken for a write and given back after, so an idle
		// connection holds none.
		grpc.WriteBufferSize(connBufferBytes), grpc.SharedWriteBuffer(true),
		// A 1 MiB produce request was read 32 KiB at a time, 32 reads
		// per MiB. gRPC takes the read buffer from the pool only while
		// data is waiting on the connection, so an idle connection holds
		// none of it either.
		grpc.ReadBufferSize(connBufferBytes)}, grpcmem.ServerOptions()...)
	if auth == nil {
		opts = append(opts, grpc.ChainUnaryInterceptor(rm.unary, markForwarded), grpc.ChainStreamInterceptor(rm.stream))
	} else {
		opts = append(opts,
			grpc.Creds(credentials.NewTLS(auth.Material.ServerConfig(false, nil))),
			// A call the broker passes on to the controller
			// (broker/controller.go) is checked here first, and again
			// there as the principal it names (controller.go).
			grpc.ChainUnaryInterceptor(rm.unary, auth.unary, markForwarded),
			grpc.ChainStreamInterceptor(rm.stream, auth.stream))
	}
	g := grpc.NewServer(opts...)
	s := &Server{grpc: g, health: health.NewServer()}
	s.stopping, s.stop = context.WithCancel(context.Background())
	g.RegisterService(&produceServiceDesc, &produceService{b: b}) // produce.go: the batch decoded in place
	stratav1.RegisterFetchServiceServer(g, &fetchService{b: b, stopping: s.stopping})
	stratav1.RegisterMetadataServiceServer(g, &metadataService{b: b})
	stratav1.RegisterAdminServiceServer(g, &adminService{b: b})
	stratav1.RegisterOffsetServiceServer(g, &offsetService{b: b})
	stratav1.RegisterGroupServiceServer(g, &groupService{b: b})
	stratav1.RegisterUserServiceServer(g, &userService{b: b}) // users.go
	stratav1.RegisterReplicationServiceServer(g, &replicationService{b: b, stopping: s.stopping})
	healthpb.RegisterHealthServer(g, s.health)
	reflection.Register(g)
	return s
}

// Serve accepts connections on lis until Stop or GracefulStop.
func (s *Server) Serve(lis net.Listener) error {
	s.health.Resume()
	return s.grpc.Serve(lis)
}

// GracefulStop reports NOT_SERVING, stops accepting, ends open fetch streams
// (with UNAVAILABLE, so consumers resume elsewhere or after a restart) and
// waits for the other in-flight calls to finish.
func (s *Server) GracefulStop() {
	s.health.Shutdown()
	s.stop()
	s.grpc.GracefulStop()
}

// Stop closes every connection at once.
func (s *Server) Stop() {
	s.health.Shutdown()
	s.stop()
	s.grpc.Stop()
}
