package broker

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
)

// reconcileLoop applies every metadata change to the local partitions.
func (b *Broker) reconcileLoop(ctx context.Context) {
	for {
		changed := b.meta.Changed()
		if err := b.reconcile(); err != nil {
			b.log.Error("applying cluster metadata failed", "err", err)
		}
		select {
		case <-ctx.Done():
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

// reconcileWorkers bounds the replicas opened (and recovered), updated or
// deleted at once: the work is mostly waiting on the disk (reads of the
// tail, fsyncs of checkpoints), so more than the cores, but not so many
// that a start of thousands of replicas floods the disk queue.
const reconcileWorkers = 16

// reconcile opens the replicas the metadata assigns to this broker, updates
// the role and settings of those it has, and closes and deletes those it no
// longer holds (their topic was deleted).
//
// Every produce and fetch takes the broker lock to find its partition, so
// reconcile holds it only to read and change the map: the slow parts
// (opening a log, which may recover its tail; writing an epoch checkpoint;
// closing and removing a deleted replica's files) run outside it, several
// at once. A replica is in the map only once it is open, so a request
// meanwhile finds either no replica (a retriable refusal) or an open one.
// reconcileMu keeps rounds apart: the Start round, then the loop's.
func (b *Broker) reconcile() error {
	b.reconcileMu.Lock()
	defer b.reconcileMu.Unlock()
	m := b.meta.Metadata()
	b.mu.RLock()
	closed, reconciled := b.mu.closed, b.mu.reconciled
	b.mu.RUnlock()
	if closed || m.Version <= reconciled && reconciled != 0 {
		return nil
	}
	if reconciled != 0 {
		// Leader and ISR changes (most changes, thousands of them while
		// a broker restarts) and offset commits (which change no topic)
		// touch no other replica: apply them to those they name.
		if ch := b.meta.ChangesSince(reconciled, m.Version); !ch.All {
			if done, err := b.reconcileSome(m, ch.Partitions); done {
				return err
			}
		}
	}
	return b.reconcileAll(m)
}

// reconcileAll compares every partition of the metadata with the replicas
// this broker holds: opens, updates and drops.
func (b *Broker) reconcileAll(m *cluster.Metadata) error {

	type opening struct {
		tp   cluster.TopicPartition
		spec replicaSpec
		p    *partition
		err  error
	}
	type update struct {
		p    *partition
		info cluster.PartitionInfo
		cfg  config.Topic
		err  error
	}
	var (
		opens   []*opening
		updates []*update
		drops   []*partition
	)
	kickTier := false
	b.mu.Lock()
	if b.mu.closed || m.Version <= b.mu.reconciled && b.mu.reconciled != 0 {
		b.mu.Unlock()
		return nil
	}
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
				// An old topic of the same name: out of the map now, its
				// files (in a directory named by its own topic id) go below.
				delete(b.mu.partitions, tp)
				b.house.remove(p)
				drops = append(drops, p)
				ok = false
			}
			if !ok {
				opens = append(opens, &opening{tp: tp, spec: replicaSpec{
					dir: b.partitionDir(t, info.Partition), topic: name, topicID: t.ID, partition: info.Partition,
					self: b.id, cfg: cfg, info: info, lagMax: time.Duration(b.cfg.Replica.LagTimeMax), logger: b.log,
					files: b.limits.segmentFileCache(), brokerAddr: b.leaderAddr, house: b.house,
				}})
				continue
			}
			if p.reflects(info, cfg) {
				continue
			}
			if *p.cfg.Load() != cfg && p.isLeader() {
				kickTier = true // its leader writes the settings to the bucket
			}
			updates = append(updates, &update{p: p, info: info, cfg: cfg})
		}
	}
	for tp, p := range b.mu.partitions {
		if !keep[tp] {
			delete(b.mu.partitions, tp)
			b.house.remove(p)
			drops = append(drops, p)
		}
	}
	b.mu.Unlock()

	// Deleted replicas first: a replica of the same directory assigned
	// again later is opened only after its old files are gone.
	inParallel(len(drops), func(i int) { b.drop(drops[i]) })
	inParallel(len(opens), func(i int) {
		o := opens[i]
		if b.beforeOpen != nil {
			b.beforeOpen(o.tp.Topic, o.tp.Partition)
		}
		o.p, o.err = openPartition(o.spec)
	})
	inParallel(len(updates), func(i int) {
		u := updates[i]
		if b.beforeUpdate != nil {
			b.beforeUpdate(u.p.topic, u.p.id)
		}
		u.err = u.p.setState(u.info, u.cfg)
	})

	var firstErr error
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, o := range opens {
		if o.err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("open %s/%d: %w", o.tp.Topic, o.tp.Partition, o.err)
			}
			continue
		}
		if b.mu.closed {
			// Close ran meanwhile (it waits for the loop, not for the
			// round Start runs): the replica was never served.
			if err := o.p.close(); err != nil {
				b.log.Warn("closing a partition opened while the broker closed", "partition", o.p.name(), "err", err)
			}
			continue
		}
		b.mu.partitions[o.tp] = o.p
		b.house.add(o.p)
		if o.p.isLeader() {
			kickTier = true // it takes its cold tier over at once
		}
		if r := o.p.log.Recovery(); r.TruncatedBytes > 0 {
			b.log.Warn("partition recovered a torn tail", "partition", o.p.name(), "truncated_bytes", r.TruncatedBytes, "reason", r.TruncateReason)
		}
	}
	for _, u := range updates {
		if u.err != nil && firstErr == nil {
			firstErr = fmt.Errorf("update %s: %w", u.p.name(), u.err)
		}
	}
	if b.mu.closed {
		return firstErr
	}
	b.followLocked(m)
	if kickTier {
		select {
		case b.tierKick <- struct{}{}:
		default:
		}
	}
	if firstErr == nil {
		b.reconciledLocked(m.Version)
	}
	b.metrics.reconcileAll.Add(1)
	return firstErr
}

// reconciledLocked records that the replicas reflect version and wakes
// those waiting for it.
func (b *Broker) reconciledLocked(version uint64) {
	b.mu.reconciled = version
	close(b.reconciledCh)
	b.reconciledCh = make(chan struct{})
}

// reconcileSome applies the metadata to the replicas of tps, partitions
// whose leader or ISR changed since the last round (their replicas did
// not: nothing opens or closes), and points the fetchers at their
// leaders. It reports false, having changed nothing, when a partition
// does not match what this broker holds (a replica it lacks, of another
// topic id): the full round sorts that out.
func (b *Broker) reconcileSome(m *cluster.Metadata, tps []cluster.TopicPartition) (bool, error) {
	type update struct {
		p    *partition
		info cluster.PartitionInfo
		err  error
	}
	var updates []*update
	touched := make([]*partition, 0, len(tps))
	b.mu.RLock()
	for _, tp := range tps {
		info, ok := m.Partition(tp.Topic, tp.Partition)
		held := ok && slices.Contains(info.Replicas, b.id)
		p, have := b.mu.partitions[tp]
		switch {
		case !held && !have:
			continue // another broker's
		case held != have:
			b.mu.RUnlock()
			return false, nil
		}
		if t, _ := m.Topic(tp.Topic); p.topicID != t.ID {
			b.mu.RUnlock()
			return false, nil
		}
		touched = append(touched, p)
		if !p.reflects(info, *p.cfg.Load()) {
			updates = append(updates, &update{p: p, info: info})
		}
	}
	b.mu.RUnlock()

	inParallel(len(updates), func(i int) {
		u := updates[i]
		if b.beforeUpdate != nil {
			b.beforeUpdate(u.p.topic, u.p.id)
		}
		u.err = u.p.setState(u.info, *u.p.cfg.Load())
	})
	var firstErr error
	kickTier := false
	for _, u := range updates {
		if u.err != nil && firstErr == nil {
			firstErr = fmt.Errorf("update %s: %w", u.p.name(), u.err)
		}
		if u.p.isLeader() {
			kickTier = true // a new leader takes its cold tier over
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.closed {
		return true, firstErr
	}
	b.fetchers.retarget(b.followTargets(m, touched))
	if kickTier {
		select {
		case b.tierKick <- struct{}{}:
		default:
		}
	}
	if firstErr == nil {
		b.reconciledLocked(m.Version)
	}
	b.metrics.reconcileChanged.Add(1)
	return true, firstErr
}

// WithBeforeOpen calls hook before the broker opens a partition replica's
// log, on the goroutine that opens it: a seam for tests that hold an open
// (a recovery of a long tail) to check what the broker serves meanwhile.
func WithBeforeOpen(hook func(topic string, partition int32)) Option {
	return func(b *Broker) { b.beforeOpen = hook }
}

// WithBeforeUpdate calls hook before the broker applies a metadata change
// to an open replica: a seam for tests that count which replicas a change
// made the broker visit.
func WithBeforeUpdate(hook func(topic string, partition int32)) Option {
	return func(b *Broker) { b.beforeUpdate = hook }
}

// inParallel calls do(0) … do(n-1) on up to reconcileWorkers goroutines
// and returns when all have returned.
func inParallel(n int, do func(i int)) {
	workers := min(n, reconcileWorkers)
	if workers <= 1 {
		for i := range n {
			do(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				do(i)
			}
		})
	}
	wg.Wait()
}

// followLocked points the fetchers at the leader of every partition this
// broker follows.
func (b *Broker) followLocked(m *cluster.Metadata) {
	targets := map[cluster.TopicPartition]followTarget{}
	for tp, t := range b.followTargets(m, slices.Collect(maps.Values(b.mu.partitions))) {
		if t.leader != cluster.NoLeader {
			targets[tp] = t
		}
	}
	b.fetchers.update(targets)
}

// followTargets says, for each of ps, whom it follows: a target with
// leader NoLeader for one it does not follow (it leads, has no leader, or
// the leader's address is unknown).
func (b *Broker) followTargets(m *cluster.Metadata, ps []*partition) map[cluster.TopicPartition]followTarget {
	targets := make(map[cluster.TopicPartition]followTarget, len(ps))
	for _, p := range ps {
		tp := cluster.TopicPartition{Topic: p.topic, Partition: p.id}
		st := p.view.Load()
		info, ok := m.Broker(st.Leader)
		if !follows(*st, b.id) || !ok {
			targets[tp] = followTarget{p: p, leader: cluster.NoLeader}
			continue
		}
		targets[tp] = followTarget{p: p, leader: st.Leader, addr: info.Addr, epoch: st.LeaderEpoch}
	}
	return targets
}

// follows reports whether broker self follows a leader of a partition in
// the state view: it is not the leader, and there is one.
func follows(view cluster.PartitionInfo, self int32) bool {
	return view.Leader != self && view.Leader != cluster.NoLeader
}

// drop closes a replica this broker no longer holds, already out of the
// partition map, and deletes its data: its topic is gone from the cluster.
func (b *Broker) drop(p *partition) {
	if err := p.close(); err != nil {
		b.log.Warn("closing a deleted partition", "partition", p.name(), "err", err)
	}
	if err := os.RemoveAll(p.dir); err != nil {
		b.log.Warn("removing a deleted partition", "partition", p.name(), "err", err)
	}
	os.Remove(filepath.Dir(p.dir)) // the topic dir, once its last partition is gone
}
