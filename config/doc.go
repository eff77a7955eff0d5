// Package config holds Strata's settings: the broker's (read once at start)
// and each topic's (changed at run time by "alter config"). It imports
// nothing else of Strata, so every package may depend on it.
//
// # Topic settings
//
// Topic keeps Kafka's key names and meanings (retention.ms, segment.bytes,
// min.insync.replicas, ...; see TopicKeys). Values are accepted as Kafka
// writes them ("604800000", "-1") and as people write them ("7d", "128MiB").
// A Topic is an immutable snapshot: holders keep it behind an
// atomic.Pointer[config.Topic] and swap in a new validated one, so a reader
// never sees half an update. There is no mutable package state.
//
// # Broker settings
//
// Broker comes from, in rising precedence, DefaultBroker, a YAML file
// (decoded strictly: an unknown key is an error), STRATA_* environment
// variables and flags; see Load and BindFlags. One table of fields names
// each setting in all three places (object_store.type,
// STRATA_OBJECT_STORE_TYPE, --object-store-type), so they cannot drift
// apart. strata.example.yaml is the documented example.
//
// # Errors
//
// Every invalid value is reported as an *Error naming the key, the value,
// what is allowed and, when known, where the value came from. All of them
// match ErrInvalid with errors.Is.
package config
