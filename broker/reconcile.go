package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/strata-log/strata/cluster"
)

// reconcileLoop applies every metadata change to the local partitions.
func (b *Broker) reconcileLoop() {
	for {
		changed := b.meta.Changed()
		if err := b.reconcile(); err != nil {
			b.log.Error("applying cluster metadata failed", "err", err)
		}
		select {
		case <-b.stop:
			return
		case <-changed:
		}
	}
}

// partitionDir is where a replica's log lives: the topic id in the name keeps
// a topic deleted and created again apart from its predecessor.
func (b *Broker) partitionDir(t *cluster.TopicInfo, p int32) string {
	return filepath.Join(b.logsDir, t.Name+"-"+t.ID, strconv.Itoa(int(p)))
}

// reconcile opens the replicas the metadata assigns to this broker, updates
// the role and settings of those it has, and closes and deletes those it no
// longer holds (their topic was deleted).
func (b *Broker) reconcile() error {
	m := b.meta.Metadata()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.closed || m.Version <= b.mu.reconciled && b.mu.reconciled != 0 {
		return nil
	}
	var firstErr error
	kickTier := false
	keep := map[cluster.TopicPartition]bool{}
	for _, name := range m.TopicNames() {
		t, _ := m.Topic(name)
		cfg, err := b.defaults.With(t.Config)
		if err != nil {
			// The controller validated it against its defaults; this broker's
			// differ. Serve with its own defaults rather than not at all.
			b.log.Warn("topic settings invalid on this broker; using its defaults", "topic", name, "err", err)
			cfg = b.defaults
		}
		for _, info := range t.Partitions {
			if !slices.Contains(info.Replicas, b.id) {
				continue
			}
			tp := cluster.TopicPartition{Topic: name, Partition: info.Partition}
			keep[tp] = true
			p, ok := b.mu.partitions[tp]
			if ok && p.topicID != t.ID {
				b.dropLocked(tp, p) // an old topic of the same name
				ok = false
			}
			if !ok {
				p, err = openPartition(replicaSpec{
					dir: b.partitionDir(t, info.Partition), topic: name, topicID: t.ID, partition: info.Partition,
					self: b.id, cfg: cfg, info: info, lagMax: time.Duration(b.cfg.Replica.LagTimeMax), logger: b.log,
					files: b.limits.segmentFileCache(),
				})
				if err != nil {
					if firstErr == nil {
						firstErr = fmt.Errorf("open %s/%d: %w", name, info.Partition, err)
					}
					continue
				}
				b.mu.partitions[tp] = p
				if p.isLeader() {
					kickTier = true // it takes its cold tier over at once
				}
				if r := p.log.Recovery(); r.TruncatedBytes > 0 {
					b.log.Warn("partition recovered a torn tail", "partition", p.name(), "truncated_bytes", r.TruncatedBytes, "reason", r.TruncateReason)
				}
				continue
			}
			if *p.cfg.Load() != cfg && p.isLeader() {
				kickTier = true // its leader writes the settings to the bucket
			}
			if err := p.setState(info, cfg); err != nil && firstErr == nil {
				firstErr = fmt.Errorf("update %s: %w", p.name(), err)
			}
		}
	}
	for tp, p := range b.mu.partitions {
		if !keep[tp] {
			b.dropLocked(tp, p)
		}
	}
	b.followLocked(m)
	if kickTier {
		select {
		case b.tierKick <- struct{}{}:
		default:
		}
	}
	if firstErr == nil {
		b.mu.reconciled = m.Version
		close(b.reconciledCh)
		b.reconciledCh = make(chan struct{})
	}
	return firstErr
}

// followLocked points the fetchers at the leader of every partition this
// broker follows.
func (b *Broker) followLocked(m *cluster.Metadata) {
	targets := map[cluster.TopicPartition]followTarget{}
	for tp, p := range b.mu.partitions {
		st := p.view.Load()
		if !follows(*st, b.id) {
			continue
		}
		info, ok := m.Broker(st.Leader)
		if !ok {
			continue
		}
		targets[tp] = followTarget{p: p, leader: st.Leader, addr: info.Addr, epoch: st.LeaderEpoch}
	}
	b.fetchers.update(targets)
}

// follows reports whether broker self follows a leader of a partition in
// the state view: it is not the leader, and there is one.
func follows(view cluster.PartitionInfo, self int32) bool {
	return view.Leader != self && view.Leader != cluster.NoLeader
}

// dropLocked closes a replica this broker no longer holds and deletes its
// data: its topic is gone from the cluster.
func (b *Broker) dropLocked(tp cluster.TopicPartition, p *partition) {
	delete(b.mu.partitions, tp)
	if err := p.close(); err != nil {
		b.log.Warn("closing a deleted partition", "partition", p.name(), "err", err)
	}
	if err := os.RemoveAll(p.dir); err != nil {
		b.log.Warn("removing a deleted partition", "partition", p.name(), "err", err)
	}
	os.Remove(filepath.Dir(p.dir)) // the topic dir, once its last partition is gone
}
