package broker

// The cluster's health as one broker reports it. Every broker has the whole
// metadata, so any one could count every partition; then a sum over the
// brokers in a dashboard would count each partition once per broker. So
// each figure has one reporter:
//
//   - under-replicated partitions (a leader, and an ISR smaller than the
//     replicas): the broker the metadata names as the leader. Summed over
//     the brokers, each partition counts once.
//   - offline partitions (no leader): the controller alone, as nobody leads
//     them; every other broker reports 0.
//   - replication lag, consumer group lag: the leader, which alone knows
//     its followers' positions and its high watermark.
//
// A partition whose leader just died counts nowhere until the controller
// moves its leadership (a few seconds: the gossip failure detection).

import (
	"context"
	"slices"
	"sort"
	"strconv"

	"github.com/strata-log/strata/cluster"
)

// underReplicated reports whether a partition has a leader and fewer
// in-sync replicas than replicas.
func underReplicated(info cluster.PartitionInfo) bool {
	return info.Leader != cluster.NoLeader && len(info.ISR) < len(info.Replicas)
}

// offline reports whether a partition has no leader: nobody can write or
// read its hot tier until an in-sync replica returns.
func offline(info cluster.PartitionInfo) bool { return info.Leader == cluster.NoLeader }

func (b *Broker) writeClusterMetrics(mw *metricsWriter, parts []*partition) {
	md := b.meta.Metadata()
	controller := b.meta.IsController()
	var urp, off, total int64
	for _, name := range md.TopicNames() {
		t, _ := md.Topic(name)
		for _, info := range t.Partitions {
			total++
			if info.Leader == b.id && underReplicated(info) {
				urp++
			}
			if controller && offline(info) {
				off++
			}
		}
	}
	mw.gauge("strata_controller_active", "1 on the broker that is the controller (leads the metadata group), else 0.", boolInt(controller))
	mw.gauge("strata_metadata_version", "Raft index of the last metadata change this broker applied.", int64(md.Version))
	mw.gauge("strata_brokers_registered", "Brokers registered in the cluster metadata.", int64(len(md.Brokers)))
	mw.gauge("strata_cluster_partitions", "Partitions of all topics in the cluster metadata.", total)
	mw.gauge("strata_under_replicated_partitions", "Partitions this broker leads whose ISR is smaller than their replicas.", urp)
	mw.gauge("strata_offline_partitions", "Partitions without a leader; reported by the controller only (0 elsewhere).", off)
	mw.counter("strata_leader_elections_total", "Partition leaders this broker elected as controller after a leader was lost.", b.metrics.leaderElections.Load())
	mw.counter("strata_isr_shrinks_total", "ISR changes that removed replicas, on partitions this broker leads.", b.metrics.isrShrinks.Load())
	mw.counter("strata_isr_expands_total", "ISR changes that added replicas, on partitions this broker leads.", b.metrics.isrExpands.Load())
	mw.counter("strata_reconcile_full_rounds_total", "Rounds applying the cluster metadata that compared every partition with the replicas this broker holds (a topic created, deleted, altered or grown, a broker registered, a start).", b.metrics.reconcileAll.Load())
	mw.counter("strata_reconcile_partial_rounds_total", "Rounds applying the cluster metadata that visited only the partitions whose leader or ISR changed, or none (offset commits).", b.metrics.reconcileChanged.Load())
	mw.counter("strata_produce_sequence_waits_total", "Batches of idempotent producers that reached this leader before batches sent ahead of them, and waited for them (at most 1 s) instead of being refused as out of order.", b.metrics.sequenceWaits.Load())

	mw.family("strata_replication_lag_records", "gauge", "Records a follower lacks: the leader's log end minus the follower's acknowledged one, by partition this broker leads. A follower that has not reported in the leader's epoch has no series.")
	for _, p := range parts {
		for _, f := range p.followerLags() {
			mw.sample("strata_replication_lag_records", labels("topic", p.topic, "partition", strconv.Itoa(int(p.id)), "follower", strconv.Itoa(int(f.id))), float64(f.lag))
		}
	}
	b.writeGroupLag(mw, parts)
	b.writeGroupMembers(mw, controller)

	rs := b.meta.RaftStats()
	mw.family("strata_raft_state", "gauge", "1 for this broker's state in the metadata Raft group, 0 for the others.")
	for _, s := range []string{"leader", "follower", "candidate", "shutdown"} {
		mw.sample("strata_raft_state", labels("state", s), float64(boolInt(rs.State == s)))
	}
	mw.gauge("strata_raft_term", "Current term of the metadata Raft group.", int64(rs.Term))
	mw.gauge("strata_raft_last_index", "Last entry in this broker's metadata Raft log.", int64(rs.LastIndex))
	mw.gauge("strata_raft_commit_index", "Last metadata Raft entry known to be committed.", int64(rs.CommitIndex))
	mw.gauge("strata_raft_applied_index", "Last metadata Raft entry applied to this broker's state machine.", int64(rs.AppliedIndex))

	// memberlist reports neither suspects nor, once they are gone, the
	// dead: gossip.Members is the alive ones. Registered brokers that are
	// not alive are strata_brokers_registered minus this. With TLS only
	// members that proved the broker id they claim count as alive
	// (claims.go); the others are "unproven".
	live, all := len(b.liveMembers()), len(b.gossip.Members())
	mw.family("strata_gossip_members", "gauge", "Brokers gossip shows, by state (memberlist exposes only the alive ones; with TLS, alive counts only members that proved the broker id they claim).")
	mw.sample("strata_gossip_members", labels("state", "alive"), float64(live))
	mw.sample("strata_gossip_members", labels("state", "unproven"), float64(max(all-live, 0)))
	mw.counter("strata_gossip_claims_refused_total", "Refusals this broker logged of gossip members that did not prove the broker id they claim.", b.metrics.claimsRefused.Load())
}

// writeGroupLag writes, for each partition this broker leads, how far the
// consumer groups that committed an offset there are behind its high
// watermark: the worst group and the sum over groups by partition, and
// each group's lag summed over the partitions of a topic this broker leads
// (a sum over brokers is the group's lag on the topic). Group names are
// the clients' to choose, so they are a label only there, where their
// number is bounded by limits.max_groups (unless set to 0), not on every
// partition.
func (b *Broker) writeGroupLag(mw *metricsWriter, parts []*partition) {
	led := map[cluster.TopicPartition]*partition{}
	for _, p := range parts {
		if p.isLeader() {
			led[cluster.TopicPartition{Topic: p.topic, Partition: p.id}] = p
		}
	}
	hw := func(tp cluster.TopicPartition) (int64, bool) {
		p, ok := led[tp]
		if !ok {
			return 0, false
		}
		return p.log.HighWatermark(), true
	}
	writeGroupLags(mw, groupLags(b.meta.AllCommittedOffsets(), hw))
}

// partitionGroupLag is how far the groups that committed offsets on one
// partition are behind its high watermark.
type partitionGroupLag struct {
	max, sum int64
	groups   int64
}

// groupTopic names one group's offsets on one topic.
type groupTopic struct{ group, topic string }

// groupLagReport is what writeGroupLags writes.
type groupLagReport struct {
	partitions map[cluster.TopicPartition]*partitionGroupLag
	groups     map[groupTopic]int64
}

// groupLags measures the committed offsets of every group against the high
// watermarks hw gives, on the partitions it knows (the ones this broker
// leads). An offset past the high watermark lags by 0.
func groupLags(offsets map[string]map[cluster.TopicPartition]cluster.OffsetCommit, hw func(cluster.TopicPartition) (int64, bool)) groupLagReport {
	r := groupLagReport{partitions: map[cluster.TopicPartition]*partitionGroupLag{}, groups: map[groupTopic]int64{}}
	hws := map[cluster.TopicPartition]int64{}
	for group, offs := range offsets {
		for tp, oc := range offs {
			h, ok := hws[tp]
			if !ok {
				if h, ok = hw(tp); !ok {
					continue
				}
				hws[tp] = h
			}
			l := r.partitions[tp]
			if l == nil {
				l = &partitionGroupLag{}
				r.partitions[tp] = l
			}
			d := max(0, h-oc.Offset)
			l.max = max(l.max, d)
			l.sum += d
			l.groups++
			r.groups[groupTopic{group, tp.Topic}] += d
		}
	}
	return r
}

func writeGroupLags(mw *metricsWriter, r groupLagReport) {
	tps := make([]cluster.TopicPartition, 0, len(r.partitions))
	for tp := range r.partitions {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	mw.family("strata_group_lag_max_records", "gauge", "Records between a partition's high watermark and the committed offset of the group furthest behind, by partition this broker leads.")
	for _, tp := range tps {
		mw.sample("strata_group_lag_max_records", partitionLabels(tp.Topic, tp.Partition), float64(r.partitions[tp].max))
	}
	mw.family("strata_group_lag_sum_records", "gauge", "Records between a partition's high watermark and the committed offsets of its groups, summed over the groups, by partition this broker leads.")
	for _, tp := range tps {
		mw.sample("strata_group_lag_sum_records", partitionLabels(tp.Topic, tp.Partition), float64(r.partitions[tp].sum))
	}
	mw.family("strata_group_committed", "gauge", "Consumer groups with a committed offset, by partition this broker leads.")
	for _, tp := range tps {
		mw.sample("strata_group_committed", partitionLabels(tp.Topic, tp.Partition), float64(r.partitions[tp].groups))
	}
	gts := make([]groupTopic, 0, len(r.groups))
	for gt := range r.groups {
		gts = append(gts, gt)
	}
	sort.Slice(gts, func(i, j int) bool {
		if gts[i].group != gts[j].group {
			return gts[i].group < gts[j].group
		}
		return gts[i].topic < gts[j].topic
	})
	mw.family("strata_group_lag_records", "gauge", "Records between the high watermarks and a group's committed offsets, summed over the partitions of the topic this broker leads, by group and topic.")
	for _, gt := range gts {
		mw.sample("strata_group_lag_records", labels("group", gt.group, "topic", gt.topic), float64(r.groups[gt]))
	}
}

// isrWatchLoop counts the ISR changes of the partitions this broker leads
// as the metadata applies them: every accepted change reaches the leader
// that way, whoever proposed it (the leader itself, or the controller
// taking a dead follower out).
func (b *Broker) isrWatchLoop(ctx context.Context) {
	for {
		changed := b.meta.Changed()
		b.observeISR()
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// observeISR counts the ISR changes of the partitions this broker leads
// between the metadata it last looked at and the current one. It wakes for
// every applied change, so it misses a change only when two changes of one
// partition apply before it looks: each ISR change is a Raft round trip
// after the one before, so that is rare, and then it counts one shrink and
// one expand at most. A new leader epoch starts afresh: the ISR a new
// leader inherits is not a change it made. Metadata is copy-on-write, so
// topics whose TopicInfo is the one seen last time are skipped: an offset
// commit, the most frequent change, costs a pointer comparison per topic.
func (b *Broker) observeISR() {
	md := b.meta.Metadata()
	m := &b.metrics
	m.isr.Lock()
	defer m.isr.Unlock()
	if md == m.isr.md {
		return
	}
	if m.isr.seen == nil {
		m.isr.seen = map[cluster.TopicPartition]isrSeen{}
	}
	for name, t := range md.Topics {
		if m.isr.md != nil && m.isr.md.Topics[name] == t {
			continue
		}
		for _, info := range t.Partitions {
			tp := cluster.TopicPartition{Topic: name, Partition: info.Partition}
			if info.Leader != b.id {
				delete(m.isr.seen, tp)
				continue
			}
			cur := isrSeen{topicID: t.ID, leaderEpoch: info.LeaderEpoch, partitionEpoch: info.PartitionEpoch, isr: info.ISR}
			prev, ok := m.isr.seen[tp]
			m.isr.seen[tp] = cur
			if !ok || prev.topicID != cur.topicID || prev.leaderEpoch != cur.leaderEpoch || prev.partitionEpoch >= cur.partitionEpoch {
				continue
			}
			if slices.ContainsFunc(prev.isr, func(id int32) bool { return !slices.Contains(cur.isr, id) }) {
				m.isrShrinks.Add(1)
			}
			if slices.ContainsFunc(cur.isr, func(id int32) bool { return !slices.Contains(prev.isr, id) }) {
				m.isrExpands.Add(1)
			}
		}
	}
	for tp := range m.isr.seen {
		if _, ok := md.Topics[tp.Topic]; !ok {
			delete(m.isr.seen, tp)
		}
	}
	m.isr.md = md
}

// followerLag is how many records one follower lacks.
type followerLag struct {
	id  int32
	lag int64
}

// followerLags is, while this replica leads, each follower's lag behind its
// log end, as far as the follower has acknowledged in this leader epoch
// (one that has not reported yet is left out), in follower order.
func (p *partition) followerLags() []followerLag {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := p.mu.rs
	if !rs.leading() {
		return nil
	}
	end := p.log.LogEndOffset()
	out := make([]followerLag, 0, len(rs.followers))
	for id, f := range rs.followers {
		if f.leo >= 0 {
			out = append(out, followerLag{id: id, lag: max(0, end-f.leo)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func boolInt(v bool) int64 {
	if v {
		return 1
	}
	return 0
}
