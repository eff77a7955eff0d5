// Package testutil holds the helpers Strata's tests share: waiting for a
// condition with a deadline, and building record batches. It imports no
// Strata package but record, so the tests of every package above record
// may use it without an import cycle.
package testutil

import (
	"fmt"
	"testing"
	"time"
)

// firstPoll and maxPoll bound the polling interval: a condition that holds
// almost at once is seen within a millisecond, and one that takes seconds
// costs at most one check per maxPoll.
const (
	firstPoll = time.Millisecond
	maxPoll   = 20 * time.Millisecond
)

// Eventually polls check until it returns nil, doubling the interval from
// firstPoll up to maxPoll. If within passes first, it fails t with what
// and the last error check returned, which should describe the state seen.
func Eventually(t testing.TB, within time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	wait := firstPoll
	for {
		err := check()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", within, what, err)
		}
		time.Sleep(min(wait, time.Until(deadline)+time.Millisecond))
		wait = min(2*wait, maxPoll)
	}
}

// WaitFor is Eventually for a condition that has no state to report.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, within, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

var errNotYet = fmt.Errorf("condition still false")
