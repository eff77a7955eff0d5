package broker

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/compact"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/record"
)

// partition is this broker's replica of one partition: its local log, the
// settings in force, and its replica state machine (replica_state.go) with
// the I/O around it. The broker's goroutines (produce handlers, replication
// streams, the housekeeping and tiering loops) call its methods; so does
// the simulation that checks the protocol.
type partition struct {
	topic   string
	id      int32
	topicID string
	dir     string
	self    int32
	log     *hotlog.Log
	logger  *slog.Logger
	now     func() time.Time
	// brokerAddr is the client address of a broker, for the NOT_LEADER
	// this replica answers (notLeaderError); "" where it is not known.
	brokerAddr func(id int32) string

	cfg atomic.Pointer[config.Topic]
	// view is the metadata the replica last applied, for readers that need
	// no lock (routing, describe).
	view atomic.Pointer[cluster.PartitionInfo]
	// applied is the metadata setState last applied without error: a
	// reconcile round passes over a replica whose metadata and settings
	// equal what it applied, so that one ISR change costs one replica's
	// update, not one per replica the broker holds.
	applied atomic.Pointer[cluster.PartitionInfo]

	// mu is the replica lock. It orders the leader's appends, changes of
	// role and epoch, moves of the high watermark and the follower's
	// appends and truncations: a batch is appended, and its produce starts
	// waiting, in one leader epoch, and a change of epoch either comes
	// before (the append is refused) or after (the wait ends with
	// NOT_LEADER). Lock order: mu, producers.mu, then the log's own locks.
	mu struct {
		sync.Mutex
		rs *replicaState
	}

	tier atomic.Pointer[tierState]
	work partitionTier // owned by the tiering loop
	// commits is when, as leader, the replica saw records acknowledged
	// (tier_lag.go).
	commits   commitClock
	producers *producerState

	// epochAsked is set while a request for a new leader epoch is out, or
	// was sent in the last second (isr.go, requestNewEpoch).
	epochAsked atomic.Bool

	// advancing runs the high watermark's moves when the log's durable
	// end moved (kickAdvance).
	advancing advancer

	// house is the replica's place in the broker's housekeeper
	// (housekeeper.go): markDirty asks for a visit.
	house houseState
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

// replicaSpec is what opening a replica needs.
type replicaSpec struct {
	dir            string
	topic, topicID string
	partition      int32
	self           int32
	cfg            config.Topic
	info           cluster.PartitionInfo
	lagMax         time.Duration
	logger         *slog.Logger
	// fs is the file system of the log; nil for the disk.
	fs hotlog.FS
	// files is the broker's cache of open segment files; nil gives the log
	// a small one of its own.
	files *hotlog.FileCache
	// now is the clock; nil for time.Now.
	now func() time.Time
	// brokerAddr gives a broker's client address, for NOT_LEADER; nil
	// when none is known.
	brokerAddr func(id int32) string
	// house, when set, is told of events that give the replica
	// housekeeping work (markDirty).
	house *housekeeper
	// onDurable, when set, is called when the log's durable end moves,
	// instead of waking a goroutine of the partition's own that moves the
	// high watermark: a simulation calls advance itself, in its own order.
	// It also keeps every fsync on the goroutine that needs it, and the
	// interval's rounds to the caller's Flush (hotlog.Options.FlushInline),
	// so that the call comes there.
	onDurable func()
}

// openPartition opens (creating or recovering) the log of one replica and
// applies the metadata to it.
func openPartition(s replicaSpec) (*partition, error) {
	p := &partition{topic: s.topic, id: s.partition, topicID: s.topicID, dir: s.dir, self: s.self,
		logger: s.logger.With("topic", s.topic, "partition", s.partition), now: s.now, brokerAddr: s.brokerAddr,
		producers: newProducerState()}
	p.advancing.run = p.advance
	p.house.h, p.house.index = s.house, -1
	if p.now == nil {
		p.now = time.Now
	}
	if p.brokerAddr == nil {
		p.brokerAddr = func(int32) string { return "" }
	}
	p.cfg.Store(&s.cfg)
	p.tier.Store(&tierState{coldStart: -1, coldEnd: -1})
	p.work.aligned.Store(-1)
	opts := hotlog.DefaultOptions()
	opts.Config = logConfig(s.cfg)
	opts.Logger = p.logger
	opts.Now = p.now
	if s.fs != nil {
		opts.FS = s.fs
	}
	opts.Files = s.files
	opts.OnDurable = func(int64) { p.kickAdvance() }
	if s.onDurable != nil {
		opts.OnDurable = func(int64) { s.onDurable() }
		opts.SyncRollsInline = true
		opts.FlushInline = true
	}
	// A replica with files already is a restart (of this process or the
	// machine): under interval and never it may have lost records.
	names, _ := opts.FS.ReadDir(s.dir)
	restarted := len(names) > 0
	l, err := hotlog.Open(s.dir, opts)
	if err != nil {
		return nil, err
	}
	p.log = l
	p.producers.attach(l, opts.Logger)
	p.mu.rs = newReplicaState(s.self, s.cfg.MinInsyncReplicas, s.lagMax)
	p.mu.rs.unsure = restarted && s.cfg.FlushPolicy != config.FlushAlways
	if err := p.setState(s.info, s.cfg); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *partition) name() string { return fmt.Sprintf("%s/%d", p.topic, p.id) }

// isLeader reports whether the metadata the replica applied makes it the
// leader.
func (p *partition) isLeader() bool { return p.view.Load().Leader == p.self }

// logViewLocked is what the state machine sees of the log.
func (p *partition) logViewLocked() logView {
	return logView{end: p.log.LogEndOffset(), committed: p.committedEnd(), hw: p.log.HighWatermark(), latestEpoch: p.log.LatestEpoch()}
}

// committedEnd is how far this replica's own log counts towards the high
// watermark, as a leader and in a follower's reports: under "always" what
// is fsynced, so a consumer never reads a record that a crash of this
// broker could take back; under "interval" and "never" what is written,
// so a write is acknowledged once every in-sync replica has it in its
// page cache, and the fsync follows (within flush.ms under "interval"). An
// acknowledged record is then lost only if every in-sync replica loses
// power before its fsync.
func (p *partition) committedEnd() int64 {
	if p.cfg.Load().FlushPolicy != config.FlushAlways {
		return p.log.LogEndOffset()
	}
	return min(p.log.DurableOffset(), p.log.LogEndOffset())
}

// setState applies the metadata's view of the partition and its topic's
// settings. A replica that takes the lead records its epoch in its log at
// once (BeginEpoch), so that followers asking about a newer epoch of their
// own are told where its epoch began.
func (p *partition) setState(info cluster.PartitionInfo, cfg config.Topic) error {
	if old := p.cfg.Load(); *old != cfg {
		if err := p.log.Reconfigure(logConfig(cfg)); err != nil {
			return err
		}
		p.cfg.Store(&cfg)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := p.mu.rs
	rs.minISR = cfg.MinInsyncReplicas
	finish(rs.apply(info, p.logViewLocked(), p.now()))
	cur := rs.info
	p.view.Store(&cur)
	if rs.leading() && info.LeaderEpoch == rs.info.LeaderEpoch {
		if err := p.log.BeginEpoch(info.LeaderEpoch); err != nil {
			return err
		}
	}
	p.advanceLocked()
	p.applied.Store(&info)
	p.markDirty() // its role, ISR or epoch may have changed what is due
	return nil
}

// reflects reports whether the replica applied info and cfg already, so
// applying them again would change nothing.
func (p *partition) reflects(info cluster.PartitionInfo, cfg config.Topic) bool {
	a := p.applied.Load()
	return a != nil && *p.cfg.Load() == cfg &&
		a.Partition == info.Partition && a.Leader == info.Leader && a.LeaderEpoch == info.LeaderEpoch &&
		a.PartitionEpoch == info.PartitionEpoch && slices.Equal(a.Replicas, info.Replicas) && slices.Equal(a.ISR, info.ISR)
}

// finish ends produce waits.
func finish(done []completion) {
	for _, c := range done {
		c.w.done <- c.err
	}
}

// advance moves a leader's high watermark as far as its in-sync replicas
// allow and ends the produce waits it passes.
func (p *partition) advance() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advanceLocked()
	p.markDirty() // the durable end moved: a checkpoint is due
}

func (p *partition) advanceLocked() {
	rs := p.mu.rs
	view := p.logViewLocked()
	if hw := rs.highWatermark(view); hw > view.hw {
		p.log.SetHighWatermark(hw)
		p.markDirty() // a checkpoint is due
	}
	finish(rs.complete(p.log.HighWatermark()))
}

// kickAdvance asks for the high watermark to be moved, on a goroutine of
// its own. The log calls it when its durable end moves, from its flusher or
// from inside an append (a roll): it must not take the replica lock
// itself, which an appender may hold.
func (p *partition) kickAdvance() { p.advancing.kick() }

// advancer moves the high watermark when the log's durable end moved, for
// produces that do not wait for it themselves and for consumers. Its
// goroutine runs only while kicks come: an idle replica of the thousands
// a broker holds costs none.
type advancer struct {
	run func()

	mu      sync.Mutex
	pending bool // a kick came since the last run began
	running bool
	stopped bool
	wg      sync.WaitGroup
}

func (a *advancer) kick() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return
	}
	a.pending = true
	if !a.running {
		a.running = true
		a.wg.Add(1)
		go a.loop()
	}
}

func (a *advancer) loop() {
	defer a.wg.Done()
	for {
		a.mu.Lock()
		if !a.pending || a.stopped {
			a.running = false
			a.mu.Unlock()
			return
		}
		a.pending = false
		a.mu.Unlock()
		a.run()
	}
}

// stop ends the runs and waits for the one under way.
func (a *advancer) stop() {
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	a.wg.Wait()
}

// followerReport takes a follower's acknowledged log end in a leader
// epoch, moves the high watermark, and returns an ISR change to ask for
// (the follower caught up) or nil. It says why when the leader did not
// count the report (replica_state.go).
func (p *partition) followerReport(id, epoch int32, leo int64) (reportRefusal, *isrChange) {
	p.mu.Lock()
	defer p.mu.Unlock()
	verdict, change := p.mu.rs.followerReport(id, epoch, leo, p.logViewLocked(), p.now())
	if verdict == reportCounted {
		p.advanceLocked()
		if !slices.Contains(p.mu.rs.info.ISR, id) {
			// It may join once a pending ISR change is answered: tick
			// asks then. A member's report only moves its lag deadline
			// later, which needs no visit.
			p.markDirty()
		}
	}
	return verdict, change
}

// sentTo records, before it is sent, that a follower is sent everything
// up to end: batches, or a new log start. caughtUp says end is the
// leader's log end.
func (p *partition) sentTo(id int32, end int64, caughtUp bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.rs.sent(id, end, caughtUp, p.now())
}

// tick returns an ISR change that drops lagging followers, or nil, and
// when tick may next have one to return without an event that marks the
// replica dirty (zero for never).
func (p *partition) tick() (*isrChange, time.Time) {
	// Only a leader with followers has an ISR to manage. The view (what
	// the replica state last applied, stored under mu) tells without the
	// lock or the log view, and most replicas are followers or lone.
	if v := p.view.Load(); v == nil || v.Leader != p.self || len(v.Replicas) < 2 {
		return nil, time.Time{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	view, now := p.logViewLocked(), p.now()
	c := p.mu.rs.tick(view, now)
	return c, p.mu.rs.nextTick(view)
}

// isrAnswered takes the controller's answer to an ISR change: the
// partition after it, or a refusal.
func (p *partition) isrAnswered(c *isrChange, info cluster.PartitionInfo, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := p.mu.rs
	defer p.markDirty() // a follower waiting for the answer may join now
	if err != nil {
		rs.isrRefused(c)
		return
	}
	finish(rs.apply(info, p.logViewLocked(), p.now()))
	cur := rs.info
	p.view.Store(&cur)
	p.advanceLocked()
}

// leading reports whether the replica acts as leader, and in which epoch.
func (p *partition) leading() (epoch int32, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.rs.info.LeaderEpoch, p.mu.rs.leading()
}

// needsNewEpoch reports the epoch a replica named the leader in an epoch
// it led before its restart waits to leave (replica_state.go).
func (p *partition) needsNewEpoch() (int32, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.rs.needsNewEpoch()
}

// followingLocked reports whether the replica follows leader in epoch now.
// Caller holds mu.
func (p *partition) followingLocked(leader, epoch int32) bool {
	info := p.mu.rs.info
	return info.Leader == leader && info.Leader != p.self && info.LeaderEpoch == epoch
}

// errNotFollowing: the replica no longer follows that leader in that epoch;
// whatever the leader sent is stale.
var errNotFollowing = fmt.Errorf("broker: the replica no longer follows that leader in that epoch")

// truncateAsFollower cuts the log at offset for the leader it follows in
// epoch; the producer state goes with the cut records.
func (p *partition) truncateAsFollower(leader, epoch int32, offset int64) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.followingLocked(leader, epoch) {
		return 0, errNotFollowing
	}
	end, err := p.log.TruncateTo(max(offset, p.log.LogStartOffset()))
	p.producers.reset() // the batches it remembered may be gone
	return end, err
}

// resetAsFollower starts the log again at the leader's local start, when
// everything the follower lacks is below it (in the cold tier, or gone).
func (p *partition) resetAsFollower(leader, epoch int32, start int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.followingLocked(leader, epoch) {
		return errNotFollowing
	}
	if p.log.LogEndOffset() >= start {
		return nil
	}
	err := p.log.ResetTo(start)
	p.producers.reset()
	return err
}

// appendAsFollower appends what the leader sent (whole batches with their
// offsets and epochs, from the follower's log end on, read by the leader
// from readFrom, or NoReadFrom) and takes the leader's high watermark, as
// far as the follower's log goes.
func (p *partition) appendAsFollower(leader, epoch int32, readFrom int64, data []byte, leaderHW int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.followingLocked(leader, epoch) {
		return errNotFollowing
	}
	if data = skipBelow(data, p.log.LogEndOffset()); len(data) > 0 {
		data, err := fillerFromLogEnd(data, p.log.LogEndOffset())
		if err != nil {
			return err
		}
		if err := p.producers.appendReplica(p.log, data, readFrom); err != nil {
			return err
		}
	}
	if hw := followerHighWatermark(leaderHW, p.logViewLocked()); hw > p.log.HighWatermark() {
		p.log.SetHighWatermark(hw)
	}
	if p.mu.rs.unsure && p.holdsCommittedBefore(epoch, leaderHW) {
		p.mu.rs.unsure = false
	}
	p.markDirty() // a roll deadline, producer snapshots, a checkpoint
	return nil
}

// tombstoneFloor is where this replica's cleaner may remove tombstones
// up to, as far as the other replicas go (replicaState.tombstoneFloor).
func (p *partition) tombstoneFloor() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.rs.tombstoneFloor(p.logViewLocked())
}

// takeTombstoneFloor keeps the tombstone floor the leader it follows in
// epoch sent.
func (p *partition) takeTombstoneFloor(leader, epoch int32, floor int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.followingLocked(leader, epoch) {
		p.mu.rs.toldFloor = floor
	}
}

// holdsCommittedBefore reports whether this follower's log shows it holds
// every record committed before its process started, after it took a
// chunk of leader epoch epoch carrying the leader's high watermark hw: it
// holds hw, and hw is past the first offset of epoch, so every record
// committed before the epoch began is below it (the leader had them all
// when it took the lead), and every record committed in the epoch before
// this process started is too.
func (p *partition) holdsCommittedBefore(epoch int32, hw int64) bool {
	if p.log.LogEndOffset() < hw {
		return false
	}
	for _, e := range p.log.Epochs() {
		if e.Epoch == epoch {
			return e.StartOffset <= hw
		}
	}
	return false
}

// skipBelow drops the leading batches of data that end below offset: a
// leader may resend what the follower already has after a reconnect. It
// splits data without checking CRCs: what it drops is not written, and
// AppendReplica checks every byte of what it keeps.
func skipBelow(data []byte, offset int64) []byte {
	for len(data) > 0 {
		b, rest, err := record.NextVerified(data)
		if err != nil || b.NextOffset() > offset {
			return data
		}
		data = rest
	}
	return data
}

// fillerFromLogEnd cuts a leading filler of data that begins below the
// log end offset leo to begin at it (compact.FillerFrom says why): the
// leader's cleaning merged it over batch boundaries, one of which is where
// this follower's log ends. Any other batch begins at a boundary both
// replicas hold, and data is returned as it is.
func fillerFromLogEnd(data []byte, leo int64) ([]byte, error) {
	b, rest, err := record.Next(data)
	if err != nil {
		return data, nil // AppendReplica refuses it with its reason
	}
	f, ok, err := compact.FillerFrom(b, leo)
	if err != nil || !ok {
		return data, err
	}
	return slices.Concat([]byte(f), rest), nil
}

// endOffsetForEpoch answers a follower of this leader: the largest epoch
// at or below epoch its log knows, and where it ended. An epoch older than
// all the log knows gets no answer (UndefinedEpoch), and the follower keeps
// only what it knows to be committed: a log that was reset (to its
// leader's log start, or to the cold tier's end) knows no epoch before the
// reset, and the start of its first known epoch says nothing about where
// the follower's older epoch ended in the partition. Answering with it
// left a follower the uncommitted suffix it had written as a deposed
// leader.
func (p *partition) endOffsetForEpoch(epoch int32) EpochEnd {
	leo := p.log.LogEndOffset()
	if h := p.log.Epochs(); len(h) == 0 || epoch < h[0].Epoch {
		return EpochEnd{Epoch: hotlog.UndefinedEpoch, EndOffset: hotlog.UndefinedOffset, LogEnd: leo}
	}
	e, end := p.log.EndOffsetForEpoch(epoch)
	return EpochEnd{Epoch: e, EndOffset: end, LogEnd: leo}
}

// leaderEndOffsetForEpoch is endOffsetForEpoch as the leader answers a
// follower about to follow it. A leader that restarted unnoticed in its
// epoch does not answer (LEADER_NOT_AVAILABLE) until a new epoch starts:
// a power cut may have taken records from its log that its followers
// hold, acknowledged ones under flush.policy interval, and a follower
// would cut its log to the shorter one (restartSuccessor).
func (p *partition) leaderEndOffsetForEpoch(epoch int32) (EpochEnd, error) {
	if inherited, waiting := p.needsNewEpoch(); waiting {
		return EpochEnd{}, refuse(ReasonLeaderNotAvailable, nil, "%s: this broker restarted while leading it in epoch %d and waits for the controller to start a new leader epoch", p.name(), inherited)
	}
	return p.endOffsetForEpoch(epoch), nil
}

// close ends the advancer, every produce wait (NOT_LEADER) and the log.
func (p *partition) close() error {
	p.advancing.stop()
	p.mu.Lock()
	rs := p.mu.rs
	var ended []completion
	for _, w := range rs.waiters {
		ended = append(ended, completion{w, errNotLeaderNow})
	}
	rs.waiters = nil
	finish(ended)
	p.mu.Unlock()
	return p.log.Close()
}
