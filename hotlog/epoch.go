package hotlog

import (
	"sort"
	"sync"
)

// EpochEntry says that leader epoch Epoch wrote its first batch at
// StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// UndefinedEpoch and UndefinedOffset are EndOffsetForEpoch's answer when the
// log knows nothing about the epoch asked for.
const (
	UndefinedEpoch  int32 = -1
	UndefinedOffset int64 = -1
)

// epochCache is the leader-epoch history of a log: entries with growing
// epochs and non-decreasing start offsets. A follower asks the leader for the
// end offset of its own latest epoch and truncates there, so a suffix written
// under a deposed leader cannot survive.
type epochCache struct {
	mu      sync.Mutex
	entries []EpochEntry
}

// assign records that epoch starts at offset if epoch is newer than the latest
// entry; it reports whether the cache changed. An older epoch is refused.
func (c *epochCache) assign(epoch int32, offset int64) (changed bool, stale bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		if epoch < last.Epoch {
			return false, true
		}
		if epoch == last.Epoch {
			return false, false
		}
	}
	c.entries = append(c.entries, EpochEntry{Epoch: epoch, StartOffset: offset})
	return true, false
}

// latest returns the newest epoch, or UndefinedEpoch.
func (c *epochCache) latest() int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) == 0 {
		return UndefinedEpoch
	}
	return c.entries[len(c.entries)-1].Epoch
}

// endOffsetFor answers a follower whose latest epoch is epoch, as Kafka's
// OffsetsForLeaderEpoch does: the largest epoch <= epoch that this log knows,
// and the offset where it ended (the start of the next epoch, or leo for the
// latest). An epoch older than all known ones gets itself and the start of
// the first known epoch; an epoch newer than all known ones gets
// (UndefinedEpoch, UndefinedOffset).
func (c *epochCache) endOffsetFor(epoch int32, leo int64) (int32, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	if epoch == UndefinedEpoch || n == 0 {
		return UndefinedEpoch, UndefinedOffset
	}
	if c.entries[n-1].Epoch == epoch {
		return epoch, leo
	}
	// higher is the first entry with an epoch above the one asked for.
	higher := sort.Search(n, func(i int) bool { return c.entries[i].Epoch > epoch })
	switch {
	case higher == n:
		return UndefinedEpoch, UndefinedOffset
	case higher == 0:
		return epoch, c.entries[0].StartOffset
	}
	return c.entries[higher-1].Epoch, c.entries[higher].StartOffset
}

// truncateFrom removes the entries that start at or after offset: the log is
// being cut there.
func (c *epochCache) truncateFrom(offset int64) (changed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= offset {
		n--
	}
	changed = n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// snapshot returns a copy of the entries.
func (c *epochCache) snapshot() []EpochEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]EpochEntry(nil), c.entries...)
}

func (c *epochCache) replace(entries []EpochEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = entries
}
