package hotlog

import "sync"

// notifier wakes every goroutine waiting for the log to change. A channel is
// made only when someone waits, so an append with no waiters costs one
// uncontended lock.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
	// after are called once, at the next broadcast (afterNext).
	after []func()
}

// afterNext calls f once, at the next broadcast, on the goroutine that
// broadcasts: a watcher that waits without a goroutine of its own.
func (n *notifier) afterNext(f func()) {
	n.mu.Lock()
	n.after = append(n.after, f)
	n.mu.Unlock()
}

// wait returns a channel that is closed at the next broadcast.
func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) broadcast() {
	n.mu.Lock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	after := n.after
	n.after = nil
	n.mu.Unlock()
	for _, f := range after {
		f()
	}
}
