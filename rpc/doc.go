// Package rpc serves Strata's gRPC API (rpc/proto/strata/v1) over a broker.
// Handlers are thin: they check and decode a request, call the broker and
// encode the answer; errors become statuses with an ErrorInfo (errors.go).
// gRPC health and server reflection are on, so grpcurl works unaided.
package rpc
