package hotlog

import "sync"

// notifier wakes every goroutine waiting for the log to change, and calls
// the one-shot callbacks registered for the next change. A channel is made
// only when someone waits, so an append with no waiters costs one
// uncontended lock.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
	// after are the callbacks of the next broadcast (afterNext), each
	// called once, unless stopped before.
	after map[*func()]struct{}
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

// afterNext calls f once, at the next broadcast, on the goroutine that
// broadcasts: a watcher that waits without a goroutine of its own. The
// returned stop drops f if it has not been called yet, so that a watcher
// that gives up leaves nothing behind on a log that stays idle.
func (n *notifier) afterNext(f func()) (stop func()) {
	key := &f
	n.mu.Lock()
	if n.after == nil {
		n.after = map[*func()]struct{}{}
	}
	n.after[key] = struct{}{}
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		delete(n.after, key)
		n.mu.Unlock()
	}
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
	for f := range after {
		(*f)()
	}
}
