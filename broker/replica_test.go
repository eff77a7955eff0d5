package broker

// Named scenarios of the replication protocol, each a way an acknowledged
// record was lost or replaced before: a replica on a real hot log (in an
// in-memory file system), driven step by step.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/hotlog/memfs"
	"github.com/strata-log/strata/record"
)

// testReplica is one broker's replica with a clock the test moves.
type testReplica struct {
	t   *testing.T
	p   *partition
	fs  *memfs.FS
	now time.Time
	cfg config.Topic
}

func newTestReplica(t *testing.T, self int32, info cluster.PartitionInfo, minISR int) *testReplica {
	t.Helper()
	return openTestReplica(t, memfs.New(), self, info, minISR)
}

// openTestReplica opens a replica whose files are on fsys.
func openTestReplica(t *testing.T, fsys *memfs.FS, self int32, info cluster.PartitionInfo, minISR int) *testReplica {
	t.Helper()
	r := &testReplica{t: t, now: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), fs: fsys}
	r.cfg = config.DefaultTopic()
	r.cfg.MinInsyncReplicas = minISR
	r.cfg.FlushPolicy = config.FlushNever
	p, err := openPartition(replicaSpec{
		dir: "/data/t/0", topic: "t", topicID: "0123456789abcdef0123456789abcdef", self: self,
		cfg: r.cfg, info: info, lagMax: 10 * time.Second,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		fs:     fsys, now: func() time.Time { return r.now }, onDurable: func() {},
		brokerAddr: testBrokerAddr,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.close() })
	r.p = p
	return r
}

// testBrokerAddr is the client address a test replica's metadata gives
// broker id.
func testBrokerAddr(id int32) string { return fmt.Sprintf("127.0.0.1:%d", 7400+id) }

// batch is n records whose values carry ids from first.
func testBatch(t *testing.T, first uint64, n int) record.Batch {
	t.Helper()
	bl := record.NewBuilder(record.DefaultBatchOptions())
	for i := range n {
		v := make([]byte, 8)
		binary.BigEndian.PutUint64(v, first+uint64(i))
		bl.Add(record.Record{Value: v})
	}
	b, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// leaderBatch is a batch as a leader in epoch would send it: offsets
// assigned from base.
func leaderBatch(t *testing.T, base int64, epoch int32, first uint64, n int) []byte {
	b := testBatch(t, first, n)
	b.SetBaseOffset(base)
	b.SetLeaderEpoch(epoch)
	return b
}

func (r *testReplica) produce(first uint64, n int) (ProduceResult, *produceWaiter) {
	r.t.Helper()
	res, w, err := r.p.appendAsLeader(testBatch(r.t, first, n), AcksAll)
	if err != nil {
		r.t.Fatalf("produce: %v", err)
	}
	return res, w
}

func (r *testReplica) apply(info cluster.PartitionInfo) {
	r.t.Helper()
	if err := r.p.setState(info, r.cfg); err != nil {
		r.t.Fatal(err)
	}
}

// ended returns how a produce wait ended, or false if it has not.
func ended(w *produceWaiter) (error, bool) {
	select {
	case err := <-w.done:
		return err, true
	default:
		return nil, false
	}
}

// A leader paused (or cut off) with acks=all produces in flight is deposed;
// when it comes back it truncates its suffix, follows the new leader and
// takes the new leader's records at the same offsets, high watermark and
// all. Its produces must end with NOT_LEADER, never with success for
// offsets that now hold other records.
func TestDeposedLeaderDoesNotAcknowledgeTruncatedOffsets(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}
	r := newTestReplica(t, 1, info, 2)
	for _, f := range []int32{2, 3} {
		r.p.followerReport(f, 0, 0)
	}
	res, w := r.produce(100, 5)
	if res.BaseOffset != 0 || res.LastOffset != 4 {
		t.Fatalf("appended at %d..%d", res.BaseOffset, res.LastOffset)
	}
	// The controller elected broker 2 meanwhile; broker 1 learns it.
	info = cluster.PartitionInfo{Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3}, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 2}
	r.apply(info)
	err, done := ended(w)
	if !done || !errors.Is(err, errNotLeaderNow) {
		t.Fatalf("after losing the lead the wait ended %v with %v; want NOT_LEADER at once", done, err)
	}
	// It truncates to the new leader and copies its records, committed.
	if _, err := r.p.truncateAsFollower(2, 1, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.p.appendAsFollower(2, 1, NoReadFrom, leaderBatch(t, 0, 1, 900, 8), 8); err != nil {
		t.Fatal(err)
	}
	if hw := r.p.log.HighWatermark(); hw != 8 {
		t.Fatalf("follower high watermark %d, want 8", hw)
	}
	if err, done := ended(w); done {
		t.Fatalf("the wait ended a second time: %v", err)
	}
}

// A follower takes a replicated chunk whole or not at all. With one
// damaged batch in it (a byte changed after its CRC was computed), nothing
// is written and no producer is remembered from the good batch before it;
// the undamaged chunk then goes in whole, its producer remembered. The
// follower computes each batch's CRC once, in the check before the write,
// and splits the chunk again without it to write and to remember
// producers: this pins that the one check covers the whole chunk first.
func TestFollowerTakesAReplicatedChunkWholeOrNotAtAll(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 1}
	r := newTestReplica(t, 2, info, 1)
	if err := r.p.producers.rebuild(r.p.log); err != nil {
		t.Fatal(err)
	}
	chunk := func(damage bool) []byte {
		first, second := idemBatch(t, 7, 0, 0, 3), idemBatch(t, 7, 0, 3, 2)
		first.SetBaseOffset(0)
		first.SetLeaderEpoch(1)
		second.SetBaseOffset(3)
		second.SetLeaderEpoch(1)
		if damage {
			second[len(second)-1] ^= 0xff
		}
		return append(append([]byte(nil), first...), second...)
	}
	err := r.p.appendAsFollower(1, 1, NoReadFrom, chunk(true), 5)
	if !errors.Is(err, hotlog.ErrInvalidBatch) {
		t.Fatalf("damaged chunk: %v, want ErrInvalidBatch", err)
	}
	if end := r.p.log.LogEndOffset(); end != 0 {
		t.Fatalf("log end %d after a refused chunk, want 0", end)
	}
	if got := dumpState(r.p.producers); len(got) != 0 {
		t.Fatalf("producers remembered from a refused chunk: %+v", got)
	}
	if err := r.p.appendAsFollower(1, 1, NoReadFrom, chunk(false), 5); err != nil {
		t.Fatal(err)
	}
	if end := r.p.log.LogEndOffset(); end != 5 {
		t.Fatalf("log end %d after the chunk, want 5", end)
	}
	if got := dumpState(r.p.producers)[7]; len(got.batches) != 2 || got.batches[1].firstSeq != 3 {
		t.Fatalf("producer 7 remembered as %+v, want its two batches", got)
	}
}

// The ISR falls below min.insync.replicas while a batch waits: it commits
// (the high watermark passes it), but it is not acknowledged.
func TestNotEnoughReplicasAfterAppend(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}
	r := newTestReplica(t, 1, info, 2)
	_, w := r.produce(1, 3)
	// Both followers leave the ISR (the controller saw them fail).
	info.ISR, info.PartitionEpoch = []int32{1}, 1
	r.apply(info)
	err, done := ended(w)
	if !done || !errors.Is(err, errNotEnoughAfterAppend) {
		t.Fatalf("wait ended %v with %v; want NOT_ENOUGH_REPLICAS_AFTER_APPEND", done, err)
	}
	if hw := r.p.log.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d: the lone leader's batch is committed", hw)
	}
	// And nothing new is appended for acks=all below min.insync.replicas.
	if _, _, err := r.p.appendAsLeader(testBatch(t, 9, 1), AcksAll); ReasonOf(err) != ReasonNotEnoughReplicas {
		t.Fatalf("append below min.insync.replicas: %v", err)
	}
}

// While the leader's request to add a follower to the ISR is in flight,
// the high watermark waits for that follower too (the maximal ISR): once
// the controller applies the change the follower may be elected, and it
// must hold every record committed by then.
func TestHighWatermarkWaitsForAFollowerJoiningTheISR(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1}
	r := newTestReplica(t, 1, info, 1)
	r.produce(1, 10)
	r.p.followerReport(2, 0, 10)
	if hw := r.p.log.HighWatermark(); hw != 10 {
		t.Fatalf("high watermark %d with the in-sync follower at 10", hw)
	}
	// Broker 3 catches up: the leader asks for it to join.
	_, change := r.p.followerReport(3, 0, 10)
	if change == nil || len(change.isr) != 3 || change.partitionEpoch != 0 {
		t.Fatalf("ISR change %+v; want broker 3 added, computed from partition epoch 0", change)
	}
	// More records; broker 2 has them, broker 3 not yet.
	r.produce(11, 5)
	r.p.sentTo(2, 15, true)
	r.p.sentTo(3, 15, true)
	r.p.followerReport(2, 0, 15)
	if hw := r.p.log.HighWatermark(); hw != 10 {
		t.Fatalf("high watermark %d passed the joining follower's 10", hw)
	}
	r.p.followerReport(3, 0, 15)
	if hw := r.p.log.HighWatermark(); hw != 15 {
		t.Fatalf("high watermark %d once every member of the maximal ISR has 15", hw)
	}
	// The answer: the change applied. One request at a time meanwhile.
	if _, again := r.p.followerReport(3, 0, 15); again != nil {
		t.Fatalf("a second request while one is in flight: %+v", again)
	}
	info.ISR, info.PartitionEpoch = []int32{1, 2, 3}, 1
	r.p.isrAnswered(change, info, nil)
	if got := r.p.view.Load(); len(got.ISR) != 3 || got.PartitionEpoch != 1 {
		t.Fatalf("metadata after the answer: %+v", got)
	}
}

// A follower being removed from the ISR still counts until the controller
// says it is out: until then it can be elected.
func TestHighWatermarkWaitsForAFollowerLeavingTheISR(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}
	r := newTestReplica(t, 1, info, 1)
	r.p.followerReport(2, 0, 0)
	r.p.followerReport(3, 0, 0)
	r.produce(1, 4)
	r.p.sentTo(2, 4, true)
	r.p.followerReport(2, 0, 4)
	r.now = r.now.Add(11 * time.Second) // broker 3 lags longer than replica.lag.time.max
	r.p.followerReport(2, 0, 4)
	change, _ := r.p.tick()
	if change == nil || len(change.isr) != 2 {
		t.Fatalf("shrink %+v; want broker 3 out", change)
	}
	if hw := r.p.log.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before broker 3 is out", hw)
	}
	info.ISR, info.PartitionEpoch = []int32{1, 2}, 1
	r.p.isrAnswered(change, info, nil)
	if hw := r.p.log.HighWatermark(); hw != 4 {
		t.Fatalf("high watermark %d once broker 3 is out", hw)
	}
}

// A refused ISR change (another change came first) frees the leader to ask
// again from the new state.
func TestRefusedISRChangeIsForgotten(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, Leader: 1}
	r := newTestReplica(t, 1, info, 1)
	_, change := r.p.followerReport(3, 0, 0)
	if change == nil {
		t.Fatal("no ISR change for a caught-up follower")
	}
	r.p.isrAnswered(change, cluster.PartitionInfo{}, errors.New("stale partition epoch"))
	info.ISR, info.PartitionEpoch = []int32{1}, 1 // what came first: broker 2 out
	r.apply(info)
	_, again := r.p.followerReport(3, 0, 0)
	if again == nil || again.partitionEpoch != 1 {
		t.Fatalf("the request from the new state: %+v", again)
	}
}

// Truncation by leader epoch (KIP-279), the case where one question is not
// enough: the follower's history is {1@0, 3@10} up to 15, the leader's
// {1@0, 2@8, 4@20}. The follower must end at 8 before it fetches: 8..9 are
// epoch 1 records the leader does not have, 10..14 are epoch 3 records it
// does not have either.
func TestTruncationByLeaderEpochTakesSeveralRounds(t *testing.T) {
	leaderLog := testLog(t, map[int32][2]int64{1: {0, 8}, 2: {8, 20}, 4: {20, 25}})
	follower := newTestReplica(t, 2, cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 4}, 1)
	for _, e := range []struct {
		epoch      int32
		start, end int64
	}{{1, 0, 10}, {3, 10, 15}} {
		for off := e.start; off < e.end; off++ { // a batch per record: truncation cuts whole batches
			if err := follower.p.appendAsFollower(1, 4, NoReadFrom, leaderBatch(t, off, e.epoch, uint64(off), 1), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	var asked []int32
	err := truncateByEpoch(follower.p, 1, 4, func(epoch int32) (EpochEnd, error) {
		asked = append(asked, epoch)
		e, end := leaderLog.EndOffsetForEpoch(epoch)
		return EpochEnd{Epoch: e, EndOffset: end, LogEnd: leaderLog.LogEndOffset()}, nil
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if end := follower.p.log.LogEndOffset(); end != 8 {
		t.Fatalf("follower ends at %d after asking about epochs %v; want 8", end, asked)
	}
	if len(asked) != 2 || asked[0] != 3 || asked[1] != 1 {
		t.Fatalf("asked about epochs %v; want 3 then 1", asked)
	}
}

// truncationStep's rules one by one.
func TestTruncationStep(t *testing.T) {
	own := testLog(t, map[int32][2]int64{1: {0, 10}, 3: {10, 15}})
	cases := []struct {
		name string
		ans  EpochEnd
		hw   int64
		cut  int64
		done bool
	}{
		{"leader knows the epoch and has more", EpochEnd{Epoch: 3, EndOffset: 40}, 0, 15, true},
		{"leader knows the epoch and has less", EpochEnd{Epoch: 3, EndOffset: 12}, 0, 12, true},
		{"leader knows an older epoch the follower knows", EpochEnd{Epoch: 1, EndOffset: 8}, 0, 8, true},
		{"leader knows an epoch the follower does not", EpochEnd{Epoch: 2, EndOffset: 20}, 0, 10, false},
		{"leader knows none of the follower's epochs", EpochEnd{Epoch: hotlog.UndefinedEpoch, EndOffset: -1, LogEnd: 20}, 6, 6, true},
		{"leader knows none of the follower's epochs, log end unknown", EpochEnd{Epoch: hotlog.UndefinedEpoch, EndOffset: -1, LogEnd: -1}, 6, 6, true},
		// Every in-sync replica lost records past 4 to power cuts under
		// flush.policy interval: the follower's committed suffix goes too.
		{"leader knows none of the follower's epochs and ends below its high watermark", EpochEnd{Epoch: hotlog.UndefinedEpoch, EndOffset: -1, LogEnd: 4}, 6, 4, true},
	}
	for _, c := range cases {
		cut, done := truncationStep(own, own.LogEndOffset(), c.hw, c.ans)
		if cut != c.cut || done != c.done {
			t.Errorf("%s: cut %d done %v; want %d %v", c.name, cut, done, c.cut, c.done)
		}
	}
}

// testLog is a hot log holding epochs over offset ranges [start, end).
func testLog(t *testing.T, epochs map[int32][2]int64) *hotlog.Log {
	t.Helper()
	opts := hotlog.DefaultOptions()
	opts.FS = memfs.New()
	opts.FlushPolicy = hotlog.FlushNever
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := hotlog.Open("/log", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var order []int32
	for e := range epochs {
		order = append(order, e)
	}
	for i := range order {
		for j := i + 1; j < len(order); j++ {
			if order[j] < order[i] {
				order[i], order[j] = order[j], order[i]
			}
		}
	}
	for _, e := range order {
		r := epochs[e]
		for off := r[0]; off < r[1]; off++ {
			if _, err := l.AppendReplica(leaderBatch(t, off, e, uint64(off), 1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return l
}

// A follower that reported itself caught up while still in the ISR, and
// was then dropped from it by a change decided elsewhere (the controller saw
// it fail), must be asked back even though an idle partition gives it
// nothing more to report.
func TestIdleCaughtUpFollowerRejoinsTheISR(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}
	r := newTestReplica(t, 1, info, 1)
	r.produce(1, 4)
	r.p.followerReport(2, 0, 4)
	r.p.followerReport(3, 0, 4)
	info.ISR, info.PartitionEpoch = []int32{1, 2}, 1
	r.apply(info)
	// Its next heartbeat, with nothing new to report, asks it back.
	r.now = r.now.Add(followerKeepalive(10 * time.Second)) // the test replica's replica.lag.time.max
	_, change := r.p.followerReport(3, 0, 4)
	if change == nil || len(change.isr) != 3 || change.partitionEpoch != 1 {
		t.Fatalf("a heartbeat on an idle partition: %+v; want broker 3 asked back from partition epoch 1", change)
	}
	// Refused (the controller was busy, say): the next tick asks again.
	r.p.isrAnswered(change, cluster.PartitionInfo{}, errors.New("refused"))
	if change, _ := r.p.tick(); change == nil || len(change.isr) != 3 {
		t.Fatalf("tick after a refused rejoin: %+v; want broker 3 asked back again", change)
	}
}

// The controller takes a follower that died out of the ISR. On an idle
// partition the follower had everything and was heard from moments before
// it died, so it still looked caught up and alive; the leader asked it back
// at once, and again after every removal until replica.lag.time.max ran
// out, while acks=all produces waited on a dead broker. A follower that
// left the ISR must be heard from again before it may rejoin.
func TestADeadFollowerTakenOutOfTheISRIsNotAskedBack(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}
	r := newTestReplica(t, 1, info, 1)
	r.produce(1, 4)
	r.p.followerReport(2, 0, 4)
	r.p.followerReport(3, 0, 4)
	// Broker 3 dies; gossip tells the controller, which removes it.
	r.now = r.now.Add(time.Second)
	info.ISR, info.PartitionEpoch = []int32{1, 2}, 1
	r.apply(info)
	for range 10 {
		r.now = r.now.Add(followerKeepalive(10 * time.Second)) // the test replica's replica.lag.time.max
		r.p.followerReport(2, 0, 4)
		if change, _ := r.p.tick(); change != nil {
			t.Fatalf("the leader asked for ISR %v with broker 3 silent since it left", change.isr)
		}
	}
}

// A broker restarted while leading, faster than the controller noticed,
// finds itself leading the epoch it led before. A crash may have cost its
// log a suffix its followers copied; new records at those offsets in the
// same epoch would not make them cut theirs. So it does not lead in that
// epoch, asks for the next, and leads in that one.
func TestRestartedLeaderWaitsForANewEpoch(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 3}
	// Under always: it keeps the lead (interval and never hand it on,
	// TestRestartedLeaderAfterAPowerCut).
	r := openPolicyReplica(t, memfs.New(), 1, info, config.FlushAlways)
	r.produce(1, 5)
	if _, asks := r.p.needsNewEpoch(); asks {
		t.Fatal("a replica that saw its epoch begin asks for another")
	}
	// kill -9 and a restart: the same files, the same metadata.
	files := r.fs.Fork()
	r.p.close()
	again := openPolicyReplica(t, files, 1, info, config.FlushAlways)
	epoch, asks := again.p.needsNewEpoch()
	if !asks || epoch != 3 {
		t.Fatalf("after the restart: asks for a new epoch %v (leaving %d); want true, 3", asks, epoch)
	}
	if _, _, err := again.p.appendAsLeader(testBatch(t, 9, 1), AcksAll); ReasonOf(err) != ReasonLeaderNotAvailable {
		t.Fatalf("produce in the inherited epoch: %v, want LEADER_NOT_AVAILABLE", err)
	}
	info.LeaderEpoch, info.PartitionEpoch = 4, 4
	again.apply(info)
	if _, asks := again.p.needsNewEpoch(); asks {
		t.Fatal("still asking once the new epoch came")
	}
	if res, _, err := again.p.appendAsLeader(testBatch(t, 9, 1), AcksAll); err != nil || res.BaseOffset != 5 {
		t.Fatalf("produce in the new epoch: %v at %d, want offset 5", err, res.BaseOffset)
	}
	if e, _ := again.p.log.EndOffsetForEpoch(3); e != 3 {
		t.Fatalf("the log's history lacks epoch 3: %d", e)
	}
}

// A partition with no other replica has no follower that could hold a
// suffix its leader lost: a restarted leader goes on in its epoch at once.
func TestRestartedLoneLeaderGoesOn(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 3}
	r := newTestReplica(t, 1, info, 1)
	r.produce(1, 5)
	files := r.fs.Fork()
	r.p.close()
	again := openTestReplica(t, files, 1, info, 1)
	if _, asks := again.p.needsNewEpoch(); asks {
		t.Fatal("a lone leader asks for a new epoch after a restart")
	}
	if hw := again.p.log.HighWatermark(); hw != 5 {
		t.Fatalf("high watermark %d after the restart, want 5", hw)
	}
}

// A leader whose log was reset (to its own leader's log start, or to the
// cold tier's end) knows no epoch before the reset. A follower that, as a
// deposed leader, wrote an uncommitted suffix in an older epoch must not be
// told its epoch ran up to the start of the leader's first known one: that
// kept the suffix (12 records at 348 in the simulation's seed 19620). It is
// told nothing, and keeps what it knows to be committed.
func TestTruncationAgainstAResetLeader(t *testing.T) {
	leader := newTestReplica(t, 2, cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: 1, LeaderEpoch: 3}, 1)
	if err := leader.p.resetAsFollower(1, 3, 360); err != nil {
		t.Fatal(err)
	}
	leader.apply(cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 4, PartitionEpoch: 1})

	follower := newTestReplica(t, 1, cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1, LeaderEpoch: 0}, 1)
	follower.produce(0, 348)
	follower.p.followerReport(2, 0, 348) // committed up to 348
	follower.produce(1000, 12)           // written alone, while cut off
	follower.apply(cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{2}, Leader: 2, LeaderEpoch: 4, PartitionEpoch: 1})
	if hw, end := follower.p.log.HighWatermark(), follower.p.log.LogEndOffset(); hw != 348 || end != 360 {
		t.Fatalf("follower high watermark %d, end %d; want 348, 360", hw, end)
	}
	err := truncateByEpoch(follower.p, 2, 4, func(epoch int32) (EpochEnd, error) {
		return leader.p.endOffsetForEpoch(epoch), nil
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if end := follower.p.log.LogEndOffset(); end != 348 {
		t.Fatalf("the follower ends at %d; its records from 348 were never committed", end)
	}
}

// A follower's position counts only as far as the leader can account for
// it: its first report in an epoch no further than the leader's log end,
// later ones no further than that or what the leader sent it. Before, a
// Replicate stream that named a follower and claimed a log end of 2^40
// kept it in the ISR and moved the high watermark past what it held, and
// acks=all records were lost with the leader.
func TestLeaderCountsAFollowerOnlyAsFarAsItSentIt(t *testing.T) {
	info := cluster.PartitionInfo{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}
	r := newTestReplica(t, 1, info, 2)
	_, w := r.produce(1, 10)
	for _, claim := range []int64{1 << 40, 11} {
		if verdict, _ := r.p.followerReport(2, 0, claim); verdict != reportBeyond {
			t.Fatalf("a first position of %d past the leader's log end 10: verdict %d, want refused", claim, verdict)
		}
	}
	if verdict, _ := r.p.followerReport(3, 0, 0); verdict != reportCounted {
		t.Fatalf("broker 3 at 0: verdict %d, want counted", verdict)
	}
	if hw := r.p.log.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d after refused positions", hw)
	}
	// Broker 2 was sent nothing yet: it can have no more than it said first.
	if verdict, _ := r.p.followerReport(2, 0, 4); verdict != reportCounted {
		t.Fatalf("broker 2's first position 4: verdict %d, want counted", verdict)
	}
	if verdict, _ := r.p.followerReport(2, 0, 10); verdict != reportBeyond {
		t.Fatalf("broker 2 claims 10 after it said 4 and was sent nothing: verdict %d, want refused", verdict)
	}
	if verdict, _ := r.p.followerReport(3, 0, 10); verdict != reportBeyond {
		t.Fatalf("broker 3 claims 10 after it said 0 and was sent nothing: verdict %d, want refused", verdict)
	}
	if hw := r.p.log.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d, though broker 3 was sent nothing", hw)
	}
	if err, done := ended(w); done {
		t.Fatalf("the acks=all produce ended (%v) while no follower had its records", err)
	}
	// Sent, then acknowledged: counted, and the produce commits.
	r.p.sentTo(2, 10, true)
	r.p.sentTo(3, 10, true)
	for _, id := range []int32{2, 3} {
		if verdict, _ := r.p.followerReport(id, 0, 10); verdict != reportCounted {
			t.Fatalf("broker %d at 10 after it was sent 10: verdict %d, want counted", id, verdict)
		}
	}
	if err, done := ended(w); !done || err != nil {
		t.Fatalf("the produce once both followers acknowledged: ended %v with %v, want committed", done, err)
	}
	// A follower that truncated may report less, and grow again as far as
	// it was sent; a new log start sent to it counts as sent.
	if verdict, _ := r.p.followerReport(2, 0, 6); verdict != reportCounted {
		t.Fatalf("broker 2 back at 6: verdict %d, want counted", verdict)
	}
	if verdict, _ := r.p.followerReport(2, 0, 10); verdict != reportCounted {
		t.Fatalf("broker 2 at 10 again: verdict %d, want counted", verdict)
	}
}
