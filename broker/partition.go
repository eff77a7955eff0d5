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

	cfg       atomic.Pointer[config.Topic]
	state     atomic.Pointer[cluster.PartitionInfo]
	tier      atomic.Pointer[tierState]
	work      partitionTier // owned by the tiering loop
	producers *producerState

	// hwMu serialises high watermark moves, so it never goes backwards, and
	// guards the leader's view of its followers.
	hwMu      sync.Mutex
	followers map[int32]*followerState
	ledEpoch  int32 // the epoch followers was reset for; -1 when not leading
	// expanding is set while a request to grow the ISR is out, so that the
	// follower's next acknowledgements do not send more.
	expanding atomic.Bool
}

// followerState is what a leader knows of one follower.
type followerState struct {
	// leo is the follower's log end as it last reported it (counting what
	// its flush policy made durable); -1 until it reports in this epoch.
	leo int64
	// caughtUpAt is when the follower last had everything the leader had.
	caughtUpAt time.Time
	// caughtUpEnd/caughtUpSent: the last chunk sent that brought the
	// follower to the leader's end at the time, and when it was sent; once
	// the follower acknowledges it, it was caught up then.
	caughtUpEnd  int64
	caughtUpSent time.Time
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
	p := &partition{topic: topic, id: id, topicID: topicID, dir: dir, self: self, ledEpoch: -1, producers: newProducerState()}
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
	p.producers.attach(l, opts.Logger)
	p.resetFollowers(info)
	p.advanceHighWatermark()
	return p, nil
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

// resetFollowers starts the leader's view of its followers afresh when this
// broker takes the lead in a new epoch: positions unknown until they report,
// and replica.lag_time_max from now to catch up before they leave the ISR.
func (p *partition) resetFollowers(info cluster.PartitionInfo) {
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	if info.Leader != p.self {
		p.followers, p.ledEpoch = nil, -1
		return
	}
	if p.ledEpoch == info.LeaderEpoch && p.followers != nil {
		return
	}
	p.ledEpoch = info.LeaderEpoch
	p.followers = map[int32]*followerState{}
	now := time.Now()
	for _, id := range info.Replicas {
		if id != p.self {
			p.followers[id] = &followerState{leo: -1, caughtUpAt: now, caughtUpEnd: -1}
		}
	}
}

// followerReport records a follower's acknowledged log end and moves the
// high watermark. It reports whether the follower may join the ISR: it is
// not in it, and has every committed record.
func (p *partition) followerReport(id int32, leo int64) (expand bool) {
	p.hwMu.Lock()
	f, ok := p.followers[id]
	if !ok {
		p.hwMu.Unlock()
		return false
	}
	f.leo = leo
	if f.caughtUpEnd >= 0 && leo >= f.caughtUpEnd && f.caughtUpSent.After(f.caughtUpAt) {
		f.caughtUpAt = f.caughtUpSent
	}
	if leo >= p.log.LogEndOffset() {
		f.caughtUpAt = time.Now()
	}
	p.hwMu.Unlock()
	p.advanceHighWatermark()
	st := p.state.Load()
	return !slices.Contains(st.ISR, id) && leo >= p.log.HighWatermark()
}

// sentTo records that a chunk ending at end was sent to a follower when the
// leader's log ended at leo.
func (p *partition) sentTo(id int32, end, leo int64) {
	if end < leo {
		return
	}
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	if f, ok := p.followers[id]; ok {
		f.caughtUpEnd, f.caughtUpSent = end, time.Now()
	}
}

// laggingFollowers returns the in-sync followers that have not been caught
// up for longer than maxLag.
func (p *partition) laggingFollowers(maxLag time.Duration) []int32 {
	st := p.state.Load()
	if st.Leader != p.self {
		return nil
	}
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	leo := p.log.LogEndOffset()
	var out []int32
	for _, id := range st.ISR {
		f, ok := p.followers[id]
		if !ok || id == p.self {
			continue
		}
		if f.leo >= leo {
			f.caughtUpAt = time.Now() // idle and caught up
		}
		if time.Since(f.caughtUpAt) > maxLag {
			out = append(out, id)
		}
	}
	return out
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

// advanceHighWatermark moves a leader's high watermark to the smallest
// committed end among the in-sync replicas: its own, and what each
// in-sync follower has acknowledged. A follower that has not reported in
// this epoch holds it where it is.
func (p *partition) advanceHighWatermark() {
	st := p.state.Load()
	if st.Leader != p.self {
		return
	}
	p.hwMu.Lock()
	defer p.hwMu.Unlock()
	hw := p.committedEnd()
	for _, id := range st.ISR {
		if id == p.self {
			continue
		}
		f, ok := p.followers[id]
		if !ok || f.leo < 0 {
			return
		}
		hw = min(hw, f.leo)
	}
	if hw > p.log.HighWatermark() {
		p.log.SetHighWatermark(hw)
	}
}

func (p *partition) close() error { return p.log.Close() }
