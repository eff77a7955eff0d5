// Package rpc serves Strata's gRPC API (rpc/proto/strata/v1) over a broker.
// Handlers are thin: they check and decode a request, call the broker and
// encode the answer; errors become statuses with an ErrorInfo (errors.go).
// gRPC health and server reflection are on, so grpcurl works unaided.
package rpc

import (
	"log/slog"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/strata-log/strata/broker"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// maxMessageBytes bounds a request: the largest batch a topic may accept
// (max.message.bytes tops out at 64 MiB) and room for the rest.
const maxMessageBytes = 64<<20 + 1<<20

// Server is the gRPC front of one broker.
type Server struct {
	grpc   *grpc.Server
	health *health.Server
}

// NewServer registers every service over b.
func NewServer(b *broker.Broker, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.Default()
	}
	g := grpc.NewServer(grpc.MaxRecvMsgSize(maxMessageBytes))
	stratav1.RegisterProduceServiceServer(g, &produceService{b: b})
	stratav1.RegisterFetchServiceServer(g, &fetchService{b: b})
	stratav1.RegisterMetadataServiceServer(g, &metadataService{b: b})
	stratav1.RegisterAdminServiceServer(g, &adminService{b: b})
	stratav1.RegisterOffsetServiceServer(g, &offsetService{b: b})
	h := health.NewServer()
	healthpb.RegisterHealthServer(g, h)
	reflection.Register(g)
	return &Server{grpc: g, health: h}
}

// Serve accepts connections on lis until Stop or GracefulStop.
func (s *Server) Serve(lis net.Listener) error {
	s.health.Resume()
	return s.grpc.Serve(lis)
}

// GracefulStop reports NOT_SERVING, stops accepting and waits for in-flight
// calls (open fetch streams included) to finish.
func (s *Server) GracefulStop() {
	s.health.Shutdown()
	s.grpc.GracefulStop()
}

// Stop closes every connection at once.
func (s *Server) Stop() {
	s.health.Shutdown()
	s.grpc.Stop()
}
