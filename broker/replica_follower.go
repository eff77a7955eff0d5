package broker

// The follower's side of replication. For every broker it follows, a
// fetcher keeps one stream open and says, per partition, where its log
// ends. Before it follows a partition in a new leader epoch it truncates
// its log by leader epoch (truncation.go), so a suffix written under a
// deposed leader never survives a failover. Batches from the leader are
// appended as they come (fsynced as the topic's flush policy says) and
// acknowledged with the new log end. Every truncation and append checks,
// under the replica lock, that the replica still follows that leader in
// that epoch: what a deposed leader sends is dropped.

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/hotlog"
)

// followTarget says that a partition is to be followed from a leader in an
// epoch.
type followTarget struct {
	p      *partition
	leader int32
	addr   string
	epoch  int32
}

// fetchers runs one fetcher per leader broker, each under the broker's
// lifetime: Close's end of it stops them all, and closeAll (stop) waits.
type fetchers struct {
	b  *Broker
	mu sync.Mutex
	by map[int32]*fetcher
	wg sync.WaitGroup
}

func newFetchers(b *Broker) *fetchers { return &fetchers{b: b, by: map[int32]*fetcher{}} }

// update makes the fetchers follow exactly the targets given.
func (fs *fetchers) update(targets map[cluster.TopicPartition]followTarget) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	byLeader := map[int32]map[cluster.TopicPartition]followTarget{}
	for tp, t := range targets {
		if byLeader[t.leader] == nil {
			byLeader[t.leader] = map[cluster.TopicPartition]followTarget{}
		}
		byLeader[t.leader][tp] = t
	}
	for id, f := range fs.by {
		if _, ok := byLeader[id]; !ok {
			f.cancel()
			delete(fs.by, id)
		}
	}
	for id, ts := range byLeader {
		f := fs.by[id]
		var addr string
		for _, t := range ts {
			addr = t.addr
		}
		if f != nil && f.addr != addr {
			f.cancel()
			f = nil
		}
		if f == nil {
			f = fs.startLocked(id, addr)
		}
		f.set(ts)
	}
}

// retarget changes what the fetchers follow for the partitions of targets
// only: each follows its target's leader from now on, or nothing (leader
// NoLeader). The others' fetchers go on as they were: a leader or ISR
// change touches one partition, and a broker following thousands need not
// rebuild every fetcher's set for it. Leaders' addresses change only in
// full rounds (update).
func (fs *fetchers) retarget(targets map[cluster.TopicPartition]followTarget) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for id, f := range fs.by {
		var gone []cluster.TopicPartition
		for tp, t := range targets {
			if t.leader != id {
				gone = append(gone, tp)
			}
		}
		if f.leave(gone) == 0 {
			f.cancel()
			delete(fs.by, id)
		}
	}
	byLeader := map[int32]map[cluster.TopicPartition]followTarget{}
	for tp, t := range targets {
		if t.leader == cluster.NoLeader {
			continue
		}
		if byLeader[t.leader] == nil {
			byLeader[t.leader] = map[cluster.TopicPartition]followTarget{}
		}
		byLeader[t.leader][tp] = t
	}
	for id, ts := range byLeader {
		f := fs.by[id]
		if f == nil {
			var addr string
			for _, t := range ts {
				addr = t.addr
			}
			f = fs.startLocked(id, addr)
		}
		f.add(ts)
	}
}

// startLocked starts the fetcher of leader id at addr and records it;
// fs.mu is held.
func (fs *fetchers) startLocked(id int32, addr string) *fetcher {
	f := newFetcher(fs.b, id, addr)
	fs.by[id] = f
	fs.wg.Add(1)
	go func() {
		defer fs.wg.Done()
		f.run()
	}()
	return f
}

// stop ends every fetcher and waits for them.
func (fs *fetchers) stop() {
	fs.mu.Lock()
	for id, f := range fs.by {
		f.cancel()
		delete(fs.by, id)
	}
	fs.mu.Unlock()
	fs.wg.Wait()
}

// followed is one partition a fetcher follows.
type followed struct {
	p     *partition
	epoch int32
	// prepared: truncated for this epoch and position sent on the current
	// stream; reported: the last position sent, at sentAt.
	prepared bool
	reported int64
	sentAt   time.Time
	// pausedUntil holds back a partition the leader refused for now.
	pausedUntil time.Time
}

// fetcher follows the partitions one broker leads.
type fetcher struct {
	b      *Broker
	leader int32
	addr   string
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	// keepalive is followerKeepalive of the broker's
	// replica.lag.time.max.
	keepalive time.Duration

	mu    sync.Mutex
	parts map[cluster.TopicPartition]*followed
	// due are the partitions the next round looks at: those not prepared
	// yet (new, in a new epoch, paused), those whose position may move
	// without a chunk (appended, not yet durable under flush.policy
	// always) and those a metadata change touched. Every other one is
	// looked at only by the keepalive round, so a round over thousands of
	// idle partitions costs nothing per partition.
	due map[cluster.TopicPartition]*followed
	// keptAlive is when the last keepalive round looked at every
	// partition.
	keptAlive time.Time
	stops     []cluster.TopicPartition // partitions to tell the leader we left
	kick      chan struct{}
}

func newFetcher(b *Broker, leader int32, addr string) *fetcher {
	ctx, cancel := context.WithCancel(b.life)
	return &fetcher{b: b, leader: leader, addr: addr, log: b.log.With("leader", leader), ctx: ctx, cancel: cancel,
		keepalive: followerKeepalive(time.Duration(b.cfg.Replica.LagTimeMax)),
		parts:     map[cluster.TopicPartition]*followed{}, due: map[cluster.TopicPartition]*followed{}, kick: make(chan struct{}, 1)}
}

// set replaces the partitions followed; a partition whose epoch changed is
// prepared again.
func (f *fetcher) set(ts map[cluster.TopicPartition]followTarget) {
	f.mu.Lock()
	for tp, fo := range f.parts {
		t, ok := ts[tp]
		if !ok || t.p != fo.p {
			delete(f.parts, tp)
			delete(f.due, tp)
			f.stops = append(f.stops, tp)
		}
	}
	for tp, t := range ts {
		fo := f.parts[tp]
		if fo == nil {
			fo = &followed{p: t.p, epoch: t.epoch, reported: -1}
			f.parts[tp] = fo
			f.due[tp] = fo
		} else if fo.epoch != t.epoch {
			fo.epoch, fo.prepared, fo.pausedUntil = t.epoch, false, time.Time{}
			f.due[tp] = fo
		}
	}
	f.mu.Unlock()
	f.poke()
}

// add follows the partitions of ts besides those followed already; one
// followed in another epoch is prepared again.
func (f *fetcher) add(ts map[cluster.TopicPartition]followTarget) {
	f.mu.Lock()
	for tp, t := range ts {
		fo := f.parts[tp]
		switch {
		case fo == nil:
			fo = &followed{p: t.p, epoch: t.epoch, reported: -1}
			f.parts[tp] = fo
		case fo.p != t.p:
			f.stops = append(f.stops, tp)
			fo = &followed{p: t.p, epoch: t.epoch, reported: -1}
			f.parts[tp] = fo
		case fo.epoch != t.epoch:
			fo.epoch, fo.prepared, fo.pausedUntil = t.epoch, false, time.Time{}
		default:
			// Same epoch: an ISR change, say one that took this follower
			// out. Its position goes at once, not at the keepalive, so
			// that a leader that may ask it back hears from it.
			fo.sentAt = time.Time{}
		}
		f.due[tp] = fo
	}
	f.mu.Unlock()
	f.poke()
}

// leave stops following the partitions of gone it follows, and returns
// how many it still follows.
func (f *fetcher) leave(gone []cluster.TopicPartition) int {
	f.mu.Lock()
	left := false
	for _, tp := range gone {
		if _, ok := f.parts[tp]; ok {
			delete(f.parts, tp)
			delete(f.due, tp)
			f.stops = append(f.stops, tp)
			left = true
		}
	}
	n := len(f.parts)
	f.mu.Unlock()
	if left {
		f.poke()
	}
	return n
}

func (f *fetcher) poke() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// run keeps a stream to the leader open until cancelled.
func (f *fetcher) run() {
	backoff := 50 * time.Millisecond
	for f.ctx.Err() == nil {
		err := f.session()
		if f.ctx.Err() != nil {
			return
		}
		f.log.Debug("replication stream ended; reconnecting", "err", err, "backoff", backoff)
		select {
		case <-f.ctx.Done():
			return
		case <-time.After(backoff/2 + time.Duration(rand.Int64N(int64(backoff)))):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// session is one stream: it sends positions as partitions are prepared or
// move, and applies what the leader sends, on a goroutine of its own that
// session ends (cancelling the stream) and waits for before it returns.
func (f *fetcher) session() error {
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	stream, err := f.b.peers.Replicate(ctx, Peer{ID: f.leader, Addr: f.addr})
	if err != nil {
		return err
	}
	f.mu.Lock()
	for tp, fo := range f.parts {
		fo.prepared, fo.reported = false, -1 // a new stream knows nothing
		f.due[tp] = fo
	}
	f.stops = nil
	f.mu.Unlock()
	var sendMu sync.Mutex
	send := func(positions []ReplicaPosition) error {
		if len(positions) == 0 {
			return nil
		}
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(ReplicaUpdate{FollowerID: f.b.id, Positions: positions})
	}
	recvErr := make(chan error, 1)
	received := make(chan struct{})
	defer func() {
		cancel() // the stream's Recv and Send return
		<-received
	}()
	go func() {
		defer close(received)
		for {
			chunk, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			pos, ok := f.apply(chunk)
			if chunk.Release != nil {
				chunk.Release()
			}
			if ok {
				if err := send([]ReplicaPosition{pos}); err != nil {
					recvErr <- err
					return
				}
			}
		}
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := send(f.pending(ctx)); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-recvErr:
			return err
		case <-f.kick:
		case <-tick.C:
		}
	}
}

// pending prepares partitions new in this stream or epoch and returns the
// positions to send: theirs, those whose log end moved without a report
// (a flush, say), those a metadata change touched, and partitions left.
// It looks at the due partitions only, except in a keepalive round (every
// half keepalive), which looks at all and also sends the positions last
// sent at least that long ago.
func (f *fetcher) pending(ctx context.Context) []ReplicaPosition {
	f.mu.Lock()
	var out []ReplicaPosition
	for _, tp := range f.stops {
		out = append(out, ReplicaPosition{Topic: tp.Topic, Partition: tp.Partition, Stop: true})
	}
	f.stops = nil
	type toPrepare struct {
		fo    *followed
		epoch int32
	}
	var prepare []toPrepare
	now := time.Now()
	every := f.keepalive / 2
	visit := f.due
	if now.Sub(f.keptAlive) >= every {
		visit, f.keptAlive = f.parts, now
	}
	f.due = make(map[cluster.TopicPartition]*followed, len(f.due))
	for tp, fo := range visit {
		if now.Before(fo.pausedUntil) || !fo.prepared {
			f.due[tp] = fo // until prepared
			if !now.Before(fo.pausedUntil) {
				prepare = append(prepare, toPrepare{fo, fo.epoch})
			}
			continue
		}
		end := fo.p.committedEnd()
		if positionDue(end, fo.reported, fo.sentAt, now, every) {
			fo.reported, fo.sentAt = end, now
			out = append(out, fo.position(end))
		}
		if end < fo.p.log.LogEndOffset() {
			f.due[tp] = fo // a flush will move it
		}
	}
	f.mu.Unlock()
	for _, tp := range prepare {
		fo := tp.fo
		if err := f.prepare(ctx, fo, tp.epoch); err != nil {
			f.log.Debug("cannot follow yet", "partition", fo.p.name(), "err", err)
			f.mu.Lock()
			fo.pausedUntil = time.Now().Add(200 * time.Millisecond)
			f.mu.Unlock()
			continue
		}
		f.mu.Lock()
		// Prepared for the epoch it was truncated for, not one set started
		// meanwhile: that one is prepared in a later round.
		if cur := f.parts[cluster.TopicPartition{Topic: fo.p.topic, Partition: fo.p.id}]; cur == fo && fo.epoch == tp.epoch {
			fo.prepared = true
			fo.reported, fo.sentAt = fo.p.committedEnd(), time.Now()
			out = append(out, fo.position(fo.reported))
		}
		f.mu.Unlock()
	}
	return out
}

func (fo *followed) position(end int64) ReplicaPosition {
	return ReplicaPosition{Topic: fo.p.topic, TopicID: fo.p.topicID, Partition: fo.p.id, LeaderEpoch: fo.epoch, LogEnd: end}
}

// maxTruncationRounds bounds the rounds of a follower's truncation: each
// one removes at least one epoch from its history, so a log with more
// epochs than this is cut in several preparations.
const maxTruncationRounds = 64

// prepare truncates the follower's log by leader epoch before it follows
// the leader in epoch (truncation.go).
func (f *fetcher) prepare(ctx context.Context, fo *followed, epoch int32) error {
	return truncateByEpoch(fo.p, f.leader, epoch, func(epoch int32) (EpochEnd, error) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return f.b.peers.EndOffsetForEpoch(rctx, Peer{ID: f.leader, Addr: f.addr},
			EpochQuery{Topic: fo.p.topic, TopicID: fo.p.topicID, Partition: fo.p.id, Epoch: epoch})
	}, f.log)
}

// truncateByEpoch runs the rounds of a follower's truncation: it asks the
// leader (ask) about its latest epoch and cuts, until the two agree.
func truncateByEpoch(p *partition, leader, epoch int32, ask func(epoch int32) (EpochEnd, error), logger *slog.Logger) error {
	for range maxTruncationRounds {
		latest := p.log.LatestEpoch()
		if latest == hotlog.UndefinedEpoch {
			return nil // nothing written under any leader: nothing to cut
		}
		ans, err := ask(latest)
		if err != nil {
			return err
		}
		if done, err := p.truncationRound(leader, epoch, latest, ans, logger); err != nil || done {
			return err
		}
	}
	return fmt.Errorf("broker: %s: truncation did not settle in %d rounds", p.name(), maxTruncationRounds)
}

// truncationRound cuts the follower's log, following leader in epoch, by
// the leader's answer ans about its latest epoch asked (truncation.go), and
// says whether the truncation is complete.
func (p *partition) truncationRound(leader, epoch, asked int32, ans EpochEnd, logger *slog.Logger) (bool, error) {
	before := p.log.LogEndOffset()
	cut, done := truncationStep(p.log, before, p.log.HighWatermark(), ans)
	end, err := p.truncateAsFollower(leader, epoch, cut)
	if err != nil {
		return false, err
	}
	if end < before {
		logger.Info("truncated a suffix the leader does not have", "partition", p.name(), "from", before, "to", end,
			"epoch", epoch, "asked_epoch", asked, "leader_epoch", ans.Epoch, "leader_end", ans.EndOffset)
	}
	return done, nil
}

// apply appends what the leader sent and returns the position to report.
// What it needs of fo is read under f.mu, once: set may start a new epoch
// meanwhile, and a chunk must be applied, or refused, in the epoch it was
// checked against.
func (f *fetcher) apply(chunk ReplicaChunk) (ReplicaPosition, bool) {
	tp := cluster.TopicPartition{Topic: chunk.Topic, Partition: chunk.Partition}
	f.mu.Lock()
	fo := f.parts[tp]
	var epoch int32
	prepared := false
	if fo != nil {
		epoch, prepared = fo.epoch, fo.prepared
	}
	f.mu.Unlock()
	if !prepared || fo.p.topicID != chunk.TopicID {
		return ReplicaPosition{}, false
	}
	p := fo.p
	switch chunkStep(chunk, epoch, p.committedEnd()) {
	case chunkDrop:
		return ReplicaPosition{}, false
	case chunkReprepare:
		f.unprepare(fo, epoch, chunkPause)
		return ReplicaPosition{}, false
	case chunkReset:
		// Behind the leader's local log: what is missing is in the cold
		// tier or gone; continue from the leader's local start.
		if err := p.resetAsFollower(f.leader, epoch, chunk.LogStart); err != nil {
			f.log.Warn("cannot move the log to the leader's start", "partition", p.name(), "err", err)
			return ReplicaPosition{}, false
		}
		return f.report(fo, epoch, p.committedEnd(), true)
	}
	p.takeTombstoneFloor(f.leader, epoch, chunk.TombstoneFloor)
	err := p.appendAsFollower(f.leader, epoch, chunk.ReadFrom, chunk.Batches, chunk.HighWatermark)
	switch appendStep(err) {
	case appendReportAgain:
		return f.report(fo, epoch, p.committedEnd(), true)
	case appendDrop:
		return ReplicaPosition{}, false
	case appendFailed:
		f.log.Warn("appending replicated batches failed", "partition", p.name(), "err", err)
		f.unprepare(fo, epoch, appendPause)
		return ReplicaPosition{}, false
	}
	return f.report(fo, epoch, p.committedEnd(), false)
}

// unprepare makes fo be prepared again after pause, if it still follows
// epoch.
func (f *fetcher) unprepare(fo *followed, epoch int32, pause time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fo.epoch == epoch {
		fo.prepared, fo.pausedUntil = false, time.Now().Add(pause)
		f.markDueLocked(fo)
	}
}

// report returns the position end to send for fo in epoch: if fo still
// follows that epoch, and the position moved or always says to send it.
// A position that may still move without a chunk (appended, not yet
// durable) makes fo due, so that the next round sends it once it moves.
func (f *fetcher) report(fo *followed, epoch int32, end int64, always bool) (ReplicaPosition, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if end < fo.p.log.LogEndOffset() {
		f.markDueLocked(fo)
	}
	if fo.epoch != epoch || !fo.prepared || (end == fo.reported && !always) {
		return ReplicaPosition{}, false
	}
	fo.reported, fo.sentAt = end, time.Now()
	return fo.position(end), true
}

// markDueLocked makes the next round look at fo, if it is still followed;
// f.mu is held.
func (f *fetcher) markDueLocked(fo *followed) {
	tp := cluster.TopicPartition{Topic: fo.p.topic, Partition: fo.p.id}
	if f.parts[tp] == fo {
		f.due[tp] = fo
	}
}
