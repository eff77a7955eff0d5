package config

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinels every configuration error matches with errors.Is. The errors
// themselves are *Error values carrying the detail.
var (
	// ErrInvalid: a value, key or combination of values is not allowed.
	// Every *Error matches it.
	ErrInvalid = errors.New("config: invalid configuration")
	// ErrUnknownKey: the key is not a setting at all (a typo, or a Kafka
	// setting Strata does not have). Such an *Error matches ErrInvalid too.
	ErrUnknownKey = errors.New("config: unknown key")
)

// reasonUnknownKey is the Reason of an *Error about a key that does not
// exist; it makes the error match ErrUnknownKey.
const reasonUnknownKey = "unknown key"

// Error is the one error type of this package. It names the offending key,
// the value as the user wrote it and what would have been accepted, so a
// message is enough to fix the configuration without reading the docs.
type Error struct {
	// Key is the setting: a topic key such as "retention.ms" or a broker
	// YAML path such as "object_store.type". Empty when a bare parser such
	// as ParseBytes fails; callers fill it in.
	Key string
	// Value is the rejected value as given or, when Validate finds a stored
	// value wrong, that value as people write it ("2d", "128MiB").
	Value string
	// Allowed describes the accepted values.
	Allowed string
	// Reason says why the value is rejected when Allowed alone does not,
	// for example "must not exceed retention.ms (7d)".
	Reason string
	// Source says where the value came from when it is known:
	// "file strata.yaml line 3", "STRATA_NODE_ID" or "--node-id".
	Source string
}

// Error formats as
//
//	config: invalid value "abc" for retention.ms: want a duration such as 90d, 6h, 30m, or -1 for unbounded
//	config: invalid value "2d" for local.retention.ms: must not exceed retention.ms (1d); want ...
//	config: unknown key "retention.msx" (from --topic-defaults): want one of retention.ms, ...
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	if e.Reason == reasonUnknownKey {
		b.WriteString("unknown key ")
		b.WriteString(strconv.Quote(e.Key))
	} else {
		b.WriteString("invalid value ")
		b.WriteString(strconv.Quote(e.Value))
		if e.Key != "" {
			b.WriteString(" for ")
			b.WriteString(e.Key)
		}
	}
	if e.Source != "" {
		b.WriteString(" (from ")
		b.WriteString(e.Source)
		b.WriteString(")")
	}
	sep := ": "
	if e.Reason != "" && e.Reason != reasonUnknownKey {
		b.WriteString(sep)
		b.WriteString(e.Reason)
		sep = "; "
	}
	if e.Allowed != "" {
		b.WriteString(sep)
		b.WriteString("want ")
		b.WriteString(e.Allowed)
	}
	return b.String()
}

// Is makes every *Error match ErrInvalid, and an unknown-key error match
// ErrUnknownKey as well.
func (e *Error) Is(target error) bool {
	return target == ErrInvalid || (target == ErrUnknownKey && e.Reason == reasonUnknownKey)
}

// unknownKey builds the error for a key that is not a setting, listing the
// ones that are.
func unknownKey(key string, known []string) *Error {
	return &Error{Key: key, Reason: reasonUnknownKey, Allowed: "one of " + strings.Join(known, ", ")}
}

// withKey returns err with Key set when err is an *Error without one, so
// bare parser errors gain the name of the setting being parsed. Other
// errors pass through.
func withKey(err error, key string) error {
	var e *Error
	if errors.As(err, &e) && e.Key == "" {
		c := *e
		c.Key = key
		return &c
	}
	return err
}
