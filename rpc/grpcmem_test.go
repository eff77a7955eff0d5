package rpc

import "github.com/strata-log/strata/rpc/grpcmem"

// The tests of this package run gRPC on Strata's buffer pool with every
// buffer filled with 0xa5 as it is handed out: a byte gRPC or the codec
// passed on without writing it first would fail the checks of the batches
// and records these tests produce and fetch.
func init() { grpcmem.Shared.Poison = true }
