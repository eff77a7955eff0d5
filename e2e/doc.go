// Package e2e holds black-box tests of the built strata binary: brokers run
// as separate processes on loopback ports, are killed with SIGKILL and
// restarted, and are driven only through their public APIs (gRPC, the
// Kafka listener, the CLI, the admin listener). To check what a broker
// stored, some tests also read its files after it has stopped (hotlog, for
// a data dir's partition logs) and the bucket's objects (tiering, through
// MinIO): the same readers the broker uses, never its running state.
package e2e
