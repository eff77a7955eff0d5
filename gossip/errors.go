package gossip

import "errors"

// Errors returned by this package. Callers test for them with errors.Is; the
// returned errors wrap them with the detail (which key, which value, which peer).
var (
	// ErrInvalidConfig reports a Config that Validate refuses. The wrapping
	// error names the field, the value and what is allowed.
	ErrInvalidConfig = errors.New("gossip: invalid config")

	// ErrMetaTooLarge reports a Meta whose encoding exceeds MetaMaxSize, the
	// most memberlist carries for a node.
	ErrMetaTooLarge = errors.New("gossip: meta too large")

	// ErrBadMeta reports metadata that cannot be encoded (a string that is not
	// UTF-8) or bytes that do not decode as Meta.
	ErrBadMeta = errors.New("gossip: malformed meta")

	// ErrTimeout reports that a broadcast (leave or metadata update) was not
	// handed to any other member in time. The local state has changed anyway
	// and spreads with the next push/pull sync.
	ErrTimeout = errors.New("gossip: broadcast timed out")

	// ErrLeft reports a call that needs membership after Leave.
	ErrLeft = errors.New("gossip: left the cluster")

	// ErrClosed reports a call after Close.
	ErrClosed = errors.New("gossip: closed")
)
