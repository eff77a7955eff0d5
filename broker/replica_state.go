package broker

// The replica state machine: what one broker's replica of a partition
// decides as leader or follower, without I/O and without a clock. The
// partition (partition.go) feeds it, under its lock, the metadata, its own
// log's figures and the time, and carries out what it answers: moving the
// high watermark, waking produces, asking the controller for an ISR change.
//
// The rules it keeps, each an invariant of the log:
//
//   - The high watermark of a leader is the smallest committed end among
//     its in-sync replicas (its own fsynced end, and what each in-sync
//     follower acknowledged in this leader epoch). It never goes back. A
//     follower that has not reported in this epoch holds it.
//   - While an ISR change is in flight, the high watermark counts the
//     maximal ISR, the old one and the proposed one together: a follower
//     being added must already have what is committed once the controller
//     applies the change, and one being removed still counts until it is
//     out.
//   - An acks=all produce waits for the high watermark to pass its last
//     offset in the leader epoch it was appended in. A change of epoch or
//     role ends every wait with NOT_LEADER: the batch may be truncated away
//     and its offsets given to other records. When the wait ends with the
//     batch committed, the ISR must still have min.insync.replicas members,
//     else NOT_ENOUGH_REPLICAS_AFTER_APPEND.
//   - A follower's report counts only as far as the leader can account
//     for it: its first report in an epoch (where its log stood after
//     truncation) no further than the leader's own log end, and each later
//     one no further than that or the end of what the leader has sent it
//     in this epoch. A report beyond is refused, not counted and not
//     clamped: a follower (or anyone who can open its stream) claiming
//     records it was never sent would move the high watermark past what
//     the ISR holds, and acks=all records would be lost with the leader.
//   - ISR changes name the partition epoch they were computed from; the
//     controller applies them only if it is still current, so two changes
//     made from the same state cannot both apply.
//   - A follower leaves the ISR once it has not been caught up for
//     replica.lag.time.max; it may join once it has every committed record
//     and everything since the leader's epoch began.
//   - A replica leads only in an epoch it saw begin. One that finds, when
//     its process starts, that it leads an epoch its log says it led before
//     (a restart the controller did not notice) does not take it up: a
//     crash may have cost its log a suffix that followers copied, and new
//     records at those offsets in the same epoch would not make the
//     followers cut theirs. It asks the controller for the next epoch.
//     (A partition without followers has nobody to disagree with: its
//     leader goes on at once.) Under flush.policy interval and never, a
//     replica whose process started and that has not shown since that it
//     holds every record committed before (unsure) does the same when it is
//     named the leader of a new epoch while other in-sync replicas exist:
//     a power cut may have taken acknowledged records they still hold.

import (
	"errors"
	"slices"
	"time"

	"github.com/strata-log/strata/cluster"
)

// replicaState is the state machine of one replica.
type replicaState struct {
	self int32
	info cluster.PartitionInfo
	// minISR is min.insync.replicas; lagMax is replica.lag.time.max.
	minISR int
	lagMax time.Duration
	// inherited is the leader epoch this replica found itself leading when
	// its process started, and led before that (-1 for none): it does not
	// lead in it, and asks for a new one.
	inherited int32
	// unsure says this process may have lost records it had before it
	// started (a power cut under flush.policy interval or never) and has
	// not shown since that it holds everything committed before: named
	// the leader while other in-sync replicas exist, it does not take the
	// lead but asks for a new epoch as a restarted leader does, which the
	// controller gives to another ISR member (restartSuccessor).
	unsure bool
	// toldFloor is, while following, the tombstone floor the leader last
	// sent in this epoch (0, none, until it does): see tombstoneFloor.
	toldFloor int64

	// The rest is the leader's, reset at every change of leader epoch.
	//
	// epochStart is the log end when this replica took the lead: the first
	// offset of its epoch. A follower joins the ISR only once it has it.
	epochStart int64
	followers  map[int32]*followerState
	// waiters are the acks=all produces waiting for the high watermark,
	// by last offset.
	waiters []*produceWaiter
	// pending is the ISR change sent to the controller and not yet seen
	// applied or refused.
	pending *isrChange
}

// followerState is what a leader knows of one follower in its epoch.
type followerState struct {
	// leo is the follower's log end as it last acknowledged it (counting
	// what its flush policy made durable); -1 until it reports.
	leo int64
	// caughtUpAt is when the follower last had everything the leader had;
	// heardAt when it last reported (followers report at least every
	// followerKeepalive, so a silent one is gone), zero again once it
	// leaves the ISR.
	caughtUpAt time.Time
	heardAt    time.Time
	// sentEnd and sentAt: the leader's log end when it last sent the
	// follower batches, and when. Once the follower acknowledges sentEnd,
	// it was caught up at sentAt.
	sentEnd int64
	sentAt  time.Time
	// limit is the furthest log end the leader can account for the
	// follower having in this epoch: where its first report said it stood,
	// raised by every batch and log start the leader sent it since. -1
	// until it first reports.
	limit int64
}

// produceWaiter is an acks=all produce waiting for its batch to commit.
type produceWaiter struct {
	last  int64 // the batch's last offset
	epoch int32 // the leader epoch it was appended in
	done  chan error
}

func newProduceWaiter(last int64, epoch int32) *produceWaiter {
	return &produceWaiter{last: last, epoch: epoch, done: make(chan error, 1)}
}

// isrChange is an ISR a leader asked the controller for.
type isrChange struct {
	isr            []int32
	leaderEpoch    int32
	partitionEpoch int32 // the partition epoch it was computed from
	sentAt         time.Time
}

// logView is what the state machine needs of the local log.
type logView struct {
	end       int64 // log end offset
	committed int64 // how far the log counts towards the high watermark
	hw        int64 // the high watermark as the log holds it
	// latestEpoch is the newest leader epoch in the log's history
	// (hotlog.UndefinedEpoch for none).
	latestEpoch int32
}

// completion is a produce wait that ended: err nil means committed.
type completion struct {
	w   *produceWaiter
	err error
}

// Outcomes the partition turns into errors.
type replicaRefusal int8

const (
	refusedNone replicaRefusal = iota
	refusedNotLeader
	refusedTakingTheLead // named the leader in an inherited epoch
	refusedNotEnoughReplicas
)

// A follower report the leader did not count, and why.
type reportRefusal int8

const (
	reportCounted reportRefusal = iota
	reportStale                 // another epoch, a replica it does not lead, or not a replica
	reportBeyond                // beyond what the leader holds or has sent the follower
)

// isrPendingTimeout is how long a leader waits for an ISR change to show
// up in its metadata before it may ask again: an answer can be lost.
const isrPendingTimeout = 5 * time.Second

// newReplicaState is a replica that has applied no metadata yet.
func newReplicaState(self int32, minISR int, lagMax time.Duration) *replicaState {
	s := &replicaState{self: self, minISR: minISR, lagMax: lagMax, inherited: -1}
	s.info.LeaderEpoch = -1
	s.info.Leader = cluster.NoLeader
	return s
}

// leading reports whether the replica acts as the leader: the metadata
// names it, in an epoch it saw begin.
func (s *replicaState) leading() bool {
	return s.info.Leader == s.self && s.info.LeaderEpoch > s.inherited
}

// needsNewEpoch reports the inherited epoch the replica waits to leave, or
// false: it is named the leader in an epoch it led before its restart.
func (s *replicaState) needsNewEpoch() (int32, bool) {
	return s.inherited, s.info.Leader == s.self && s.info.LeaderEpoch == s.inherited
}

// apply takes in the partition's metadata. Metadata older than what the
// replica has seen (a lower leader or partition epoch: an ISR change's
// answer can arrive before the metadata that carries it) is ignored. A new
// leader epoch ends every produce wait with NOT_LEADER and, if this
// replica leads it, starts the leader's view of its followers afresh. It
// returns the waits it ended.
func (s *replicaState) apply(info cluster.PartitionInfo, log logView, now time.Time) []completion {
	if info.LeaderEpoch < s.info.LeaderEpoch ||
		(info.LeaderEpoch == s.info.LeaderEpoch && info.PartitionEpoch < s.info.PartitionEpoch) {
		return nil
	}
	var ended []completion
	if info.LeaderEpoch != s.info.LeaderEpoch || info.Leader != s.info.Leader {
		if s.info.LeaderEpoch < 0 && info.Leader == s.self && log.latestEpoch >= info.LeaderEpoch && len(info.Replicas) > 1 {
			s.inherited = info.LeaderEpoch // see the top of this file
		}
		if s.unsure && info.Leader == s.self && len(info.ISR) > 1 {
			s.inherited = max(s.inherited, info.LeaderEpoch)
		}
		for _, w := range s.waiters {
			ended = append(ended, completion{w, errNotLeaderNow})
		}
		s.waiters, s.pending, s.followers, s.toldFloor = nil, nil, nil, 0
		if info.Leader == s.self && info.LeaderEpoch > s.inherited {
			s.epochStart = log.end
			s.followers = map[int32]*followerState{}
			for _, id := range info.Replicas {
				if id != s.self {
					s.followers[id] = &followerState{leo: -1, caughtUpAt: now, sentEnd: -1, limit: -1}
				}
			}
		}
	}
	if !slices.Contains(info.ISR, s.self) {
		s.unsure = false // it joins again only once it has caught up
	}
	if s.pending != nil && info.PartitionEpoch > s.pending.partitionEpoch {
		s.pending = nil // applied, or overtaken by another change
	}
	// A follower that left the ISR must be heard from again before it may
	// rejoin: the controller takes out followers that died, and one that
	// was caught up and heard from just before would otherwise be asked
	// back at once, again and again, while acks=all produces wait on it.
	for id, f := range s.followers {
		if slices.Contains(s.info.ISR, id) && !slices.Contains(info.ISR, id) {
			f.heardAt = time.Time{}
		}
	}
	s.info = info
	return ended
}

// errNotLeaderNow ends a produce wait when leadership changes. It is not
// an answer: commitOutcome turns it into NOT_LEADER (notLeaderError),
// naming the new leader.
var errNotLeaderNow = errors.New("broker: leadership changed before the batch committed")

// checkProduce says whether a produce may be appended now: only by the
// leader, and for acks=all only while the ISR has min.insync.replicas
// members.
func (s *replicaState) checkProduce(acksAll bool) replicaRefusal {
	switch {
	case s.info.Leader == s.self && !s.leading():
		return refusedTakingTheLead
	case !s.leading():
		return refusedNotLeader
	case acksAll && len(s.info.ISR) < s.minISR:
		return refusedNotEnoughReplicas
	}
	return refusedNone
}

// addWaiter registers an acks=all produce appended in the current epoch.
func (s *replicaState) addWaiter(w *produceWaiter) {
	i := len(s.waiters)
	for i > 0 && s.waiters[i-1].last > w.last {
		i--
	}
	s.waiters = slices.Insert(s.waiters, i, w)
}

// removeWaiter forgets a wait its produce gave up on.
func (s *replicaState) removeWaiter(w *produceWaiter) {
	if i := slices.Index(s.waiters, w); i >= 0 {
		s.waiters = slices.Delete(s.waiters, i, i+1)
	}
}

// maximalISR is the ISR the high watermark counts: the current one, plus
// the members of an ISR change in flight.
func (s *replicaState) maximalISR() []int32 {
	if s.pending == nil {
		return s.info.ISR
	}
	out := slices.Clone(s.info.ISR)
	for _, id := range s.pending.isr {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// highWatermark is where a leader's high watermark may be now: the
// smallest committed end over the maximal ISR, never below where it is.
// A follower's is what its leader says (see followerHighWatermark).
func (s *replicaState) highWatermark(log logView) int64 {
	if !s.leading() {
		return log.hw
	}
	hw := log.committed
	for _, id := range s.maximalISR() {
		if id == s.self {
			continue
		}
		f := s.followers[id]
		if f == nil || f.leo < 0 {
			return log.hw
		}
		hw = min(hw, f.leo)
	}
	return max(hw, log.hw)
}

// complete ends the waits whose batches are below the high watermark.
func (s *replicaState) complete(hw int64) []completion {
	n := 0
	for n < len(s.waiters) && s.waiters[n].last < hw {
		n++
	}
	if n == 0 {
		return nil
	}
	var err error
	if len(s.info.ISR) < s.minISR {
		err = errNotEnoughAfterAppend
	}
	out := make([]completion, n)
	for i, w := range s.waiters[:n] {
		out[i] = completion{w, err}
	}
	s.waiters = slices.Delete(s.waiters, 0, n)
	return out
}

var errNotEnoughAfterAppend = &Error{Reason: ReasonNotEnoughReplicasAfterAppend,
	Message: "the batch committed, but the in-sync replicas fell below min.insync.replicas while it waited"}

// sent records that the leader sent a follower everything up to end (its
// batches, or a new log start), and whether that was all it had then.
// Called before the follower can have it: the report that acknowledges
// end must find it within the follower's limit.
func (s *replicaState) sent(id int32, end int64, caughtUp bool, now time.Time) {
	f := s.followers[id]
	if f == nil || !s.leading() {
		return
	}
	f.limit = max(f.limit, end)
	if caughtUp {
		f.sentEnd, f.sentAt = end, now
	}
}

// followerReport takes a follower's acknowledged log end in leader epoch
// epoch. It says whether the leader counted the report (see the top of
// this file for the limit), and returns an ISR change to ask for when the
// follower has caught up and is not in the ISR.
func (s *replicaState) followerReport(id, epoch int32, leo int64, log logView, now time.Time) (reportRefusal, *isrChange) {
	f := s.followers[id]
	if !s.leading() || epoch != s.info.LeaderEpoch || f == nil {
		return reportStale, nil
	}
	if leo > log.end || (f.leo >= 0 && leo > f.limit) {
		return reportBeyond, nil
	}
	f.limit = max(f.limit, leo)
	// A report below what the follower acknowledged before in this epoch:
	// it lost records it had, as a power cut does under flush.policy
	// interval. It may lack committed records now, so it leaves the ISR
	// at once rather than after replica.lag.time.max, and joins again
	// once it has caught up.
	lost := f.leo >= 0 && leo < f.leo
	f.leo, f.heardAt = leo, now
	if lost && slices.Contains(s.info.ISR, id) && s.pending == nil {
		return reportCounted, s.propose(slices.DeleteFunc(slices.Clone(s.info.ISR), func(m int32) bool { return m == id }), now)
	}
	if f.sentEnd >= 0 && leo >= f.sentEnd && f.sentAt.After(f.caughtUpAt) {
		f.caughtUpAt = f.sentAt
	}
	if leo >= log.end {
		f.caughtUpAt = now
	}
	if s.pending != nil || !s.mayJoin(id, log, now) {
		return reportCounted, nil
	}
	return reportCounted, s.propose(s.withMember(id), now)
}

// mayJoin reports whether a follower outside the ISR has caught up: it has
// every committed record and everything since this leader's epoch began,
// and it is alive (it reported within replica.lag.time.max).
func (s *replicaState) mayJoin(id int32, log logView, now time.Time) bool {
	f := s.followers[id]
	if f == nil || f.leo < 0 || slices.Contains(s.info.ISR, id) || now.Sub(f.heardAt) > s.lagMax {
		return false
	}
	return f.leo >= s.highWatermark(log) && f.leo >= s.epochStart
}

// withMember is the ISR with id added, in replica order as the controller
// stores it.
func (s *replicaState) withMember(id int32) []int32 {
	var isr []int32
	for _, r := range s.info.Replicas {
		if r == id || slices.Contains(s.info.ISR, r) {
			isr = append(isr, r)
		}
	}
	return isr
}

// tick asks for the lagging followers to leave the ISR: those not caught up
// for longer than replica.lag.time.max; or for a caught-up follower to
// join it, which its reports alone may never ask for (it reported caught up
// while still a member, left on a change decided elsewhere, and an idle
// partition gives it nothing more to report). It also gives up on an ISR
// change whose answer never came.
func (s *replicaState) tick(log logView, now time.Time) *isrChange {
	if !s.leading() {
		return nil
	}
	if s.pending != nil {
		if now.Sub(s.pending.sentAt) < isrPendingTimeout {
			return nil
		}
		s.pending = nil
	}
	var lagging []int32
	for _, id := range s.info.ISR {
		f := s.followers[id]
		if id == s.self || f == nil {
			continue
		}
		if f.leo >= log.end {
			f.caughtUpAt = now // idle and caught up
		}
		if now.Sub(f.caughtUpAt) > s.lagMax {
			lagging = append(lagging, id)
		}
	}
	if len(lagging) == 0 {
		for _, id := range s.info.Replicas {
			if id != s.self && s.mayJoin(id, log, now) {
				return s.propose(s.withMember(id), now)
			}
		}
		return nil
	}
	isr := slices.DeleteFunc(slices.Clone(s.info.ISR), func(id int32) bool { return slices.Contains(lagging, id) })
	return s.propose(isr, now)
}

// nextTick is when tick may next have work that no event brings first,
// zero for none: an ISR member behind the log end lags once it has not
// been caught up for replica.lag.time.max, and a pending change is given
// up after isrPendingTimeout. Everything else tick does follows an event
// the housekeeper is told of: an append (a caught-up member falls behind,
// beforeAppend), a non-member's report, an applied or refused ISR change.
func (s *replicaState) nextTick(log logView) time.Time {
	if !s.leading() {
		return time.Time{}
	}
	if s.pending != nil {
		return s.pending.sentAt.Add(isrPendingTimeout)
	}
	var next time.Time
	for _, id := range s.info.ISR {
		f := s.followers[id]
		if id == s.self || f == nil || f.leo >= log.end {
			continue
		}
		// tick drops it once now - caughtUpAt > lagMax.
		next = earliest(next, f.caughtUpAt.Add(s.lagMax+time.Nanosecond))
	}
	return next
}

// beforeAppend records, as the leader's log end moves past end, that every
// follower holding end was caught up until now: the lag clock of an idle,
// caught-up member starts at the append that leaves it behind, not at the
// last housekeeping visit, which an idle replica no longer gets.
func (s *replicaState) beforeAppend(end int64, now time.Time) {
	for _, f := range s.followers {
		if f.leo >= end {
			f.caughtUpAt = now
		}
	}
}

func (s *replicaState) propose(isr []int32, now time.Time) *isrChange {
	s.pending = &isrChange{isr: isr, leaderEpoch: s.info.LeaderEpoch, partitionEpoch: s.info.PartitionEpoch, sentAt: now}
	return s.pending
}

// isrRefused takes the controller's refusal of a change: the metadata will
// say what happened instead, and the leader may ask again from there.
func (s *replicaState) isrRefused(c *isrChange) {
	if s.pending == c {
		s.pending = nil
	}
}

// tombstoneFloor is the offset below which this replica's cleaner may
// remove tombstones, as far as the other replicas go (delete.retention.ms
// bounds it further): the lowest log end among the partition's replicas.
// A tombstone removed where some replica has not copied it yet would never
// reach that replica, which keeps the older records of the key the
// tombstone deleted: it copies the cleaned range without them and without
// the tombstone, and serves the key again if it leads later. Below every
// replica's log end, each holds the tombstone and removes the key's older
// records with it when it cleans.
//
// A leader takes it from its followers' positions in this epoch: 0 until
// every replica has reported (a replica that stays away holds tombstones
// back at its log end until it returns or is reassigned). It is never past
// the high watermark: offsets below are every replica's for good, as the
// in-sync ones hold them and no follower truncates what it holds below
// the high watermark. A follower cleans below what its leader last told
// it in this epoch. A replica alone has no one to wait for.
func (s *replicaState) tombstoneFloor(log logView) int64 {
	if !s.leading() {
		return s.toldFloor
	}
	floor := log.hw
	for _, id := range s.info.Replicas {
		if id == s.self {
			continue
		}
		f := s.followers[id]
		if f == nil || f.leo < 0 {
			return 0
		}
		floor = min(floor, f.leo)
	}
	return floor
}

// followerHighWatermark is a follower's high watermark after its leader
// said hw: what the leader says, as far as the follower's log goes, and
// never back (what was committed stays committed, whoever leads).
func followerHighWatermark(leaderHW int64, log logView) int64 {
	return max(log.hw, min(leaderHW, log.end))
}
