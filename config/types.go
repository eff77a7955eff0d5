package config

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration that YAML, environment variables and flags
// write the human way ("30s", "5m", "2d"; a plain number is milliseconds).
// Convert with time.Duration(d).
type Duration time.Duration

// String renders the duration as FormatDuration does.
func (d Duration) String() string { return FormatDuration(time.Duration(d)) }

// UnmarshalYAML reads a scalar through ParseDuration.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &Error{Value: nodeText(n), Allowed: allowedDuration}
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the human form, so a dumped config reads like a
// hand-written one.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// ByteSize is a number of bytes that YAML, environment variables and flags
// write the human way ("4MiB", "1GiB", "64KB" or plain bytes).
type ByteSize int64

// String renders the size as FormatBytes does.
func (b ByteSize) String() string { return FormatBytes(int64(b)) }

// UnmarshalYAML reads a scalar through ParseBytes.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &Error{Value: nodeText(n), Allowed: allowedBytes}
	}
	v, err := ParseBytes(n.Value)
	if err != nil {
		return err
	}
	*b = ByteSize(v)
	return nil
}

// MarshalYAML writes the human form.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }

// Secret is a string that must not end up in logs: fmt prints it as
// "[redacted]" (or "" when unset), so logging a whole Broker is safe. Use
// string(s) where the value itself is needed.
type Secret string

// String hides the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString hides the value from %#v too.
func (s Secret) GoString() string { return fmt.Sprintf("config.Secret(%q)", s.String()) }

// nodeText describes a non-scalar YAML node for an error message.
func nodeText(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "<mapping>"
	case yaml.SequenceNode:
		return "<list>"
	}
	return n.Value
}
