// Command strata is Strata's one binary: `strata serve` runs a broker, and
// every other command is a client of one (topics, produce, consume, bench),
// but `strata bucket`, which reads a broker's object store itself.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strata:", err)
		os.Exit(exitCode(err))
	}
}

// exitError is an error that asks for an exit status other than 1, for
// commands whose status tells more than failure (strata bucket verify: 1
// the bucket has problems, 2 it could not be checked).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode is the status main exits with after err: the one an exitError
// asks for, else 1.
func exitCode(err error) int {
	if e, ok := errors.AsType[*exitError](err); ok {
		return e.code
	}
	return 1
}
