package testutil

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeT records a failure instead of ending the test, so the failing path
// of Eventually can be checked.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	panic(f)
}

// run calls fn with a fakeT and returns the failure message, if any.
func run(fn func(t testing.TB)) (failed string) {
	ft := &fakeT{}
	defer func() {
		if r := recover(); r != nil && r != ft {
			panic(r)
		}
		failed = ft.failed
	}()
	fn(ft)
	return ""
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	msg := run(func(t testing.TB) {
		Eventually(t, 10*time.Second, "three checks", func() error {
			if n.Add(1) < 3 {
				return errors.New("not yet")
			}
			return nil
		})
	})
	if msg != "" || n.Load() != 3 {
		t.Fatalf("failed %q after %d checks; want success after 3", msg, n.Load())
	}
}

func TestEventuallyFailsWithTheMessageAndLastState(t *testing.T) {
	var n atomic.Int32
	msg := run(func(t testing.TB) {
		Eventually(t, 30*time.Millisecond, "the moon", func() error {
			return fmt.Errorf("check %d", n.Add(1))
		})
	})
	last := fmt.Sprintf("check %d", n.Load())
	if !strings.Contains(msg, "the moon") || !strings.HasSuffix(msg, last) {
		t.Fatalf("failure %q; want it to name the moon and end with the last state %q", msg, last)
	}
}

func TestWaitForFailsWithTheMessage(t *testing.T) {
	msg := run(func(t testing.TB) {
		WaitFor(t, 10*time.Millisecond, "never", func() bool { return false })
	})
	if !strings.Contains(msg, "never") {
		t.Fatalf("failure %q; want it to name what was awaited", msg)
	}
}
