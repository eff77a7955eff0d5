package rpc

import (
	"google.golang.org/grpc/experimental"

	"github.com/strata-log/strata/rpc/bufferpool"
)

// The tests of this package run gRPC on the pool the strata binary uses,
// with every buffer filled with 0xa5 as it is handed out: a byte gRPC
// passed on without writing it first would fail the checks of the batches
// and records these tests produce and fetch.
func init() { experimental.SetDefaultBufferPool(&bufferpool.Pool{Poison: true}) }
