package broker

// ISR changes. Only the controller changes the ISR, through the Raft log; a
// leader asks it to, naming the leader epoch and the partition epoch its
// request was computed from, so that a deposed leader's request, or one
// that raced another change, is refused. The replica state machine decides
// when (a follower lagging longer than replica.lag.time.max leaves, one that
// caught up joins) and keeps one request in flight at a time.

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
)

// proposeISR sends an ISR change in the background and gives the answer to
// the partition.
func (b *Broker) proposeISR(p *partition, c *isrChange) {
	b.goTask(func(life context.Context) {
		ctx, cancel := context.WithTimeout(life, 10*time.Second)
		defer cancel()
		info, err := b.alterISR(ctx, p, c)
		p.isrAnswered(c, info, err)
		if err != nil {
			b.log.Warn("ISR change refused", "partition", p.name(), "isr", c.isr, "leader_epoch", c.leaderEpoch, "partition_epoch", c.partitionEpoch, "err", err)
			return
		}
		b.log.Info("ISR changed", "partition", p.name(), "isr", info.ISR, "partition_epoch", info.PartitionEpoch)
	})
}

// alterISR proposes an ISR change: directly when this broker is the
// controller, else through the controller's AlterISR call.
func (b *Broker) alterISR(ctx context.Context, p *partition, c *isrChange) (cluster.PartitionInfo, error) {
	info, err := b.meta.ChangeISR(ctx, p.topic, p.id, c.isr, c.leaderEpoch, c.partitionEpoch)
	var nc *cluster.NotControllerError
	if !errors.As(err, &nc) {
		return info, err
	}
	if nc.ControllerID < 0 || nc.Addr == "" {
		return info, err
	}
	return b.peers.AlterISR(ctx, Peer{ID: nc.ControllerID, Addr: nc.Addr}, ISRRequest{
		Topic: p.topic, TopicID: p.topicID, Partition: p.id, LeaderID: b.id,
		LeaderEpoch: c.leaderEpoch, PartitionEpoch: c.partitionEpoch, ISR: c.isr,
	})
}

// AlterISR is the controller's side of alterISR: a leader's request to
// change a partition's ISR, checked against the leader and partition epochs.
// A request that cannot be right whatever the state (a bad name, a negative
// partition, id or epoch, an empty ISR or one with duplicates, one naming a
// broker that is not a replica or dropping the leader) is INVALID_REQUEST;
// a stale one is FENCED_EPOCH; a broker that is not the controller answers
// UNAVAILABLE naming it, which is the one worth retrying (there).
func (b *Broker) AlterISR(ctx context.Context, req ISRRequest) (PartitionInfo, error) {
	return b.role.alterISRCall(ctx, req)
}

func (b clusterMember) alterISRCall(ctx context.Context, req ISRRequest) (cluster.PartitionInfo, error) {
	if err := checkISRRequest(req); err != nil {
		return cluster.PartitionInfo{}, err
	}
	t, ok := b.meta.Metadata().Topic(req.Topic)
	if !ok || t.ID != req.TopicID {
		return cluster.PartitionInfo{}, refuse(ReasonTopicNotFound, nil, "topic %q with id %s not found", req.Topic, req.TopicID)
	}
	if info, ok := t.Partition(req.Partition); ok && info.Leader != req.LeaderID {
		return cluster.PartitionInfo{}, refuse(ReasonFencedEpoch, nil, "broker %d does not lead %s/%d", req.LeaderID, req.Topic, req.Partition)
	}
	info, err := b.meta.ChangeISR(ctx, req.Topic, req.Partition, req.ISR, req.LeaderEpoch, req.PartitionEpoch)
	if err != nil {
		return cluster.PartitionInfo{}, clusterError(err)
	}
	return info, nil
}

// checkISRRequest checks what an ISR change needs no state to be refused
// for.
func checkISRRequest(req ISRRequest) error {
	if err := cluster.ValidateTopicName(req.Topic); err != nil {
		return refuse(ReasonInvalidRequest, err, "AlterISR: %v", err)
	}
	switch {
	case req.Partition < 0:
		return refuse(ReasonInvalidRequest, nil, "AlterISR: partition %d of %s: must not be negative", req.Partition, req.Topic)
	case req.LeaderID < 0 || req.LeaderEpoch < 0 || req.PartitionEpoch < 0:
		return refuse(ReasonInvalidRequest, nil, "AlterISR %s/%d: leader id %d, leader epoch %d and partition epoch %d must not be negative",
			req.Topic, req.Partition, req.LeaderID, req.LeaderEpoch, req.PartitionEpoch)
	case len(req.ISR) == 0:
		return refuse(ReasonInvalidRequest, nil, "AlterISR %s/%d: the new ISR is empty; it must hold at least the leader", req.Topic, req.Partition)
	}
	for i, id := range req.ISR {
		if id < 0 || slices.Contains(req.ISR[:i], id) {
			return refuse(ReasonInvalidRequest, nil, "AlterISR %s/%d: ISR %v: broker ids must be distinct and not negative", req.Topic, req.Partition, req.ISR)
		}
	}
	return nil
}

// requestNewEpoch asks, at most once a second per partition, for the
// leader epoch after one this broker was found leading when it started
// (replica_state.go): it leads again from that one.
func (b *Broker) requestNewEpoch(p *partition) {
	epoch, ok := p.needsNewEpoch()
	if !ok || !p.epochAsked.CompareAndSwap(false, true) {
		return
	}
	b.goTask(func(life context.Context) {
		defer time.AfterFunc(time.Second, func() { p.epochAsked.Store(false) })
		ctx, cancel := context.WithTimeout(life, 10*time.Second)
		defer cancel()
		info, err := b.newLeaderEpoch(ctx, ISRRequest{Topic: p.topic, TopicID: p.topicID, Partition: p.id, LeaderID: b.id, LeaderEpoch: epoch})
		if err != nil {
			b.log.Warn("asking for a new leader epoch after a restart failed; will ask again", "partition", p.name(), "epoch", epoch, "err", err)
			return
		}
		b.log.Info("a new leader epoch after a restart", "partition", p.name(), "epoch", info.LeaderEpoch, "leader", info.Leader)
	})
}

// newLeaderEpoch asks for a new epoch: directly when this broker is the
// controller, else through the controller's NewLeaderEpoch call.
func (b *Broker) newLeaderEpoch(ctx context.Context, req ISRRequest) (cluster.PartitionInfo, error) {
	info, err := b.meta.ChangeLeader(ctx, req.Topic, req.Partition, req.LeaderID, req.LeaderEpoch)
	var nc *cluster.NotControllerError
	if !errors.As(err, &nc) || nc.ControllerID < 0 || nc.Addr == "" {
		return info, err
	}
	return b.peers.NewLeaderEpoch(ctx, Peer{ID: nc.ControllerID, Addr: nc.Addr}, req)
}

// NewLeaderEpoch is the controller's side of newLeaderEpoch: the broker
// leading a partition in an epoch asks for the next one, keeping the lead
// unless its topic's flush policy lets a restart lose acknowledged records
// (restartSuccessor).
func (b *Broker) NewLeaderEpoch(ctx context.Context, req ISRRequest) (PartitionInfo, error) {
	return b.role.newLeaderEpochCall(ctx, req)
}

func (b clusterMember) newLeaderEpochCall(ctx context.Context, req ISRRequest) (cluster.PartitionInfo, error) {
	t, ok := b.meta.Metadata().Topic(req.Topic)
	if !ok || t.ID != req.TopicID {
		return cluster.PartitionInfo{}, refuse(ReasonTopicNotFound, nil, "topic %q with id %s not found", req.Topic, req.TopicID)
	}
	if info, ok := t.Partition(req.Partition); ok && (info.Leader != req.LeaderID || info.LeaderEpoch != req.LeaderEpoch) {
		return cluster.PartitionInfo{}, refuse(ReasonFencedEpoch, nil, "broker %d does not lead %s/%d in epoch %d", req.LeaderID, req.Topic, req.Partition, req.LeaderEpoch)
	}
	policy := b.defaults.FlushPolicy
	if cfg, err := b.defaults.With(t.Config); err == nil {
		policy = cfg.FlushPolicy
	}
	next := req.LeaderID
	if info, ok := t.Partition(req.Partition); ok {
		next = restartSuccessor(info, req.LeaderID, policy)
	}
	info, err := b.meta.ChangeLeader(ctx, req.Topic, req.Partition, next, req.LeaderEpoch)
	if err != nil {
		return cluster.PartitionInfo{}, clusterError(err)
	}
	if next == req.LeaderID {
		return info, nil
	}
	// It may lack committed records now: out of the ISR until it has
	// caught up with its successor, as any follower joins.
	isr := slices.DeleteFunc(slices.Clone(info.ISR), func(id int32) bool { return id == req.LeaderID })
	if info, err = b.meta.ChangeISR(ctx, req.Topic, req.Partition, isr, info.LeaderEpoch, info.PartitionEpoch); err != nil {
		return cluster.PartitionInfo{}, clusterError(err)
	}
	return info, nil
}

// restartSuccessor is who leads the next epoch after the leader restarted
// unnoticed in its epoch. Under flush.policy=always the leader itself: what
// it acknowledged was fsynced, so its log still holds it. Under the other
// policies its restart may have been a power cut that took acknowledged
// records every other in-sync replica still holds, and followers cut
// their logs to their leader's: the lead goes to the first other ISR
// member, the restarted broker leaves the ISR and follows it (if that one
// is gone too, the controller's election moves on as after any leader's
// death). Alone in the ISR, it keeps the lead: nobody else has more.
func restartSuccessor(info cluster.PartitionInfo, restarted int32, policy config.FlushPolicy) int32 {
	if policy == config.FlushAlways {
		return restarted
	}
	for _, id := range info.ISR {
		if id != restarted {
			return id
		}
	}
	return restarted
}
