package broker

// Read-only views of a broker's own settings and of a partition's
// idempotent producers, for front ends that show them (Kafka's
// DescribeConfigs and DescribeProducers).

import (
	"syscall"

	"github.com/strata-log/strata/config"
)

// Settings returns the settings the broker started with (read once at
// start; Reload changes only the live ones, which this does not show).
func (b *Broker) Settings() config.Broker { return b.cfg }

// TopicDefaults returns the settings a topic has where it overrides
// nothing: the built-in defaults under the broker's topic_defaults.
func (b *Broker) TopicDefaults() config.Topic { return b.defaults }

// ProducerView is one idempotent producer a partition remembers.
type ProducerView struct {
	ID    int64
	Epoch int16
	// LastSequence is the last sequence number of its latest batch.
	LastSequence int32
	// LastOffset is the offset of the last record of its latest batch.
	LastOffset int64
	// LastTimestamp is the latest batch's log-append time, -1 under
	// CreateTime (the state keeps no producer timestamps).
	LastTimestamp int64
}

// Producers lists the idempotent producers a partition this broker leads
// remembers (producers.go), most recently seen first; the leader's errors
// (NOT_LEADER, TOPIC_NOT_FOUND, ...) otherwise.
func (b *Broker) Producers(topic string, partition int32) ([]ProducerView, error) {
	p, err := b.leaderPartition(topic, partition)
	if err != nil {
		return nil, err
	}
	s := p.producers
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ensureBuiltLocked(p.log); err != nil {
		return nil, refuse(ReasonStorageError, err, "%s/%d: reading its producer state: %v", topic, partition, err)
	}
	out := make([]ProducerView, 0, len(s.mu.producers))
	for el := s.mu.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*producerEntry)
		v := ProducerView{ID: e.id, Epoch: e.epoch, LastSequence: -1, LastOffset: -1, LastTimestamp: -1}
		if e.n > 0 {
			last := e.last()
			v.LastSequence, v.LastOffset, v.LastTimestamp = last.lastSeq, last.lastOffset, last.logAppendTime
		}
		out = append(out, v)
	}
	return out, nil
}

// DataDirSpace returns the size of the file system holding the data dir
// and the space on it available to the broker (what it checks produce
// against: WithFreeSpace's function where a test sets one).
func (b *Broker) DataDirSpace() (total, usable int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(b.cfg.DataDir, &st); err != nil {
		return 0, 0, err
	}
	usable, err = b.freeSpace(b.cfg.DataDir)
	return int64(st.Blocks) * st.Bsize, usable, err
}
