package cluster

import "sync"

// changeLogSize is how many topic changes the change log remembers. A
// reader further behind than that compares everything, as it would
// without the log.
const changeLogSize = 8192

// Changes is what changed in the topics between two metadata versions.
type Changes struct {
	// All says to compare every topic: a command in between did more
	// than change one partition's leader or ISR (a topic was created,
	// deleted, reconfigured or grew, a broker registered, a snapshot
	// replaced the state), or the log no longer reaches back that far.
	All bool
	// Partitions are the partitions a leader or ISR change touched, each
	// once, when All is false. A partition's replicas never change this
	// way: the set of replicas a broker holds stays the same.
	Partitions []TopicPartition
}

// changeLog remembers which partitions each recent version changed, so
// that a broker that applied version v applies only what changed since
// (Node.ChangesSince) instead of comparing every partition it holds:
// during a restart of a broker of thousands of replicas, the others
// shrink and expand thousands of ISRs, one command each.
type changeLog struct {
	mu sync.Mutex
	// from: the log holds every topic change of a version above from.
	from    uint64
	entries []changeEntry // by version, ascending
}

type changeEntry struct {
	version uint64
	// all: more than one partition's leader or ISR changed (tp unused).
	all bool
	tp  TopicPartition
}

// record notes the topic change of version; the FSM records it before
// it publishes the version, so a reader of a Metadata finds its changes.
func (l *changeLog) record(e changeEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, e)
	if len(l.entries) > changeLogSize {
		drop := len(l.entries) - changeLogSize/2
		l.from = l.entries[drop-1].version
		l.entries = append(l.entries[:0], l.entries[drop:]...)
	}
}

// reset forgets every change: the state was replaced at version (a
// snapshot restore).
func (l *changeLog) reset(version uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.from, l.entries = version, nil
}

// since is what changed in versions above from, up to and including to.
func (l *changeLog) since(from, to uint64) Changes {
	l.mu.Lock()
	defer l.mu.Unlock()
	if from < l.from {
		return Changes{All: true}
	}
	var out Changes
	seen := map[TopicPartition]bool{}
	for i := len(l.entries) - 1; i >= 0 && l.entries[i].version > from; i-- {
		e := l.entries[i]
		if e.version > to {
			continue
		}
		if e.all {
			return Changes{All: true}
		}
		if !seen[e.tp] {
			seen[e.tp] = true
			out.Partitions = append(out.Partitions, e.tp)
		}
	}
	return out
}
