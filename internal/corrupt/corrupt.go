// Package corrupt is Strata's one class of corruption: stored or received
// bytes that fail their checks (a CRC, a length, a magic, an order). Each
// package that checks bytes (record, hotlog, tiering, the broker's producer
// snapshots) marks its corruption errors with Mark, so a caller tells
// corruption from every other failure with one test, Is, whichever layer
// found it.
package corrupt

import "errors"

// ErrCorruption is the class every marked error belongs to:
// errors.Is(err, ErrCorruption) is the same test as Is(err).
var ErrCorruption = errors.New("corruption")

// Mark returns err marked as corruption. The marked error keeps err's
// message and wraps it, so errors.Is and errors.As still find err and what
// it wraps. Mark(nil) is nil.
func Mark(err error) error {
	if err == nil {
		return nil
	}
	return &markedError{err}
}

// Is reports whether err, or any error it wraps, was marked as corruption.
func Is(err error) bool { return errors.Is(err, ErrCorruption) }

// markedError adds the class to an error without changing its message.
type markedError struct{ err error }

func (e *markedError) Error() string { return e.err.Error() }

func (e *markedError) Unwrap() error { return e.err }

// Is makes errors.Is(e, ErrCorruption) hold.
func (e *markedError) Is(target error) bool { return target == ErrCorruption }
