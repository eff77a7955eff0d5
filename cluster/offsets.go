package cluster

import (
	"maps"
	"sync"
)

// groupOffsets is one consumer group's committed positions. A value is
// immutable once installed in an offsetTable: a commit builds a new map, so
// a reader or a snapshot holding the old one is never disturbed.
type groupOffsets map[TopicPartition]OffsetCommit

// offsetTable holds the committed offsets of every group. The state machine
// goroutine is its only writer and reads it without locking; other readers
// take mu. Offsets are kept out of Metadata so that an offset commit, the
// most frequent command, copies one group's map rather than anything that
// grows with the number of groups.
type offsetTable struct {
	mu     sync.RWMutex
	groups map[string]groupOffsets // guarded by mu for writes and non-FSM readers
}

// get returns one committed offset.
func (t *offsetTable) get(group string, tp TopicPartition) (OffsetCommit, bool) {
	t.mu.RLock()
	g := t.groups[group]
	t.mu.RUnlock()
	oc, ok := g[tp]
	return oc, ok
}

// group returns one group's offsets; the map is shared and read-only.
func (t *offsetTable) group(group string) groupOffsets {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.groups[group]
}

// snapshot returns a shallow copy of the table: the group maps are shared,
// which is safe because they are never modified. FSM goroutine only.
func (t *offsetTable) snapshot() map[string]groupOffsets {
	return maps.Clone(t.groups)
}

// install replaces the groups in changes; a nil or empty map removes the
// group. FSM goroutine only.
func (t *offsetTable) install(changes map[string]groupOffsets) {
	if len(changes) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.groups == nil {
		t.groups = make(map[string]groupOffsets)
	}
	for g, offs := range changes {
		if len(offs) == 0 {
			delete(t.groups, g)
		} else {
			t.groups[g] = offs
		}
	}
}

// replace swaps in a whole new table (snapshot restore). FSM goroutine only.
func (t *offsetTable) replace(groups map[string]groupOffsets) {
	t.mu.Lock()
	t.groups = groups
	t.mu.Unlock()
}
