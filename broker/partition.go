package broker

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/hotlog"
)

// partition is this broker's replica of one partition: its local log, the
// settings in force and its role, as the cluster metadata last said.
type partition struct {
	topic   string
	id      int32
	topicID string
	dir     string
	self    int32
	log     *hotlog.Log

	cfg   atomic.Pointer[config.Topic]
	state atomic.Pointer[cluster.PartitionInfo]
	tier  atomic.Pointer[tierState]
	work  partitionTier // owned by the tiering loop

	// hwMu serialises high watermark moves so it never goes backwards, and
	// guards followers.
	hwMu sync.Mutex
	// followers is the leader's view of each follower: when it was last
	// caught up. Reset whenever this broker becomes leader.
	followers   map[int32]time.Time
	leaderEpoch int32 // the epoch followers was reset for
}

func logConfig(t config.Topic) hotlog.Config {
	c := hotlog.DefaultConfig()
	c.SegmentBytes = t.SegmentBytes
	c.SegmentAge = time.Duration(t.SegmentMs) * time.Millisecond
	c.MaxBatchBytes = int(t.MaxMessageBytes)
	switch t.FlushPolicy {
	case config.FlushInterval:
		c.FlushPolicy = hotlog.FlushInterval
	case config.FlushNever:
		c.FlushPolicy = hotlog.FlushNever
	default:
		c.FlushPolicy = hotlog.FlushAlways
	}
	c.FlushInterval = time.Duration(t.FlushMs) * time.Millisecond
	return c
}

// openPartition opens (creating or recovering) the log of one replica.
func openPartition(dir, topic, topicID string, id, self int32, cfg config.Topic, info cluster.PartitionInfo, logger *slog.Logger) (*partition, error) {
	p := &partition{topic: topic, id: id, topicID: topicID, dir: dir, self: self}
	p.cfg.Store(&cfg)
	p.state.Store(&info)
	p.tier.Store(&tierState{coldStart: -1, coldEnd: -1})
	p.work.aligned.Store(-1)
	opts := hotlog.DefaultOptions()
	opts.Config = logConfig(cfg)
	opts.Logger = logger.With("topic", topic, "partition", id)
	opts.OnDurable = func(int64) { p.advanceHighWatermark() }
	l, err := hotlog.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	p.log = l
	p.resetFollowers(info)
	p.advanceHighWatermark()
	return p, nil
}

// resetFollowers starts the lag clock of every follower afresh when this
// broker takes the lead in a new epoch: a follower gets replica.lag_time_max
// from then on to catch up before it leaves the ISR.
func (p *partition) resetFollowers(info cluster.PartitionInfo) {
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	if info.Leader != p.self || (p.followers != nil && p.leaderEpoch == info.LeaderEpoch) {
		return
	}
	p.leaderEpoch = info.LeaderEpoch
	p.followers = map[int32]time.Time{}
	now := time.Now()
	for _, id := range info.Replicas {
		if id != p.self {
			p.followers[id] = now
		}
	}
}

// laggingFollowers returns the in-sync followers that have not been caught up
// for longer than maxLag. Replication arrives later; until then a follower is
// never caught up, so it leaves the ISR once maxLag passes.
func (p *partition) laggingFollowers(maxLag time.Duration) []int32 {
	st := p.state.Load()
	if st.Leader != p.self {
		return nil
	}
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	var out []int32
	for _, id := range st.ISR {
		if at, ok := p.followers[id]; ok && id != p.self && time.Since(at) > maxLag {
			out = append(out, id)
		}
	}
	return out
}

func (p *partition) name() string { return fmt.Sprintf("%s/%d", p.topic, p.id) }

func (p *partition) isLeader() bool { return p.state.Load().Leader == p.self }

// setState applies the metadata's view of the partition and its topic's
// settings.
func (p *partition) setState(info cluster.PartitionInfo, cfg config.Topic) error {
	p.state.Store(&info)
	p.resetFollowers(info)
	if old := p.cfg.Load(); *old != cfg {
		if err := p.log.Reconfigure(logConfig(cfg)); err != nil {
			return err
		}
		p.cfg.Store(&cfg)
	}
	p.advanceHighWatermark()
	return nil
}

// committedEnd is how far this replica's own log counts towards the high
// watermark: what is fsynced, unless the topic asked never to fsync, in
// which case what is written. So under "always" and "interval" a consumer
// never reads a record that a crash of this broker could take back.
func (p *partition) committedEnd() int64 {
	if p.cfg.Load().FlushPolicy == config.FlushNever {
		return p.log.LogEndOffset()
	}
	return min(p.log.DurableOffset(), p.log.LogEndOffset())
}

// advanceHighWatermark moves the high watermark of a leader to the smallest
// committed end among the in-sync replicas. Until replication arrives the
// leader is the only replica that reports, so a partition whose ISR holds
// other brokers keeps its high watermark where it is.
func (p *partition) advanceHighWatermark() {
	st := p.state.Load()
	if st.Leader != p.self || !slices.Equal(st.ISR, []int32{p.self}) {
		return
	}
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	if hw := p.committedEnd(); hw > p.log.HighWatermark() {
		p.log.SetHighWatermark(hw)
	}
}

func (p *partition) close() error { return p.log.Close() }
