package cluster

import (
	"fmt"
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

// has reports whether a group has committed offsets.
func (t *offsetTable) has(group string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, ok := t.groups[group]
	return ok
}

// count returns the number of groups with committed offsets.
func (t *offsetTable) count() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.groups)
}

// TooManyGroupsError refuses an offset commit that would create a consumer
// group when Max groups exist already (CommitOffsets with WithMaxGroups).
// It matches ErrInvalidOffsetCommit with errors.Is. Groups go away only with
// the topics they committed offsets for.
type TooManyGroupsError struct {
	Group  string // the group the commit would have created
	Groups int    // groups that exist
	Max    int    // the bound
}

func (e *TooManyGroupsError) Error() string {
	return fmt.Sprintf("%v: group %q would be a new consumer group, and %d exist already; at most %d are allowed",
		ErrInvalidOffsetCommit, e.Group, e.Groups, e.Max)
}

// Is makes errors.Is(err, ErrInvalidOffsetCommit) true.
func (e *TooManyGroupsError) Is(target error) bool { return target == ErrInvalidOffsetCommit }

// CommitOption adjusts one CommitOffsets call.
type CommitOption func(*commitOptions)

type commitOptions struct {
	maxGroups int
}

// WithMaxGroups refuses a commit that would create a group when max groups
// exist already (a *TooManyGroupsError); max <= 0 means no bound. The
// proposer checks it against the state it sees, so commits of new groups
// racing each other on one controller may pass it together and exceed the
// bound by a few.
func WithMaxGroups(max int) CommitOption {
	return func(o *commitOptions) { o.maxGroups = max }
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
