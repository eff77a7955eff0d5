package objstore

import (
	"context"
	"fmt"
)

// writeState is the life cycle the Writers here share: open until Close
// commits the object or Abort (or the end of the Create context) discards
// it. A Writer is used by one goroutine at a time, like any io.Writer, so
// the state needs no lock.
type writeState int

const (
	writeOpen writeState = iota
	writeClosed
	writeAborted
)

// usable returns nil if a Write or Close may proceed in state s, and
// otherwise the error to return. A context that has ended counts as an
// abort; the caller then discards what it holds.
func (s writeState) usable(ctx context.Context, op, key string) error {
	switch s {
	case writeClosed:
		return fmt.Errorf("objstore: %s %q: writer already closed", op, key)
	case writeAborted:
		return fmt.Errorf("objstore: %s %q: %w", op, key, ErrAborted)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: %s %q: %w: %w", op, key, ErrAborted, err)
	}
	return nil
}

// ctxErr returns a wrapped error if ctx has ended, so that every operation
// fails fast on a cancelled context even when the store itself would not
// block (memory, a local directory).
func ctxErr(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("objstore: %s %q: %w", op, key, err)
	}
	return nil
}
