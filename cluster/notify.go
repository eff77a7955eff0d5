package cluster

import "sync"

// notifier hands out a channel that is closed at the next broadcast, the
// way a reader waits for "anything changed" without polling. A channel is
// made only when someone asks, so a change nobody waits for costs one
// uncontended lock.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
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

// broadcast wakes everyone who called wait since the last broadcast.
func (n *notifier) broadcast() {
	n.mu.Lock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
	n.mu.Unlock()
}
