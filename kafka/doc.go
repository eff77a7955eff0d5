// Package kafka is Strata's Kafka-protocol front end: a listener that
// speaks the Kafka wire protocol to unmodified Kafka clients and translates
// each request into calls on the broker core (package broker), as package
// rpc does for gRPC. No rule lives here: validation, idempotence, acks=all
// waits, quotas and limits are the broker's. The wire format (request and
// response types of every version, flexible versions, tagged fields) is
// franz-go's kmsg; this package holds no codec of its own.
//
// Layout: server.go accepts connections, conn.go reads frames and request
// headers and answers in request order, apis.go is the table of the APIs
// served and their versions (what ApiVersions advertises), errors.go maps
// the broker's reasons to Kafka error codes, and each API has its own file
// named by its key (00_produce.go, 01_fetch.go, ...), headed by its
// behaviour and edge cases. auth.go authenticates connections (TLS client
// certificates; SASL in sasl.go and sasl_scram.go) and says how each API is
// authorized; the rules themselves are the broker's (broker.Auth).
//
// Beside them: brokers.go (the brokers clients are told, KIP-951 leader
// hints), epochs.go (leader epochs, KIP-320), fetch_sessions.go (KIP-227),
// limits.go (connection limits) and metrics.go (requests by API).
package kafka
