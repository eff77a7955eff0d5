package broker

// ISR changes. Only the controller changes the ISR, through the Raft log; a
// leader asks it to, carrying its leader epoch, so that a deposed leader's
// request is refused. A follower leaves the ISR once it has lagged longer
// than replica.lag_time_max, and comes back once it has every committed
// record.

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/strata-log/strata/cluster"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// shrinkISR drops a led partition's followers that have lagged too long.
func (b *Broker) shrinkISR(p *partition) {
	lagging := p.laggingFollowers(time.Duration(b.cfg.Replica.LagTimeMax))
	if len(lagging) == 0 {
		return
	}
	st := p.state.Load()
	isr := slices.DeleteFunc(slices.Clone(st.ISR), func(id int32) bool { return slices.Contains(lagging, id) })
	if err := b.alterISR(p, isr, st.LeaderEpoch); err != nil {
		b.log.Warn("shrinking the ISR failed", "partition", p.name(), "isr", isr, "err", err)
		return
	}
	b.log.Info("followers left the ISR", "partition", p.name(), "removed", lagging, "isr", isr)
}

// expandISR brings a caught-up follower back into a led partition's ISR.
func (b *Broker) expandISR(p *partition, follower int32) {
	st := p.state.Load()
	if slices.Contains(st.ISR, follower) || !slices.Contains(st.Replicas, follower) {
		return
	}
	// Keep the ISR in replica order, as the controller stores it.
	var isr []int32
	for _, id := range st.Replicas {
		if id == follower || slices.Contains(st.ISR, id) {
			isr = append(isr, id)
		}
	}
	if !p.expanding.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer p.expanding.Store(false)
		if err := b.alterISR(p, isr, st.LeaderEpoch); err != nil {
			b.log.Warn("expanding the ISR failed", "partition", p.name(), "isr", isr, "err", err)
			return
		}
		b.log.Info("a follower rejoined the ISR", "partition", p.name(), "follower", follower, "isr", isr)
	}()
}

// alterISR proposes a new ISR for a partition this broker leads in epoch:
// directly when this broker is the controller, else through the
// controller's AlterISR call.
func (b *Broker) alterISR(p *partition, isr []int32, epoch int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := b.meta.ChangeISR(ctx, p.topic, p.id, isr, epoch)
	var nc *cluster.NotControllerError
	if !errors.As(err, &nc) {
		return err
	}
	if nc.ControllerID < 0 || nc.Addr == "" {
		return err
	}
	client, err := b.peers.replication(nc.ControllerID, nc.Addr)
	if err != nil {
		return err
	}
	_, err = client.AlterISR(ctx, &stratav1.AlterISRRequest{Topic: p.topic, TopicId: p.topicID, Partition: p.id, LeaderId: b.id, LeaderEpoch: epoch, Isr: isr})
	return err
}

// AlterISR is the controller's side of alterISR: a leader's request to
// change a partition's ISR, checked against the leader epoch.
func (b *Broker) AlterISR(ctx context.Context, topic, topicID string, partition, leader, epoch int32, isr []int32) (cluster.PartitionInfo, error) {
	t, ok := b.meta.Metadata().Topic(topic)
	if !ok || t.ID != topicID {
		return cluster.PartitionInfo{}, refuse(ReasonTopicNotFound, nil, "topic %q with id %s not found", topic, topicID)
	}
	if info, ok := t.Partition(partition); ok && info.Leader != leader {
		return cluster.PartitionInfo{}, refuse(ReasonFencedEpoch, nil, "broker %d does not lead %s/%d", leader, topic, partition)
	}
	info, err := b.meta.ChangeISR(ctx, topic, partition, isr, epoch)
	if err != nil {
		return cluster.PartitionInfo{}, clusterError(err)
	}
	return info, nil
}
