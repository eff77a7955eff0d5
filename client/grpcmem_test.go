package client_test

import "github.com/strata-log/strata/rpc/grpcmem"

// As in package rpc: every gRPC buffer is poisoned as it is handed out, so
// that one passed on before it was written shows.
func init() { grpcmem.Shared.Poison = true }
