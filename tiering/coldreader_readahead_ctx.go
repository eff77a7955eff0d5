package tiering

import "context"

// readAheadKey is the context key of WithReadAhead.
type readAheadKey struct{}

// WithReadAhead returns ctx carrying lifetime: the context that read-ahead
// started by a Read with it lives as long as, in place of ctx itself. A
// reader whose reads are each a short request of a longer-lived consumer
// (a Kafka Fetch, answered and done, from a connection that goes on
// fetching) passes the consumer's lifetime here; otherwise the chunks
// fetched ahead for it would be cancelled as each answer is sent, and the
// next read would GET them again itself.
func WithReadAhead(ctx, lifetime context.Context) context.Context {
	return context.WithValue(ctx, readAheadKey{}, lifetime)
}

// readAheadContext is the context read-ahead started by a read with ctx
// lives as long as.
func readAheadContext(ctx context.Context) context.Context {
	if l, ok := ctx.Value(readAheadKey{}).(context.Context); ok {
		return l
	}
	return ctx
}
