package broker

// The follower's side of replication. For every broker it follows, a
// fetcher keeps one stream open and says, per partition, where its log
// ends. Before it follows a partition in a new leader epoch it asks the
// leader where its own latest epoch ended in the leader's log and cuts its
// log there, so a suffix written under a deposed leader never survives a
// failover. Batches from the leader are appended as they come (fsynced as
// the topic's flush policy says) and acknowledged with the new log end.

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// followTarget says that a partition is to be followed from a leader in an
// epoch.
type followTarget struct {
	p      *partition
	leader int32
	addr   string
	epoch  int32
}

// fetchers runs one fetcher per leader broker.
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
			f = newFetcher(fs.b, id, addr)
			fs.by[id] = f
			fs.wg.Add(1)
			go func() {
				defer fs.wg.Done()
				f.run()
			}()
		}
		f.set(ts)
	}
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
	// stream; reported: the last position sent.
	prepared bool
	reported int64
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

	mu    sync.Mutex
	parts map[cluster.TopicPartition]*followed
	stops []cluster.TopicPartition // partitions to tell the leader we left
	kick  chan struct{}
}

func newFetcher(b *Broker, leader int32, addr string) *fetcher {
	ctx, cancel := context.WithCancel(context.Background())
	return &fetcher{b: b, leader: leader, addr: addr, log: b.log.With("leader", leader), ctx: ctx, cancel: cancel,
		parts: map[cluster.TopicPartition]*followed{}, kick: make(chan struct{}, 1)}
}

// set replaces the partitions followed; a partition whose epoch changed is
// prepared again.
func (f *fetcher) set(ts map[cluster.TopicPartition]followTarget) {
	f.mu.Lock()
	for tp, fo := range f.parts {
		t, ok := ts[tp]
		if !ok || t.p != fo.p {
			delete(f.parts, tp)
			f.stops = append(f.stops, tp)
		}
	}
	for tp, t := range ts {
		fo := f.parts[tp]
		if fo == nil {
			f.parts[tp] = &followed{p: t.p, epoch: t.epoch, reported: -1}
		} else if fo.epoch != t.epoch {
			fo.epoch, fo.prepared, fo.pausedUntil = t.epoch, false, time.Time{}
		}
	}
	f.mu.Unlock()
	f.poke()
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
// move, and applies what the leader sends.
func (f *fetcher) session() error {
	client, err := f.b.peers.replication(f.leader, f.addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	stream, err := client.Replicate(ctx)
	if err != nil {
		return err
	}
	f.mu.Lock()
	for _, fo := range f.parts {
		fo.prepared, fo.reported = false, -1 // a new stream knows nothing
	}
	f.stops = nil
	f.mu.Unlock()
	var sendMu sync.Mutex
	send := func(positions []*stratav1.ReplicaPosition) error {
		if len(positions) == 0 {
			return nil
		}
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(&stratav1.ReplicateRequest{FollowerId: f.b.id, Positions: positions})
	}
	recvErr := make(chan error, 1)
	go func() {
		for {
			chunk, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			if pos := f.apply(ctx, chunk); pos != nil {
				if err := send([]*stratav1.ReplicaPosition{pos}); err != nil {
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
// (an interval flush, say), and partitions left.
func (f *fetcher) pending(ctx context.Context) []*stratav1.ReplicaPosition {
	f.mu.Lock()
	var out []*stratav1.ReplicaPosition
	for _, tp := range f.stops {
		out = append(out, &stratav1.ReplicaPosition{Topic: tp.Topic, Partition: tp.Partition, Stop: true})
	}
	f.stops = nil
	var toPrepare []*followed
	now := time.Now()
	for _, fo := range f.parts {
		if now.Before(fo.pausedUntil) {
			continue
		}
		if !fo.prepared {
			toPrepare = append(toPrepare, fo)
			continue
		}
		if end := fo.p.committedEnd(); end != fo.reported {
			fo.reported = end
			out = append(out, fo.position(end))
		}
	}
	f.mu.Unlock()
	for _, fo := range toPrepare {
		if err := f.prepare(ctx, fo); err != nil {
			f.log.Debug("cannot follow yet", "partition", fo.p.name(), "err", err)
			f.mu.Lock()
			fo.pausedUntil = time.Now().Add(200 * time.Millisecond)
			f.mu.Unlock()
			continue
		}
		f.mu.Lock()
		if cur := f.parts[cluster.TopicPartition{Topic: fo.p.topic, Partition: fo.p.id}]; cur == fo {
			fo.prepared = true
			fo.reported = fo.p.committedEnd()
			out = append(out, fo.position(fo.reported))
		}
		f.mu.Unlock()
	}
	return out
}

func (fo *followed) position(end int64) *stratav1.ReplicaPosition {
	return &stratav1.ReplicaPosition{Topic: fo.p.topic, TopicId: fo.p.topicID, Partition: fo.p.id, LeaderEpoch: fo.epoch, LogEndOffset: end}
}

// prepare cuts the follower's log where its latest epoch ended in the
// leader's log, before it follows the leader in a new epoch.
func (f *fetcher) prepare(ctx context.Context, fo *followed) error {
	p := fo.p
	latest := p.log.LatestEpoch()
	if latest == hotlog.UndefinedEpoch {
		return nil // nothing written under any leader: nothing to cut
	}
	client, err := f.b.peers.replication(f.leader, f.addr)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := client.EndOffsetForEpoch(rctx, &stratav1.EndOffsetForEpochRequest{Topic: p.topic, TopicId: p.topicID, Partition: p.id, LeaderEpoch: latest})
	if err != nil {
		return err
	}
	cut := resp.EndOffset
	if resp.LeaderEpoch == hotlog.UndefinedEpoch {
		cut = p.log.HighWatermark() // the leader knows nothing of our epochs: keep only what was committed
	}
	if cut >= 0 && cut < p.log.LogEndOffset() {
		before := p.log.LogEndOffset()
		end, err := p.log.TruncateTo(max(cut, p.log.LogStartOffset()))
		p.producers.reset() // the batches it remembered may be gone
		if err != nil {
			return err
		}
		f.log.Info("truncated a suffix the new leader does not have", "partition", p.name(), "from", before, "to", end, "epoch", fo.epoch)
	}
	return nil
}

// apply appends what the leader sent and returns the position to report,
// or nil.
func (f *fetcher) apply(ctx context.Context, chunk *stratav1.ReplicateResponse) *stratav1.ReplicaPosition {
	tp := cluster.TopicPartition{Topic: chunk.Topic, Partition: chunk.Partition}
	f.mu.Lock()
	fo := f.parts[tp]
	f.mu.Unlock()
	if fo == nil || !fo.prepared || fo.p.topicID != chunk.TopicId {
		return nil
	}
	p := fo.p
	switch Reason(chunk.ErrorReason) {
	case "":
	case ReasonOffsetOutOfRange:
		// Behind the leader's local log: what is missing is in the cold tier
		// or gone; continue from the leader's local start.
		if p.log.LogEndOffset() < chunk.LogStartOffset {
			err := p.log.ResetTo(chunk.LogStartOffset)
			p.producers.reset()
			if err != nil {
				f.log.Warn("cannot move the log to the leader's start", "partition", p.name(), "err", err)
				return nil
			}
		}
		return fo.position(p.committedEnd())
	default:
		// Not (yet) the leader in this epoch: wait for the metadata, and ask
		// again a little later in case it was only starting.
		f.mu.Lock()
		fo.prepared, fo.pausedUntil = false, time.Now().Add(200*time.Millisecond)
		f.mu.Unlock()
		return nil
	}
	if len(chunk.Batches) > 0 {
		data := skipBelow(chunk.Batches, p.log.LogEndOffset())
		if len(data) > 0 {
			if _, err := p.log.AppendReplica(data); err != nil {
				if errors.Is(err, hotlog.ErrOffsetGap) {
					return fo.position(p.committedEnd()) // the leader restarts from our end
				}
				f.log.Warn("appending replicated batches failed", "partition", p.name(), "err", err)
				f.mu.Lock()
				fo.prepared, fo.pausedUntil = false, time.Now().Add(time.Second)
				f.mu.Unlock()
				return nil
			}
			for rest := data; len(rest) > 0; {
				b, next, err := record.Next(rest)
				if err != nil {
					break
				}
				p.producers.record(b)
				rest = next
			}
		}
	}
	p.log.SetHighWatermark(min(chunk.HighWatermark, p.log.LogEndOffset()))
	end := p.committedEnd()
	f.mu.Lock()
	defer f.mu.Unlock()
	if end == fo.reported {
		return nil
	}
	fo.reported = end
	return fo.position(end)
}

// skipBelow drops the leading batches of data that end below offset: a
// leader may resend what the follower already has after a reconnect.
func skipBelow(data []byte, offset int64) []byte {
	for len(data) > 0 {
		b, rest, err := record.Next(data)
		if err != nil || b.NextOffset() > offset {
			return data
		}
		data = rest
	}
	return data
}
