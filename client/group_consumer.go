package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// GroupConsumer is a member of a consumer group: the group's members share
// the partitions of the topics they subscribe to, and Poll returns records
// of the partitions this member owns now.
//
// A background heartbeat keeps the membership alive and learns of
// rebalances; the partitions themselves change hands inside Poll, on the
// caller's goroutine, so callbacks never run while the application is
// still processing records Poll returned:
//
//   - a partition the member must give up is revoked: OnRevoked runs, its
//     position is committed, it stops, and only then does the coordinator
//     give it to another member;
//   - a partition it is given starts from the group's committed offset (or
//     WithGroupStartAt when there is none), and OnAssigned runs;
//   - when the member learns it was removed from the group (it missed its
//     session timeout, or could not reach the coordinator for that long),
//     its partitions stop at once, OnLost runs without committing (another
//     member may own them already), and it joins again.
//
// With auto-commit (the default, every 5 s) Poll commits the positions of
// what earlier Polls returned, and so do a revocation and Close: a member
// killed without Close reads again, when it or another member restarts,
// only what came after its last commit. Poll and Close are for one
// goroutine; Commit and the accessors are safe anywhere.
type GroupConsumer struct {
	c      *Client
	cfg    groupConfig
	group  string
	topics []string
	k      *Consumer

	// reconcile serialises changes to the owned set: Poll's handovers and
	// the heartbeat's handling of a lost membership.
	reconcile sync.Mutex
	// signal wakes a waiting Poll when there is something to reconcile.
	signal chan struct{}
	// beat wakes the heartbeat loop after a handover, so the coordinator
	// hears at once.
	beat chan struct{}

	mu struct {
		sync.Mutex
		memberID string
		epoch    int32
		interval time.Duration
		owned    map[TopicPartition]bool
		target   []TopicPartition // latest assignment from the coordinator
		pending  int              // of the target, still held by others
		// committed holds the group's positions of the target partitions,
		// from the coordinator's latest answer.
		committed map[TopicPartition]int64
		lost      []TopicPartition // lost since the last Poll, for OnLost
		err       error            // a heartbeat error Poll should report
		// answered is the send time of the latest answered heartbeat:
		// the member's session at the coordinator ends no sooner than
		// a session timeout after it.
		answered time.Time
		closed   bool
	}
	lastCommit time.Time // Poll's goroutine only

	stop   context.CancelFunc
	loopWG sync.WaitGroup
}

// NewGroupConsumer joins group as a member subscribing to topics. The
// membership starts in the background; Poll returns records once
// partitions are assigned.
func (c *Client) NewGroupConsumer(group string, topics []string, opts ...GroupOption) (*GroupConsumer, error) {
	cfg := defaultGroupConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("strata: new group consumer: %w", err)
	}
	if group == "" {
		return nil, fmt.Errorf("strata: new group consumer: %w", configError("group", `""`, "a group name"))
	}
	if len(topics) == 0 {
		return nil, fmt.Errorf("strata: new group consumer: %w", configError("topics", "[]", "at least one topic"))
	}
	// A committed position that retention has deleted since resumes where
	// a partition without one starts, unless WithConsumerOptions says
	// otherwise (options apply in order).
	consumerOpts := cfg.consumer
	if cfg.startAt.kind != specOffset {
		consumerOpts = append([]ConsumerOption{WithResetOnOutOfRange(cfg.startAt)}, consumerOpts...)
	}
	g := &GroupConsumer{c: c, cfg: cfg, group: group, topics: slices.Clone(topics),
		k: c.NewConsumer(consumerOpts...), signal: make(chan struct{}, 1), beat: make(chan struct{}, 1)}
	if g.k.cfgErr != nil {
		return nil, g.k.cfgErr
	}
	g.mu.owned = map[TopicPartition]bool{}
	g.mu.interval = cfg.sessionTimeout / 3
	g.lastCommit = time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	g.stop = cancel
	g.loopWG.Add(1)
	go g.heartbeatLoop(ctx)
	return g, nil
}

// MemberID returns the id the coordinator gave this member, "" while it
// is joining.
func (g *GroupConsumer) MemberID() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.memberID
}

// Assignment returns the partitions this member owns now, sorted.
func (g *GroupConsumer) Assignment() []TopicPartition {
	g.mu.Lock()
	defer g.mu.Unlock()
	return sortedPartitions(g.mu.owned)
}

// Position returns the offset of the next record Poll will return for an
// owned partition, or -1.
func (g *GroupConsumer) Position(topic string, partition int32) int64 {
	return g.k.Position(topic, partition)
}

// Poll returns records of the partitions this member owns, waiting until
// there are some or ctx ends. It first carries out any rebalance the
// coordinator asked for (running the callbacks) and, when due, commits.
func (g *GroupConsumer) Poll(ctx context.Context) ([]*Record, error) {
	for {
		if err := g.handover(ctx); err != nil {
			return nil, err
		}
		if err := g.autoCommit(ctx); err != nil {
			return nil, err
		}
		recs, err := g.k.poll(ctx, g.signal)
		if errors.Is(err, errInterrupted) {
			continue
		}
		if len(recs) > 0 && g.sessionOver() {
			// The member was silent for its session (its process was
			// stopped, say) and Poll ran before the heartbeat noticed: the
			// coordinator may have given these partitions to others, so
			// their records are not this member's to hand out.
			g.lose(fmt.Errorf("no answer from the group coordinator for the session timeout (%v)", g.cfg.sessionTimeout))
			continue
		}
		if errors.Is(err, io.EOF) && !g.settled() {
			// WithStopAtEnd: the end is the end of every partition this
			// member will own, so not before it has them all.
			if err := g.waitSignal(ctx, 100*time.Millisecond); err != nil {
				return nil, err
			}
			continue
		}
		return recs, err
	}
}

// sessionOver reports whether the member has joined and its session timeout
// has passed since its latest answered heartbeat was sent.
func (g *GroupConsumer) sessionOver() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.epoch != 0 && !g.mu.answered.IsZero() && time.Since(g.mu.answered) >= g.cfg.sessionTimeout
}

// settled reports whether the member has joined and owns its whole target.
func (g *GroupConsumer) settled() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.epoch == 0 || g.mu.pending > 0 || len(g.mu.target) != len(g.mu.owned) {
		return false
	}
	for _, tp := range g.mu.target {
		if !g.mu.owned[tp] {
			return false
		}
	}
	return true
}

func (g *GroupConsumer) waitSignal(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-g.signal:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return wrapOp("poll", ctx.Err())
	}
}

// handover makes the owned set match the coordinator's latest assignment.
func (g *GroupConsumer) handover(ctx context.Context) error {
	g.reconcile.Lock()
	defer g.reconcile.Unlock()
	g.mu.Lock()
	if g.mu.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	lost := g.mu.lost
	g.mu.lost = nil
	herr := g.mu.err
	g.mu.err = nil
	target := make(map[TopicPartition]bool, len(g.mu.target))
	for _, tp := range g.mu.target {
		target[tp] = true
	}
	var revoke, add []TopicPartition
	for tp := range g.mu.owned {
		if !target[tp] {
			revoke = append(revoke, tp)
		}
	}
	for tp := range target {
		if !g.mu.owned[tp] {
			add = append(add, tp)
		}
	}
	g.mu.Unlock()
	sortTPs(revoke)
	sortTPs(add)

	if len(lost) > 0 && g.cfg.onLost != nil {
		g.cfg.onLost(ctx, lost)
	}
	if herr != nil {
		return herr
	}
	if len(revoke) > 0 {
		if g.cfg.onRevoked != nil {
			g.cfg.onRevoked(ctx, revoke)
		}
		if g.cfg.autoCommitInterval > 0 {
			if err := g.commitPositions(ctx, revoke); err != nil {
				g.c.log.Warn("strata: commit on revoke failed", "group", g.group, "partitions", revoke, "err", err)
			}
		}
		for _, tp := range revoke {
			g.k.Unassign(tp.Topic, tp.Partition)
		}
		g.mu.Lock()
		for _, tp := range revoke {
			delete(g.mu.owned, tp)
		}
		g.mu.Unlock()
	}
	if len(add) > 0 {
		g.mu.Lock()
		committed := g.mu.committed
		g.mu.Unlock()
		for _, tp := range add {
			from := g.cfg.startAt
			if off, ok := committed[tp]; ok {
				from = AtOffset(off)
			}
			if err := g.k.Assign(tp.Topic, tp.Partition, from); err != nil {
				return err
			}
		}
		g.mu.Lock()
		for _, tp := range add {
			g.mu.owned[tp] = true
		}
		g.mu.Unlock()
		if g.cfg.onAssigned != nil {
			g.cfg.onAssigned(ctx, add)
		}
	}
	if len(revoke) > 0 || len(add) > 0 {
		g.wakeHeartbeat()
	}
	return nil
}

func (g *GroupConsumer) autoCommit(ctx context.Context) error {
	if g.cfg.autoCommitInterval <= 0 || time.Since(g.lastCommit) < g.cfg.autoCommitInterval {
		return nil
	}
	g.lastCommit = time.Now()
	err := g.Commit(ctx)
	switch {
	case errors.Is(err, ErrFencedMember) || errors.Is(err, ErrUnknownMember):
		// A rebalance is under way; the handover commits what it must.
		g.c.log.Debug("strata: auto-commit refused during a rebalance", "group", g.group, "err", err)
		return nil
	case errors.Is(err, ErrCommitOutcomeUnknown):
		// The coordinator went silent or moved; the next commit settles it.
		g.c.log.Warn("strata: auto-commit outcome unknown", "group", g.group, "err", err)
		return nil
	}
	return err
}

// Commit commits the position of every partition this member owns: the
// offset after the last record Poll returned.
func (g *GroupConsumer) Commit(ctx context.Context) error {
	return g.commitPositions(ctx, g.Assignment())
}

func (g *GroupConsumer) commitPositions(ctx context.Context, tps []TopicPartition) error {
	offsets := make(map[TopicPartition]int64, len(tps))
	for _, tp := range tps {
		if pos := g.k.Position(tp.Topic, tp.Partition); pos >= 0 {
			offsets[tp] = pos
		}
	}
	return g.CommitOffsets(ctx, offsets)
}

// CommitOffsets commits the given positions (the next offset to consume)
// as this member. Only partitions it owns may be committed: the
// coordinator refuses the others with ErrFencedMember, and nothing is
// committed then.
//
// It gives up after half the session timeout (or two attempts of half a
// second, for a session under two seconds), however long ctx allows: a coordinator that stops answering is replaced within
// about a second, and a retry goes to its successor. When an attempt got
// no answer and no retry succeeded, the commit may have been applied or
// not, and the error is ErrCommitOutcomeUnknown rather than the retry's
// refusal (a new coordinator that does not know the member answers
// ErrUnknownMember to a commit its predecessor may have applied).
func (g *GroupConsumer) CommitOffsets(ctx context.Context, offsets map[TopicPartition]int64) error {
	if len(offsets) == 0 {
		return nil
	}
	op := fmt.Sprintf("commit offsets of group %q", g.group)
	g.mu.Lock()
	member, epoch := g.mu.memberID, g.mu.epoch
	g.mu.Unlock()
	if member == "" {
		return wrapOp(op, newError(codes.FailedPrecondition, "UNKNOWN_MEMBER", false, "the member is still joining the group"))
	}
	req := &stratav1.CommitOffsetsRequest{Group: g.group, MemberId: member, MemberEpoch: epoch, Offsets: committedOffsets(offsets)}
	per := g.c.groupCallTimeout(g.cfg.sessionTimeout)
	cctx, cancel := context.WithTimeout(ctx, g.commitTimeout())
	defer cancel()
	var unanswered, last error // the first attempt that may have been applied; the latest failure
	for attempt := 0; ; attempt++ {
		if attempt > 0 && sleepCtx(cctx, defaultBackoff.delay(attempt-1, retryAfter(last))) != nil {
			break
		}
		addr, err := g.c.groupCall(cctx, per, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := stratav1.NewOffsetServiceClient(cc).CommitOffsets(ctx, req)
			return err
		})
		if err == nil {
			return nil
		}
		last = err
		if unanswered == nil && mayHaveApplied(err) {
			unanswered = err
		}
		if cctx.Err() != nil || !IsRetriable(err) {
			break
		}
		if noAnswer(err) {
			g.c.findCoordinator(cctx, addr, per)
		}
		g.c.log.Debug("strata: retrying", "op", op, "attempt", attempt+1, "err", err)
	}
	switch {
	case unanswered != nil:
		return wrapOp(op, commitOutcomeUnknown(ctx, unanswered, last))
	case ctx.Err() != nil:
		return wrapOp(op, ctxError(ctx, last))
	}
	return wrapOp(op, last)
}

// commitTimeout bounds a commit, retries included: half the session
// timeout, at least two group calls' worth.
func (g *GroupConsumer) commitTimeout() time.Duration {
	return max(g.cfg.sessionTimeout/2, 2*g.c.groupCallTimeout(g.cfg.sessionTimeout))
}

// Close leaves the group: it revokes every partition (OnRevoked), commits
// their positions (with auto-commit), tells the coordinator it leaves, so
// its partitions move at once, and stops. A coordinator that does not
// answer does not hold it: the commit gives up as CommitOffsets does, and
// the leave after one attempt bounded by a quarter of the session timeout
// (the coordinator then removes the member when its session expires), so
// Close returns within about three quarters of the session timeout plus
// the time OnRevoked takes, however long ctx allows.
func (g *GroupConsumer) Close(ctx context.Context) error {
	g.mu.Lock()
	if g.mu.closed {
		g.mu.Unlock()
		return nil
	}
	g.mu.closed = true
	g.mu.Unlock()
	// The heartbeat loop stops first, outside the reconcile lock: when it
	// finds the membership lost it takes that lock itself (lose).
	g.stop()
	g.loopWG.Wait()

	g.reconcile.Lock()
	defer g.reconcile.Unlock()
	g.mu.Lock()
	owned := sortedPartitions(g.mu.owned)
	member := g.mu.memberID
	g.mu.Unlock()
	var errs []error
	if len(owned) > 0 {
		if g.cfg.onRevoked != nil {
			g.cfg.onRevoked(ctx, owned)
		}
		if g.cfg.autoCommitInterval > 0 {
			errs = append(errs, g.commitPositions(ctx, owned))
		}
	}
	g.mu.Lock()
	g.mu.owned = map[TopicPartition]bool{}
	g.mu.Unlock()
	if member != "" {
		// One attempt: a coordinator that does not answer lets the
		// session expire instead.
		_, _, err := g.heartbeat(ctx, &stratav1.GroupHeartbeatRequest{Group: g.group, MemberId: member, MemberEpoch: -1}, 0)
		errs = append(errs, err)
	}
	errs = append(errs, g.k.Close())
	return errors.Join(errs...)
}

// heartbeatLoop keeps the membership: one heartbeat at a time, each held by
// the coordinator while nothing changes, so a rebalance arrives at once.
//
// A member that has not had a heartbeat answered for its session timeout
// (counted from when that heartbeat was sent, which is before the
// coordinator saw it) has been removed by the coordinator, which may have
// given its partitions to others: it stops them at once (lose) and joins
// again. No heartbeat waits past that moment, so a coordinator that stops
// answering cannot keep the member fetching beyond its session.
func (g *GroupConsumer) heartbeatLoop(ctx context.Context) {
	defer g.loopWG.Done()
	lastOK := time.Now() // send time of the latest answered heartbeat
	failures := 0
	per := g.c.groupCallTimeout(g.cfg.sessionTimeout)
	for ctx.Err() == nil {
		g.mu.Lock()
		req := &stratav1.GroupHeartbeatRequest{
			Group: g.group, MemberId: g.mu.memberID, MemberEpoch: g.mu.epoch,
			SessionTimeoutMs: int32(g.cfg.sessionTimeout / time.Millisecond), RebalanceTimeoutMs: int32(g.cfg.rebalanceTimeout / time.Millisecond),
			Assignor: g.cfg.assignor, ClientId: g.cfg.clientID, Owned: toProtoTPs(g.mu.owned),
		}
		joined := g.mu.epoch != 0
		if !joined {
			req.Topics = g.topics
			req.NoWait = true
		}
		interval := g.mu.interval
		g.mu.Unlock()

		// What is left of the session; a member still joining has none
		// to lose.
		left := time.Duration(0)
		if joined {
			if left = g.cfg.sessionTimeout - time.Since(lastOK); left <= 0 {
				g.lose(fmt.Errorf("no answer from the group coordinator for %v", time.Since(lastOK).Round(time.Millisecond)))
				lastOK = time.Now()
				continue
			}
		}
		sent := time.Now()
		addr, resp, err := g.heartbeat(ctx, req, left)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			lastOK, failures = sent, 0
			g.mu.Lock()
			g.mu.answered = sent
			g.mu.Unlock()
			if g.answer(resp) {
				// Poll has a handover to make: beat again once it has, or
				// after the interval, whichever comes first.
				g.waitBeat(ctx, interval)
			}
		case errors.Is(err, ErrUnknownMember) || errors.Is(err, ErrFencedMember):
			g.lose(err)
		default:
			failures++
			if joined && time.Since(lastOK) >= g.cfg.sessionTimeout {
				// The coordinator has removed this member by now: the
				// partitions may belong to others already.
				g.lose(fmt.Errorf("no answer from the group coordinator for %v: %w", time.Since(lastOK).Round(time.Millisecond), err))
				lastOK = time.Now()
			} else if !IsRetriable(err) {
				g.report(err)
			}
			if noAnswer(err) {
				// Ask the rest of the cluster where the coordinator is now;
				// that took a while, so no backoff on top.
				g.c.findCoordinator(ctx, addr, per)
				continue
			}
			wait := defaultBackoff.delay(min(failures, 5), retryAfter(err))
			if joined {
				wait = min(wait, max(g.cfg.sessionTimeout-time.Since(lastOK), 0))
			}
			_ = sleepCtx(ctx, wait)
		}
	}
}

// heartbeat sends one heartbeat to the coordinator, waiting at most for
// the time the coordinator may hold it plus a group call's bound, and never
// longer than limit when limit > 0 (what is left of the session). It
// returns the broker it went to.
func (g *GroupConsumer) heartbeat(ctx context.Context, req *stratav1.GroupHeartbeatRequest, limit time.Duration) (string, *stratav1.GroupHeartbeatResponse, error) {
	hold := time.Duration(0)
	if !req.GetNoWait() && req.GetMemberEpoch() > 0 {
		g.mu.Lock()
		hold = g.mu.interval
		g.mu.Unlock()
	}
	timeout := hold + g.c.groupCallTimeout(g.cfg.sessionTimeout)
	if limit > 0 {
		timeout = min(timeout, limit)
	}
	var resp *stratav1.GroupHeartbeatResponse
	addr, err := g.c.groupCall(ctx, timeout, func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewGroupServiceClient(cc).GroupHeartbeat(ctx, req)
		return err
	})
	return addr, resp, wrapOp(fmt.Sprintf("heartbeat to group %q", g.group), err)
}

// answer takes in a heartbeat answer; it reports whether Poll has a
// handover to make.
func (g *GroupConsumer) answer(resp *stratav1.GroupHeartbeatResponse) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.memberID = resp.GetMemberId()
	g.mu.epoch = resp.GetMemberEpoch()
	if ms := resp.GetHeartbeatIntervalMs(); ms > 0 {
		g.mu.interval = time.Duration(ms) * time.Millisecond
	}
	g.mu.target = g.mu.target[:0]
	g.mu.pending = int(resp.GetPending())
	g.mu.committed = make(map[TopicPartition]int64, len(resp.GetCommitted()))
	for _, o := range resp.GetCommitted() {
		g.mu.committed[TopicPartition{o.GetTopic(), o.GetPartition()}] = o.GetOffset()
	}
	same := len(resp.GetAssigned()) == len(g.mu.owned)
	for _, tp := range resp.GetAssigned() {
		t := TopicPartition{tp.GetTopic(), tp.GetPartition()}
		g.mu.target = append(g.mu.target, t)
		same = same && g.mu.owned[t]
	}
	if !same {
		g.wakePoll()
	}
	return !same
}

// lose handles a membership the coordinator no longer knows: every
// partition stops now (another member may own it already), OnLost runs in
// the next Poll, and the member joins again.
func (g *GroupConsumer) lose(cause error) {
	g.reconcile.Lock()
	defer g.reconcile.Unlock()
	g.mu.Lock()
	lost := sortedPartitions(g.mu.owned)
	g.mu.owned = map[TopicPartition]bool{}
	g.mu.target, g.mu.pending = nil, 0
	g.mu.memberID, g.mu.epoch = "", 0
	g.mu.lost = append(g.mu.lost, lost...)
	g.mu.Unlock()
	for _, tp := range lost {
		g.k.Unassign(tp.Topic, tp.Partition)
	}
	g.c.log.Warn("strata: group membership lost; joining again", "group", g.group, "partitions", len(lost), "err", cause)
	g.wakePoll()
}

func (g *GroupConsumer) report(err error) {
	g.mu.Lock()
	g.mu.err = err
	g.mu.Unlock()
	g.wakePoll()
}

func (g *GroupConsumer) wakePoll() {
	select {
	case g.signal <- struct{}{}:
	default:
	}
}

func (g *GroupConsumer) wakeHeartbeat() {
	select {
	case g.beat <- struct{}{}:
	default:
	}
}

func (g *GroupConsumer) waitBeat(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-g.beat:
	case <-t.C:
	case <-ctx.Done():
	}
}

func toProtoTPs(set map[TopicPartition]bool) []*stratav1.TopicPartition {
	out := make([]*stratav1.TopicPartition, 0, len(set))
	for _, tp := range sortedPartitions(set) {
		out = append(out, &stratav1.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	}
	return out
}

func sortedPartitions(set map[TopicPartition]bool) []TopicPartition {
	out := make([]TopicPartition, 0, len(set))
	for tp := range set {
		out = append(out, tp)
	}
	sortTPs(out)
	return out
}

func sortTPs(tps []TopicPartition) { slices.SortFunc(tps, compareTPs) }

func compareTPs(a, b TopicPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}
