package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/tiering"
	"github.com/strata-log/strata/tiering/objstore"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// The chaos run's workload. The rate is what two shared cores sustain for
// three brokers that fsync every batch, MinIO and the client, with room to
// spare; the topic's segments and hot tier are small so that uploads, local
// deletes and cold reads all happen within the run.
const (
	chaosTopic      = "chaos"
	chaosPartitions = 6
	chaosKeys       = 600
	chaosValueBytes = 100
	chaosRate       = 3000 // records per second, paced, over all producers
	// chaosProducers share every partition, as applications do: when a
	// leader is deposed with one producer's batch waiting on it, the
	// others' records go to the new leader and can land at the offsets
	// the old leader gave that batch.
	chaosProducers = 4
	// chaosDuration is how long faults are injected unless
	// STRATA_CHAOS_DURATION says longer.
	chaosDuration = time.Minute
)

// TestChaosKeepsEveryAcknowledgedWrite is the acceptance test of invariant
// 1 (no acknowledged loss, no replaced record) under faults: three broker
// processes and a real MinIO, a topic of 6 partitions with 3 replicas,
// min.insync.replicas 2, tiering on with 256 KiB segments and a 3 s hot
// tier, and four idempotent acks=all producers (two with one batch in flight
// per partition, two with five) writing keyed records at a steady overall
// rate while a seeded random schedule, one fault at a time, kills a broker
// that leads partitions with SIGKILL and restarts it, pauses
// one with SIGSTOP for 3-8 s, or cuts one off from its peers (but not from
// MinIO or the client) for 3-8 s; a pause or cut lasts at least until the
// cluster has elected other leaders for its partitions, so the old leader
// always comes back deposed, and a cut 3-8 s more, so that the new leaders
// upload to the bucket the old one still reaches. After each fault the schedule waits until every
// partition is led and fully in sync again, as the controller sees it, so
// no more than one broker is ever out.
//
// Then everything is read back from the earliest offset, across the cold
// tier, and the history is checked: every acknowledged record exactly once
// at the partition and offset it was acknowledged with, offsets dense from
// 0, no record twice, the records of a key in produce order, every value as
// produced; and every partition's manifest in the bucket ends at or below
// the partition's high watermark. It logs the counts and the longest time
// without an acknowledged write, overall and per partition.
//
// The seed is printed at the start and on failure; STRATA_CHAOS_SEED
// replays one, STRATA_CHAOS_DURATION lengthens the fault schedule,
// STRATA_CHAOS_IN_FLIGHT sets every producer's batches in flight, and
// STRATA_CHAOS_LOGDIR keeps the brokers' logs of a failed run there.
// Network partitions need network namespaces (root, ip); without them the
// run logs that and keeps the other faults.
func TestChaosKeepsEveryAcknowledgedWrite(t *testing.T) {
	seed, duration := chaosSettings(t)
	t.Logf("chaos seed %d (replay: STRATA_CHAOS_SEED=%d), faults for %v", seed, seed, duration)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chaos seed %d failed; replay with STRATA_CHAOS_SEED=%d go test -run '^TestChaosKeepsEveryAcknowledgedWrite$' ./e2e/", seed, seed)
		}
	})
	began := time.Now()

	m := miniotest.Start(t)
	var (
		tc *testCluster
		bn *bridgeNet
	)
	if n, err := newBridgeNet(t, 3); err != nil {
		withoutNetns(t, err, "this run has no network partitions, only kill -9 and SIGSTOP")
		tc = startCluster(t, 3, m)
	} else {
		bn = n
		if tc, err = startBridgeCluster(t, bn, m); err != nil {
			t.Fatal(err)
		}
		t.Logf("brokers in network namespaces on bridge %s: %s", bn.bridge, strings.Join(tc.addrs(), ", "))
	}
	keepLogs(t, tc, seed)

	ctx, cancel := context.WithTimeout(context.Background(), duration+6*time.Minute)
	defer cancel()
	// The topic's replicas are placed on the brokers the metadata knows
	// when it is created: all three must be registered first.
	testutil.WaitFor(t, time.Minute, "all three brokers in the cluster's metadata", func() bool {
		md := metadataWithin(ctx, tc, 3*time.Second)
		return md != nil && len(md.Brokers) == 3
	})
	c, err := client.New(ctx, tc.addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	desc, err := c.CreateTopic(ctx, chaosTopic, chaosPartitions, 3, map[string]string{
		"min.insync.replicas":   "2",
		"remote.storage.enable": "true",
		"segment.bytes":         "256KiB",
		"local.retention.ms":    "3s",
	})
	if err != nil {
		t.Fatal(err)
	}
	tc.waitInSync(ctx, time.Minute, "every partition led, with all three replicas in sync")

	// Each producer is what an application that must not lose or
	// duplicate would configure: idempotent, acks=all, a 30 s delivery
	// timeout, and batches in flight per partition as Strata's default
	// (one) for half of them and Kafka's (five) for the others, unless
	// STRATA_CHAOS_IN_FLIGHT sets them all; and each has a client of its
	// own, with its own connections and view of the leaders. Batches stay
	// far below segment.bytes so segments roll.
	inFlight := chaosInFlight(t)
	var producers []*client.Producer
	for i := range chaosProducers {
		pc, err := client.New(ctx, tc.addrs())
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		producers = append(producers, pc.NewProducer(
			client.WithIdempotence(true),
			client.WithAcks(stratav1.Acks_ACKS_ALL),
			client.WithLinger(2*time.Millisecond),
			client.WithBatchBytes(16<<10),
			client.WithDeliveryTimeout(30*time.Second),
			client.WithMaxInFlightPerPartition(inFlight(i)),
		))
	}
	load := newChaosLoad()
	stopLoad, loadDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(loadDone)
		load.run(ctx, producers, stopLoad)
	}()

	faults := &chaosFaults{t: t, tc: tc, bn: bn, rng: rand.New(rand.NewPCG(seed, 0x5354524154410001)), start: load.start}
	// The first fault meets a cold tier: every partition has a segment in
	// the bucket (and so, a few seconds on, one deleted from local disk).
	bucket := minioReader{c: m.Client, bucket: m.Bucket}
	testutil.WaitFor(t, time.Minute, "a segment of every partition in the bucket", func() bool {
		for p := range int32(chaosPartitions) {
			head, _, err := tiering.LoadHead(ctx, bucket, tiering.PartitionRef{Topic: chaosTopic, TopicID: desc.Id, Partition: p})
			if err != nil || head == nil || head.Empty() {
				return false
			}
		}
		return true
	})
	recovered := faults.run(ctx, load.start.Add(duration))

	close(stopLoad)
	<-loadDone
	// Gaps are counted up to here and, after, only while records still
	// wait for their answer: a partition with nothing pending is not
	// stalled because another one is.
	load.finish(time.Now())
	flushCtx, flushCancel := context.WithTimeout(ctx, time.Minute)
	for _, p := range producers {
		if err := p.Flush(flushCtx); err != nil {
			t.Errorf("records still unanswered a minute after the load stopped: %v", err)
		}
		p.Close()
	}
	flushCancel()

	// Every fault is healed by now; wait for the state, not for time. If
	// it does not come (or did not after a fault already, which the test
	// has reported), the history is still read, as far as it can be.
	faults.healAll()
	if !recovered {
		t.Logf("not waiting again for the cluster to recover: %s", describeMetadata(metadataWithin(ctx, tc, 3*time.Second)))
	} else if !waitUntil(time.Minute, func() bool { return inSync(controllerView(ctx, tc)) }) {
		t.Errorf("a minute after the last fault healed, a partition still has no leader or not all three replicas in sync: %s", describeMetadata(metadataWithin(ctx, tc, 3*time.Second)))
		faults.dumpNetwork()
	}

	// A cluster that did not recover may not serve the history at all:
	// then less time is spent finding that out.
	readFor := 2 * time.Minute
	if !recovered {
		readFor = 45 * time.Second
	}
	hist := checkChaosHistory(ctx, t, c, load, readFor)
	load.report(t, hist)
	checkManifests(ctx, t, c, m, desc.Id, hist)
	checkColdTier(ctx, t, m, desc.Id, hist)
	t.Logf("chaos result: seed=%d acknowledged=%d lost=%d duplicate=%d misplaced=%d gaps=%d reordered=%d corrupt=%d unread=%d offsets-acked-twice=%d cold-mismatch=%d/%d faults=%d wall=%v",
		seed, hist.acked, hist.lost, hist.duplicate, hist.misplaced, hist.gaps, hist.reordered, hist.corrupt, hist.unread, hist.doubleAcked, hist.coldMismatch, hist.coldRecords, faults.injected, time.Since(began).Round(time.Second))
	if hist.lost+hist.duplicate+hist.misplaced+hist.gaps+hist.reordered+hist.corrupt > 0 {
		t.Errorf("the history breaks invariant 1 or 2: %d acknowledged records lost, %d duplicates, %d misplaced, %d offset gaps, %d reordered, %d corrupt (examples: %s)",
			hist.lost, hist.duplicate, hist.misplaced, hist.gaps, hist.reordered, hist.corrupt, strings.Join(hist.examples, "; "))
	}
	for _, err := range hist.readErrs {
		t.Errorf("reading the history back: %v", err)
	}
	if hist.coldMismatch > 0 {
		t.Errorf("%d of %d records in the segment objects the manifests list differ from what the partitions hold at those offsets (examples: %s)", hist.coldMismatch, hist.coldRecords, strings.Join(hist.coldExamples, "; "))
	}
	if hist.unread > 0 {
		t.Errorf("%d acknowledged records lie beyond where their partitions could be read: unverified", hist.unread)
	}
	if hist.acked == 0 {
		t.Error("nothing was acknowledged")
	}
}

// chaosSettings reads the seed (STRATA_CHAOS_SEED, else a fresh one) and
// the fault schedule's length (STRATA_CHAOS_DURATION, at least the default).
func chaosSettings(t *testing.T) (uint64, time.Duration) {
	seed := rand.Uint64() >> 1 // printable as a positive int64 too
	if s := os.Getenv("STRATA_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("STRATA_CHAOS_SEED=%q: want an unsigned integer", s)
		}
		seed = v
	}
	d := chaosDuration
	if s := os.Getenv("STRATA_CHAOS_DURATION"); s != "" {
		v, err := time.ParseDuration(s)
		if err != nil || v < chaosDuration {
			t.Fatalf("STRATA_CHAOS_DURATION=%q: want a duration of at least %v", s, chaosDuration)
		}
		d = v
	}
	return seed, d
}

// chaosInFlight gives producer i's batches in flight per partition: 1 for
// the even ones and 5 for the odd ones, or STRATA_CHAOS_IN_FLIGHT (1 to 5,
// the bound of idempotent producers) for all.
func chaosInFlight(t *testing.T) func(i int) int {
	s := os.Getenv("STRATA_CHAOS_IN_FLIGHT")
	if s == "" {
		return func(i int) int { return 1 + 4*(i%2) }
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 5 {
		t.Fatalf("STRATA_CHAOS_IN_FLIGHT=%q: want 1 to 5", s)
	}
	t.Logf("producers keep up to %d batches in flight per partition", n)
	return func(int) int { return n }
}

// keepLogs copies the brokers' logs to $STRATA_CHAOS_LOGDIR/seed-N when
// the test fails, before the brokers are killed and their temp dirs go.
func keepLogs(t *testing.T, tc *testCluster, seed uint64) {
	dir := os.Getenv("STRATA_CHAOS_LOGDIR")
	if dir == "" {
		return
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dst := filepath.Join(dir, fmt.Sprintf("seed-%d", seed))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			t.Logf("keeping broker logs: %v", err)
			return
		}
		for _, b := range tc.brokers {
			os.WriteFile(filepath.Join(dst, fmt.Sprintf("broker-%d.log", b.id)), []byte(b.log()), 0o644)
		}
		t.Logf("broker logs kept in %s", dst)
	})
}

// chaosLoad is the paced producer and what it learned: where each
// acknowledged record went and when acknowledgements came.
type chaosLoad struct {
	start time.Time

	mu       sync.Mutex
	produced int64
	acked    map[int64]ackedRecord // by sequence number
	failed   map[string]int        // failed records by reason
	lastAck  [chaosPartitions]time.Time
	lastAny  time.Time
	worst    [chaosPartitions]ackGap
	worstAny ackGap
}

// ackedRecord is where a record was acknowledged, and when (since the
// load started).
type ackedRecord struct {
	pos position
	at  time.Duration
}

// ackGap is a stretch of time without an acknowledged write, since the
// load started.
type ackGap struct{ from, to time.Duration }

func (g ackGap) length() time.Duration { return g.to - g.from }

func (g ackGap) String() string {
	return fmt.Sprintf("%v (t+%v..t+%v)", g.length().Round(10*time.Millisecond), g.from.Round(100*time.Millisecond), g.to.Round(100*time.Millisecond))
}

func newChaosLoad() *chaosLoad {
	l := &chaosLoad{start: time.Now(), acked: map[int64]ackedRecord{}, failed: map[string]int{}}
	l.lastAny = l.start
	for i := range l.lastAck {
		l.lastAck[i] = l.start
	}
	return l
}

// chaosKey is the key of record seq: chaosKeys keys, round robin, so every
// key has a long history spread over the run.
func chaosKey(seq int64) []byte { return fmt.Appendf(nil, "key-%04d", seq%chaosKeys) }

// run produces records 0, 1, 2, ... at chaosRate until stop closes, each
// key always through the same producer, so a key's records keep their
// order. The pace is kept by a ticker; after a stall (Produce blocks while
// the buffer is full) at most 100 ms worth is sent at once and the rest is
// dropped from the schedule, so the load never turns into a flood.
func (l *chaosLoad) run(ctx context.Context, producers []*client.Producer, stop <-chan struct{}) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	const burst = chaosRate / 10
	var issued, seq int64
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		due := int64(time.Since(l.start).Seconds() * chaosRate)
		if due-issued > burst {
			issued = due - burst
		}
		for ; issued < due; issued++ {
			r := &client.Record{Topic: chaosTopic, Partition: client.AnyPartition, Key: chaosKey(seq), Value: payload(seq, chaosValueBytes)}
			producers[(seq%chaosKeys)%int64(len(producers))].Produce(ctx, r, l.done)
			seq++
		}
		l.mu.Lock()
		l.produced = seq
		l.mu.Unlock()
	}
}

// done is the producer's callback for every record.
func (l *chaosLoad) done(r *client.Record, err error) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failed[failureReason(err)]++
		return
	}
	l.acked[seqOf(r.Value)] = ackedRecord{pos: position{r.Partition, r.Offset}, at: now.Sub(l.start)}
	if r.Partition >= 0 && r.Partition < chaosPartitions {
		l.noteGap(&l.worst[r.Partition], &l.lastAck[r.Partition], now)
	}
	l.noteGap(&l.worstAny, &l.lastAny, now)
}

// noteGap ends the gap since *last at now, keeping it in *worst if longer.
func (l *chaosLoad) noteGap(worst *ackGap, last *time.Time, now time.Time) {
	if g := (ackGap{last.Sub(l.start), now.Sub(l.start)}); g.length() > worst.length() {
		*worst = g
	}
	*last = now
}

// finish closes the gaps that last until the load stops.
func (l *chaosLoad) finish(end time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.lastAck {
		l.noteGap(&l.worst[i], &l.lastAck[i], end)
	}
	l.noteGap(&l.worstAny, &l.lastAny, end)
}

// failureReason names why a record failed: the error's reason when the
// cluster gave one, else the error itself; for a delivery timeout, the
// reason of the last error before it.
func failureReason(err error) string {
	if errors.Is(err, client.ErrDeliveryTimeout) {
		var multi interface{ Unwrap() []error }
		if errors.As(err, &multi) {
			if errs := multi.Unwrap(); len(errs) > 1 {
				return "delivery timeout, last error " + failureReason(errs[1])
			}
		}
		return "delivery timeout"
	}
	if e, ok := client.AsError(err); ok && e.Reason != "" {
		return e.Reason
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "deadline exceeded"
	}
	if e, ok := client.AsError(err); ok {
		return e.Code.String()
	}
	s := err.Error()
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return s
}

// report logs what the load saw: records produced, acknowledged and
// failed by reason, and the longest times without an acknowledgement.
func (l *chaosLoad) report(t *testing.T, h *chaosHistory) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var reasons []string
	total := 0
	for r, n := range l.failed {
		reasons = append(reasons, fmt.Sprintf("%s: %d", r, n))
		total += n
	}
	sort.Strings(reasons)
	t.Logf("load: %d records produced, %d acknowledged, %d failed (%s), %d read back that were never acknowledged",
		l.produced, len(l.acked), total, strings.Join(reasons, ", "), h.unacked)
	var per []string
	for i, g := range l.worst {
		per = append(per, fmt.Sprintf("%d: %v", i, g))
	}
	t.Logf("longest time without an acknowledged write: %v overall; per partition %s", l.worstAny, strings.Join(per, ", "))
}

// faultKind is one kind of fault the schedule injects.
type faultKind int

const (
	faultKill      faultKind = iota // SIGKILL, then a restart on the same data
	faultPause                      // SIGSTOP, then SIGCONT
	faultPartition                  // cut off from its peers, not from MinIO or the client
)

func (k faultKind) String() string {
	return [...]string{"kill -9", "SIGSTOP", "network partition"}[k]
}

// chaosFaults is the seeded fault schedule. Every random choice is drawn
// from rng in a fixed order whatever the cluster does, so a seed replays
// the same kinds and durations and the same pick among the brokers that
// lead partitions (which brokers those are is the cluster's doing).
type chaosFaults struct {
	t     *testing.T
	tc    *testCluster
	bn    *bridgeNet // nil: no network partitions on this machine
	rng   *rand.Rand
	start time.Time

	injected int
}

// logf logs what the schedule does, stamped with the time since the load
// started, as acknowledgement gaps and lost records are.
func (f *chaosFaults) logf(format string, args ...any) {
	f.t.Helper()
	f.t.Logf("t+%v "+format, append([]any{time.Since(f.start).Round(100 * time.Millisecond)}, args...)...)
}

// run injects faults one at a time until the deadline: each kind once per
// round in a random order, on a random broker among those that lead
// partitions, held for a random time; then it waits until every partition
// is led and fully in sync again, and a random 1-3 s more, before the next.
// If the cluster does not recover within a minute the test fails, no
// further fault is injected, and run returns false.
func (f *chaosFaults) run(ctx context.Context, until time.Time) bool {
	kinds := []faultKind{faultKill, faultPause}
	if f.bn != nil {
		kinds = append(kinds, faultPartition)
	}
	var round []faultKind
	for time.Now().Before(until) {
		if len(round) == 0 {
			for _, i := range f.rng.Perm(len(kinds)) {
				round = append(round, kinds[i])
			}
		}
		kind := round[0]
		round = round[1:]
		pick := f.rng.IntN(6) // 6: as fair among 1, 2 or 3 candidates
		hold := 3*time.Second + time.Duration(f.rng.Int64N(int64(5*time.Second)))
		down := 500*time.Millisecond + time.Duration(f.rng.Int64N(int64(2500*time.Millisecond)))
		gap := time.Second + time.Duration(f.rng.Int64N(int64(2*time.Second)))
		// How long a cut lasts after its victim is deposed: the new leader
		// takes writes, seals and uploads segments and commits manifests
		// in its epoch while the old one, cut off from its peers, still
		// reaches the bucket.
		overlap := 3*time.Second + time.Duration(f.rng.Int64N(int64(5*time.Second)))

		f.injected++
		victim, led := f.victim(ctx, pick)
		switch kind {
		case faultKill:
			f.logf("fault %d: kill -9 broker %d (leader of %v), restart after %v", f.injected, victim.id, led, down.Round(time.Millisecond))
			victim.kill9()
			<-time.After(down)
			victim.start()
		case faultPause:
			f.logf("fault %d: SIGSTOP broker %d (leader of %v) for %v", f.injected, victim.id, led, hold.Round(time.Millisecond))
			victim.cmd.Process.Signal(syscall.SIGSTOP)
			f.holdUntilDeposed(ctx, victim, led, hold)
			victim.cmd.Process.Signal(syscall.SIGCONT)
		case faultPartition:
			f.logf("fault %d: cut broker %d (leader of %v) off from its peers for %v", f.injected, victim.id, led, hold.Round(time.Millisecond))
			if err := f.bn.cutOff(victim.id - 1); err != nil {
				f.t.Fatal(err)
			}
			f.holdUntilDeposed(ctx, victim, led, hold)
			f.logf("fault %d: keeping broker %d cut off for %v more, beside its successors", f.injected, victim.id, overlap.Round(time.Millisecond))
			<-time.After(overlap)
			if err := f.bn.heal(victim.id - 1); err != nil {
				f.t.Fatal(err)
			}
		}
		f.logf("fault %d healed", f.injected)
		var md *stratav1.GetMetadataResponse
		if !waitUntil(time.Minute, func() bool {
			md = controllerView(ctx, f.tc)
			return inSync(md)
		}) {
			if md == nil {
				md = metadataWithin(ctx, f.tc, 3*time.Second)
			}
			f.logf("fault %d: not recovered within a minute: %s", f.injected, describeMetadata(md))
			f.t.Errorf("the cluster did not recover within a minute of fault %d (%v of broker %d): %s", f.injected, kind, victim.id, describeMetadata(md))
			f.dumpNetwork()
			return false
		}
		f.logf("fault %d recovered: %s", f.injected, describeMetadata(md))
		<-time.After(gap)
	}
	return true
}

// victim picks the pick-th (modulo) of the brokers that lead a partition,
// in id order, or of all brokers if the metadata names no leader, and
// returns it with the partitions it leads.
func (f *chaosFaults) victim(ctx context.Context, pick int) (*brokerProc, []int32) {
	led := map[int32][]int32{}
	if md := metadataWithin(ctx, f.tc, 3*time.Second); md != nil {
		for _, tm := range md.Topics {
			for _, pm := range tm.Partitions {
				if pm.Leader > 0 {
					led[pm.Leader] = append(led[pm.Leader], pm.Partition)
				}
			}
		}
	}
	var candidates []*brokerProc
	for _, b := range f.tc.brokers {
		if len(led[int32(b.id)]) > 0 {
			candidates = append(candidates, b)
		}
	}
	if len(candidates) == 0 {
		candidates = f.tc.brokers
	}
	b := candidates[pick%len(candidates)]
	return b, led[int32(b.id)]
}

// holdUntilDeposed keeps a fault in place for hold, and then, for at most
// 30 s more, until the other brokers' metadata names a leader other than
// the victim for every partition it led: an old leader that comes back
// still leading meets none of the cases this test is about.
func (f *chaosFaults) holdUntilDeposed(ctx context.Context, victim *brokerProc, led []int32, hold time.Duration) {
	began := time.Now()
	<-time.After(hold)
	deposed := func() bool {
		md := metadataWithin(ctx, f.tc, 3*time.Second, int32(victim.id))
		if md == nil {
			return false
		}
		for _, tm := range md.Topics {
			if tm.Name != chaosTopic || len(tm.Partitions) != chaosPartitions {
				continue
			}
			for _, pm := range tm.Partitions {
				if slices.Contains(led, pm.Partition) && (pm.Leader == int32(victim.id) || pm.Leader <= 0) {
					return false
				}
			}
			return true
		}
		return false
	}
	if !deposed() {
		ok := waitUntil(30*time.Second, deposed)
		f.logf("fault %d: held %v, until the victim's partitions had other leaders (%v)", f.injected, time.Since(began).Round(100*time.Millisecond), ok)
	}
}

// dumpNetwork logs each broker's last gossip membership events (from its
// log: the metadata does not say who sees whom alive) and the links and
// routes of every namespace, to tell a cluster that does not recover from
// a network that did not heal.
func (f *chaosFaults) dumpNetwork() {
	for _, b := range f.tc.brokers {
		var events []string
		for _, l := range lines(b.log()) {
			if strings.Contains(l, `msg="member join"`) || strings.Contains(l, `msg="member fail"`) || strings.Contains(l, `msg="member leave"`) {
				events = append(events, l)
			}
		}
		f.t.Logf("broker %d, last gossip membership events:\n%s", b.id, strings.Join(events[max(0, len(events)-6):], "\n"))
	}
	if f.bn == nil {
		return
	}
	for _, h := range f.bn.hosts {
		links, _ := exec.Command("ip", "netns", "exec", h.ns, "ip", "-br", "link").CombinedOutput()
		routes, _ := exec.Command("ip", "netns", "exec", h.ns, "ip", "route").CombinedOutput()
		f.t.Logf("namespace %s (%s):\n%s%s", h.ns, h.ip, links, routes)
	}
	bridge, _ := exec.Command("ip", "-br", "link", "show", "master", f.bn.bridge).CombinedOutput()
	f.t.Logf("bridge %s ports:\n%s", f.bn.bridge, bridge)
}

// healAll undoes any fault still in place (after a failure mid-fault).
func (f *chaosFaults) healAll() {
	for _, b := range f.tc.brokers {
		if b.cmd != nil {
			b.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	if f.bn != nil {
		for i := range f.bn.hosts {
			f.bn.heal(i)
		}
	}
}

// metadataWithin asks the live brokers but skip, one after the other and
// each for at most d, for the metadata. Each is asked alone: a client's
// metadata call would try the brokers it knows, a paused one among them.
func metadataWithin(ctx context.Context, tc *testCluster, d time.Duration, skip ...int32) *stratav1.GetMetadataResponse {
	for _, b := range tc.brokers {
		if slices.Contains(skip, int32(b.id)) {
			continue
		}
		if md := brokerMetadata(ctx, b, d); md != nil {
			return md
		}
	}
	return nil
}

// brokerMetadata asks one broker, and only it, for the metadata it holds.
func brokerMetadata(ctx context.Context, b *brokerProc, d time.Duration) *stratav1.GetMetadataResponse {
	if b.cmd == nil {
		return nil
	}
	conn, err := grpcConn(b.addr)
	if err != nil {
		return nil
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	md, err := stratav1.NewMetadataServiceClient(conn).GetMetadata(ctx, &stratav1.GetMetadataRequest{})
	if err != nil {
		return nil
	}
	return md
}

// controllerView is the metadata as the controller itself holds it, or nil
// when no broker names a controller that answers as one: another broker's
// copy may lag, or come from one that lost touch with the Raft group.
func controllerView(ctx context.Context, tc *testCluster) *stratav1.GetMetadataResponse {
	md := metadataWithin(ctx, tc, 3*time.Second)
	if md == nil || md.ControllerId <= 0 || int(md.ControllerId) > len(tc.brokers) {
		return nil
	}
	own := brokerMetadata(ctx, tc.byID(md.ControllerId), 3*time.Second)
	if own == nil || own.ControllerId != md.ControllerId {
		return nil
	}
	return own
}

// inSync reports whether every partition of the chaos topic has a leader
// and all three replicas in its ISR.
func inSync(md *stratav1.GetMetadataResponse) bool {
	if md == nil {
		return false
	}
	for _, tm := range md.Topics {
		if tm.Name == chaosTopic {
			return len(tm.Partitions) == chaosPartitions && allISR(tm, 3)
		}
	}
	return false
}

// describeMetadata renders each partition's leader, epoch and ISR.
func describeMetadata(md *stratav1.GetMetadataResponse) string {
	if md == nil {
		return "no metadata"
	}
	var parts []string
	for _, tm := range md.Topics {
		if tm.Name != chaosTopic {
			continue
		}
		for _, pm := range tm.Partitions {
			parts = append(parts, fmt.Sprintf("%d: leader %d epoch %d isr %v", pm.Partition, pm.Leader, pm.LeaderEpoch, pm.Isr))
		}
	}
	return fmt.Sprintf("controller %d; %s", md.ControllerId, strings.Join(parts, ", "))
}

// waitUntil polls cond until it holds or within passes, and says which.
// It polls gently: each poll may dial brokers on a machine the brokers
// already keep busy.
func waitUntil(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-time.After(200 * time.Millisecond)
	}
	return true
}

// chaosHistory is what reading the topic back found.
type chaosHistory struct {
	read        int // records read
	acked       int // records acknowledged to the producer
	lost        int // acknowledged, not read anywhere
	duplicate   int // read more than once (each extra copy)
	misplaced   int // acknowledged, read at another partition or offset
	gaps        int // holes in a partition's offsets, or a start above 0
	reordered   int // an acknowledged record of a key read before an earlier one
	corrupt     int // a key or value that is not what was produced
	doubleAcked int // offsets acknowledged to more than one record
	unacked     int // read, never acknowledged (failed or unanswered): allowed
	unread      int // acknowledged beyond where a partition's read failed

	ends     [chaosPartitions]int64 // the offset after the last one read
	complete [chaosPartitions]bool  // read to the high watermark
	at       map[position]int64     // the seq read at each offset

	coldRecords  int // records read from segment objects in the bucket
	coldMismatch int // of those, ones that differ from the partition's log
	coldExamples []string
	examples     []string
	readErrs     []error
}

func (h *chaosHistory) example(format string, args ...any) {
	if len(h.examples) < 12 {
		h.examples = append(h.examples, fmt.Sprintf(format, args...))
	}
}

// checkChaosHistory reads every partition from its earliest offset to its
// high watermark and compares what it finds with what was acknowledged.
// Partitions are read one at a time, so that a read that fails tells which
// acknowledged records are unknown rather than lost.
func checkChaosHistory(ctx context.Context, t *testing.T, c *client.Client, load *chaosLoad, within time.Duration) *chaosHistory {
	t.Helper()
	load.mu.Lock()
	acked := load.acked
	load.mu.Unlock()
	h := &chaosHistory{acked: len(acked), at: map[position]int64{}}

	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	seen := map[int64]position{} // where each sequence number was read
	at := h.at
	lastOfKey := map[string]int64{} // the last acknowledged seq read per key
	for p := range int32(chaosPartitions) {
		err := readPartition(ctx, c, p, func(r *client.Record) {
			h.read++
			pos := position{r.Partition, r.Offset}
			switch next := h.ends[p]; {
			case next == 0 && r.Offset != 0:
				h.gaps++
				h.example("partition %d starts at offset %d, not 0", p, r.Offset)
			case next > 0 && r.Offset != next:
				h.gaps++
				h.example("partition %d: offset %d follows %d", p, r.Offset, next-1)
			}
			h.ends[p] = r.Offset + 1
			seq := seqOf(r.Value)
			at[pos] = seq
			if !bytes.Equal(r.Key, chaosKey(seq)) || !bytes.Equal(r.Value, payload(seq, chaosValueBytes)) {
				h.corrupt++
				h.example("%d/%d holds a record whose key or value is not what was produced for seq %d", p, r.Offset, seq)
				return
			}
			if prev, dup := seen[seq]; dup {
				h.duplicate++
				ack := "not acknowledged"
				if a, ok := acked[seq]; ok {
					ack = fmt.Sprintf("acknowledged at %d/%d", a.pos.partition, a.pos.offset)
				}
				h.example("seq %d read twice: at %d/%d and %d/%d (%s)", seq, prev.partition, prev.offset, p, r.Offset, ack)
				return
			}
			seen[seq] = pos
			if _, ok := acked[seq]; !ok {
				h.unacked++
				return
			}
			key := string(r.Key)
			if last, ok := lastOfKey[key]; ok && seq < last {
				h.reordered++
				h.example("key %s: seq %d read after seq %d", key, seq, last)
			}
			lastOfKey[key] = max(lastOfKey[key], seq)
		})
		if err != nil {
			h.readErrs = append(h.readErrs, fmt.Errorf("partition %d, after offset %d: %w", p, h.ends[p]-1, err))
		} else {
			h.complete[p] = true
		}
	}

	// Acknowledged records that are missing or elsewhere, and offsets
	// acknowledged to two records (the old leader answered for an offset
	// that now holds another record).
	byPos := map[position][]int64{}
	seqs := make([]int64, 0, len(acked))
	for seq, a := range acked {
		byPos[a.pos] = append(byPos[a.pos], seq)
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	lostPer := map[int32][]ackedRecord{}
	for _, seq := range seqs {
		a := acked[seq]
		got, ok := seen[seq]
		switch {
		case !ok && !h.complete[a.pos.partition] && a.pos.offset >= h.ends[a.pos.partition]:
			// Its partition could not be read that far: not lost, unknown.
			h.unread++
		case !ok:
			h.lost++
			lostPer[a.pos.partition] = append(lostPer[a.pos.partition], a)
			holder, held := at[a.pos]
			_, holderAcked := acked[holder]
			if held {
				h.example("seq %d acknowledged at %d/%d (t+%v) is gone; that offset holds seq %d (acknowledged: %v)", seq, a.pos.partition, a.pos.offset, a.at.Round(time.Millisecond), holder, holderAcked)
			} else {
				h.example("seq %d acknowledged at %d/%d (t+%v) is gone; that offset was not read", seq, a.pos.partition, a.pos.offset, a.at.Round(time.Millisecond))
			}
		case got != a.pos:
			h.misplaced++
			h.example("seq %d acknowledged at %d/%d (t+%v), read at %d/%d", seq, a.pos.partition, a.pos.offset, a.at.Round(time.Millisecond), got.partition, got.offset)
		}
	}
	for _, s := range byPos {
		if len(s) > 1 {
			h.doubleAcked++
		}
	}
	for p, recs := range lostPer {
		first, last := recs[0], recs[0]
		for _, r := range recs {
			if r.pos.offset < first.pos.offset {
				first = r
			}
			if r.pos.offset > last.pos.offset {
				last = r
			}
		}
		t.Logf("partition %d lost %d acknowledged records at offsets %d..%d, acknowledged between t+%v and t+%v",
			p, len(recs), first.pos.offset, last.pos.offset, first.at.Round(time.Millisecond), last.at.Round(time.Millisecond))
	}
	return h
}

// readPartition reads one partition from its earliest offset up to its high
// watermark through a consumer of its own, passing each record to fn.
func readPartition(ctx context.Context, c *client.Client, p int32, fn func(*client.Record)) error {
	k := c.NewConsumer(client.WithStopAtEnd(true))
	defer k.Close()
	if err := k.Assign(chaosTopic, p, client.Earliest()); err != nil {
		return err
	}
	for {
		recs, err := k.Poll(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, r := range recs {
			if r.Partition != p {
				return fmt.Errorf("a record of partition %d from a consumer of partition %d", r.Partition, p)
			}
			fn(r)
		}
	}
}

// checkManifests reads each partition's manifest head from the bucket with
// minio-go and checks that the cold tier ends at or below the partition's
// high watermark, as its leader gives it (invariant 5: only committed
// offsets are uploaded), and that the history was read to that mark.
func checkManifests(ctx context.Context, t *testing.T, c *client.Client, m *miniotest.Server, topicID string, h *chaosHistory) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// Where a broker's hot tier starts, to show that the history was read
	// across the cold tier; any broker's copy does for that.
	localStart := map[int32]int64{}
	if d, err := c.DescribeTopic(ctx, chaosTopic); err == nil {
		for _, pd := range d.Partitions {
			localStart[pd.Metadata.GetPartition()] = pd.LocalStartOffset
		}
	}
	r := minioReader{c: m.Client, bucket: m.Bucket}
	for p := range int32(chaosPartitions) {
		hw, err := c.ListOffsets(ctx, chaosTopic, p, client.Latest())
		if err != nil {
			t.Errorf("%s/%d: high watermark: %v", chaosTopic, p, err)
			continue
		}
		head, _, err := tiering.LoadHead(ctx, r, tiering.PartitionRef{Topic: chaosTopic, TopicID: topicID, Partition: p})
		if err != nil {
			t.Errorf("manifest of %s/%d: %v", chaosTopic, p, err)
			continue
		}
		if head == nil || head.Empty() {
			t.Errorf("%s/%d has nothing in the cold tier: the run did not exercise tiering", chaosTopic, p)
			continue
		}
		end := head.EndOffset()
		t.Logf("%s/%d: high watermark %d, read to %d, a hot tier from %d; manifest generation %d, leader epoch %d, cold tier %d..%d",
			chaosTopic, p, hw, h.ends[p], localStart[p], head.Generation, head.LeaderEpoch, head.StartOffset(), end)
		if end > hw {
			t.Errorf("%s/%d: the manifest ends at %d, above the high watermark %d: the cold tier holds offsets that were never committed", chaosTopic, p, end, hw)
		}
		if h.complete[p] && h.ends[p] != hw {
			t.Errorf("%s/%d: read to %d, the high watermark is %d", chaosTopic, p, h.ends[p], hw)
		}
	}
}

// checkColdTier reads every segment object the manifests list straight
// from the bucket (minio-go, not the cold reader) and compares each record
// with what the partition holds at its offset: the manifest is the commit
// point, so the bucket must hold the partition's log, not a version of it
// that a deposed leader uploaded. Only offsets the history was read to are
// compared; records are told apart by their sequence numbers.
func checkColdTier(ctx context.Context, t *testing.T, m *miniotest.Server, topicID string, h *chaosHistory) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	r := minioReader{c: m.Client, bucket: m.Bucket}
	for p := range int32(chaosPartitions) {
		ref := tiering.PartitionRef{Topic: chaosTopic, TopicID: topicID, Partition: p}
		head, _, err := tiering.LoadHead(ctx, r, ref)
		if err != nil || head == nil {
			continue // checkManifests reports it
		}
		var segs []tiering.SegmentRef
		for _, pr := range head.Parts {
			part, err := tiering.LoadPart(ctx, r, pr.Key)
			if err != nil {
				t.Errorf("%s/%d: %v", chaosTopic, p, err)
				continue
			}
			segs = append(segs, part.Segments[min(pr.Skip, len(part.Segments)):]...)
		}
		segs = append(segs, head.Tail...)
		for _, seg := range segs {
			opts := minio.GetObjectOptions{}
			if err := opts.SetRange(0, seg.LogLen-1); err != nil {
				t.Fatal(err)
			}
			obj, err := m.Client.GetObject(ctx, m.Bucket, seg.Key, opts)
			if err != nil {
				t.Errorf("%s/%d: segment %s: %v", chaosTopic, p, seg.Key, err)
				continue
			}
			data, err := io.ReadAll(obj)
			obj.Close()
			if err != nil {
				t.Errorf("%s/%d: segment %s: %v", chaosTopic, p, seg.Key, err)
				continue
			}
			for len(data) > 0 {
				b, rest, err := record.Next(data)
				if err != nil {
					t.Errorf("%s/%d: segment %s: %v", chaosTopic, p, seg.Key, err)
					break
				}
				data = rest
				recs, err := b.Records()
				if err != nil {
					t.Errorf("%s/%d: segment %s: %v", chaosTopic, p, seg.Key, err)
					break
				}
				for _, rec := range recs {
					if rec.Offset < seg.BaseOffset || rec.Offset > seg.LastOffset || !h.complete[p] || rec.Offset >= h.ends[p] {
						continue
					}
					h.coldRecords++
					seq := seqOf(rec.Value)
					if held, ok := h.at[position{p, rec.Offset}]; !ok || held != seq {
						h.coldMismatch++
						if len(h.coldExamples) < 5 {
							h.coldExamples = append(h.coldExamples, fmt.Sprintf("segment %s (uploaded in leader epoch %d) holds seq %d at %d/%d, the partition holds seq %d there", seg.Key, seg.Epoch, seq, p, rec.Offset, held))
						}
					}
				}
			}
		}
	}
}

// minioReader reads the bucket with minio-go, independently of the code
// under test, for tiering.LoadHead. It reads whole objects and metadata
// only; ranged reads are the cold reader's business, not this check's.
type minioReader struct {
	c      *minio.Client
	bucket string
}

func (r minioReader) Get(ctx context.Context, key string) ([]byte, objstore.ObjectInfo, error) {
	obj, err := r.c.GetObject(ctx, r.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, objstore.ObjectInfo{}, r.err(key, err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		return nil, objstore.ObjectInfo{}, r.err(key, err)
	}
	info, err := obj.Stat()
	if err != nil {
		return nil, objstore.ObjectInfo{}, r.err(key, err)
	}
	return data, objstore.ObjectInfo{Key: key, Size: info.Size, ETag: info.ETag, ModTime: info.LastModified}, nil
}

func (r minioReader) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	info, err := r.c.StatObject(ctx, r.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return objstore.ObjectInfo{}, r.err(key, err)
	}
	return objstore.ObjectInfo{Key: key, Size: info.Size, ETag: info.ETag, ModTime: info.LastModified}, nil
}

func (r minioReader) List(ctx context.Context, prefix string, fn func(objstore.ObjectInfo) error) error {
	for o := range r.c.ListObjects(ctx, r.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return o.Err
		}
		if err := fn(objstore.ObjectInfo{Key: o.Key, Size: o.Size, ETag: o.ETag, ModTime: o.LastModified}); err != nil {
			return err
		}
	}
	return nil
}

func (r minioReader) Open(ctx context.Context, key string) (objstore.ObjectReader, error) {
	return nil, fmt.Errorf("minioReader: ranged reads of %s are not needed by this check", key)
}

// err maps minio-go's not-found to objstore.ErrNotFound, as LoadHead
// expects of a partition with no cold tier yet.
func (r minioReader) err(key string, err error) error {
	if minio.ToErrorResponse(err).Code == "NoSuchKey" {
		return fmt.Errorf("%s: %w", key, objstore.ErrNotFound)
	}
	return err
}
