package broker

// Idempotent producers (Kafka's KIP-98): a producer retrying a batch after a
// lost answer, a timeout or a leader failover must not write it twice.
//
// A producer gets an id from the controller (InitProducer) and stamps each
// batch with it, its epoch and the sequence number of the batch's first
// record; sequences count the producer's records in one partition from 0 and
// wrap from MaxInt32 to 0. Per partition, producerState keeps each producer's
// epoch and its last producerBatches batches: first and last sequence, first
// and last offset. The leader checks a batch before appending it
// (checkLocked), in this order:
//   - an id, epoch or sequence out of range: INVALID_REQUEST;
//   - a producer it does not know: accepted only at sequence 0 (a new
//     producer's first batch, or one starting again under a new epoch);
//     else UNKNOWN_PRODUCER_ID. The partition never saw the producer's
//     first batches or forgot it (to bound memory, or with its log), so a
//     resend of a batch written before cannot be told from a gap; the
//     producer starts its sequences again under its next epoch (Kafka's
//     KIP-360);
//   - an epoch older than the producer's: INVALID_PRODUCER_EPOCH (a newer
//     instance fenced it); a newer epoch starts over at sequence 0;
//   - the same sequence range as a remembered batch: a duplicate, answered
//     with the original's offsets while nothing is written;
//   - otherwise the batch must start right after the producer's last one:
//     OUT_OF_ORDER_SEQUENCE if not.
//
// A producer may have several batches of a partition in flight at once, and
// calls on one connection are served concurrently, so a batch can reach the
// leader before the ones sent ahead of it. Before the check, a batch that
// starts past where its producer's sequences stand waits for them to get
// there, at most sequenceWait (awaitTurn): refused at once, it would send its
// producer back to retry, and with many in flight no batch might ever come in
// its turn. The wait only delays the check, which decides as above.
//
// Every replica records each batch it appends (record), so a follower that
// becomes leader knows what its predecessor wrote.
//
// The state is snapshotted at every segment roll (producer_snapshot_files.go)
// and, in the cold tier, with every uploaded segment (producer_cold.go). A
// leader without the state in memory (it just opened the partition, or its
// log was truncated or reset) rebuilds it the first time it checks a batch:
// the newest snapshot at or below the log end, then the headers of the
// batches from there to the end, at most a segment or so. A retry is
// recognised however long ago the producer's last batch was written, as
// long as the producer is remembered. Memory is bounded by maxProducers per
// partition: past it, the producer seen least recently is forgotten.
//
// Lock order: producerState.mu, then producerSnapshots.mu, then the log's
// locks (the leader appends while holding it).

import (
	"container/list"
	"context"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/record"
)

const (
	// producerBatches is how many of a producer's latest batches a
	// partition remembers: a resend of any of them is recognised. Kafka's
	// number, which its clients' in-flight limit matches.
	producerBatches = 5
	// maxProducers bounds the producers a partition remembers.
	maxProducers = 10_000
	// sequenceWait bounds how long a batch waits for its producer's
	// earlier batches (awaitTurn): long enough for any sent ahead of it on
	// a live connection, short enough that a gap that stays open (a batch
	// that was refused or lost) is refused soon.
	sequenceWait = time.Second
	// maxCaptured bounds the states kept for snapshots not yet written.
	// The broker's loop writes them within a tick or so; a log rolling
	// faster than that has the older ones computed from the log instead.
	maxCaptured = 8
)

// InitProducer gives an idempotent producer its identity: an id no other
// producer of the cluster has had, and epoch 0. Only the controller hands
// out ids; another broker passes the call on to it (controller.go).
func (b *Broker) InitProducer(ctx context.Context) (id int64, epoch int16, err error) {
	type ide struct {
		id    int64
		epoch int16
	}
	v, err := forward(b, ctx, func() (ide, error) {
		id, epoch, err := b.initProducer(ctx)
		return ide{id, epoch}, err
	}, func(c ControllerClient) (ide, error) {
		id, epoch, err := c.InitProducer(ctx)
		return ide{id, epoch}, err
	})
	return v.id, v.epoch, err
}

func (b *Broker) initProducer(ctx context.Context) (id int64, epoch int16, err error) {
	return b.role.initProducer(ctx)
}

func (b clusterMember) initProducer(ctx context.Context) (id int64, epoch int16, err error) {
	id, err = b.meta.AllocateProducerID(ctx)
	if err != nil {
		return 0, 0, clusterError(err)
	}
	if id, err = b.bindProducerID(ctx, id); err != nil {
		return 0, 0, err
	}
	return id, 0, nil
}

// producerBatch is a batch a producer wrote.
type producerBatch struct {
	firstSeq, lastSeq      int32
	baseOffset, lastOffset int64
	logAppendTime          int64 // -1 under CreateTime
}

// producerEntry is what a partition knows of one producer.
type producerEntry struct {
	id    int64
	epoch int16
	// batches is a ring of the latest batches of this epoch, oldest at
	// head; n of them are set.
	batches [producerBatches]producerBatch
	head, n int
}

func (e *producerEntry) last() *producerBatch {
	return &e.batches[(e.head+e.n-1)%producerBatches]
}

func (e *producerEntry) add(b producerBatch) {
	if e.n < producerBatches {
		e.n++
	} else {
		e.head = (e.head + 1) % producerBatches
	}
	*e.last() = b
}

// producerState remembers, per partition, the recent batches of idempotent
// producers, so that a retried batch is recognised instead of written
// twice. It is kept by leaders and followers alike (from the batches they
// append), so a new leader knows what its predecessor accepted.
type producerState struct {
	// mu is held by the leader from the check of a batch to its record,
	// so that two copies of one batch cannot both pass.
	mu struct {
		sync.Mutex
		// built is false until the state is rebuilt from the log, and
		// again after reset.
		built     bool
		producers map[int64]*list.Element // of *producerEntry
		lru       list.List               // most recently seen first
		// next is the offset after the last batch the state reflects: a
		// batch below it is in the state already.
		next int64
		// changed is closed (and dropped) when the state changes, for the
		// batches waiting for their turn; nil while none waits.
		changed chan struct{}
		// exact is false when the state was built without the whole
		// history below the log start (buildInto): what it gives a
		// snapshot is then partial.
		exact bool
		// buildFailed stops a follower from trying again, at every chunk,
		// a rebuild that failed; reset clears it.
		buildFailed bool
		// seenBase is the newest segment base the state has looked at
		// (appendedLocked), -1 before it looked at any.
		seenBase int64
		// captured are states at segment bases the log crossed while
		// they were recorded, oldest first, for the snapshots of the
		// sealed segments ending there (ensureAt): at most maxCaptured.
		captured []*producerSnapshot
	}
	// snaps are the partition's snapshot files, set when its log opens
	// (attach).
	snaps atomic.Pointer[producerSnapshots]
}

func newProducerState() *producerState {
	s := &producerState{}
	s.mu.producers = make(map[int64]*list.Element)
	s.mu.seenBase = -1
	return s
}

// attach gives the state its partition's log, whose directory holds the
// snapshots, once the log is open and before any other use; snapshots the
// log does not back (above its end) are deleted.
func (s *producerState) attach(l *hotlog.Log, logger *slog.Logger) {
	ps := openProducerSnapshots(l, logger)
	ps.state = s
	s.snaps.Store(ps)
}

// files returns the snapshot files of l, attaching them first if that was
// not done (a state used without a partition, in tests).
func (s *producerState) files(l *hotlog.Log) *producerSnapshots {
	if ps := s.snaps.Load(); ps != nil {
		return ps
	}
	ps := openProducerSnapshots(l, slog.Default())
	ps.state = s
	s.snaps.CompareAndSwap(nil, ps)
	return s.snaps.Load()
}

// record notes a batch appended to the log, with its offsets assigned.
func (s *producerState) record(b record.Batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appendedLocked(b)
}

// appendReplica is a follower's append of data, batches whose offsets the
// leader assigned, and their record. The state is built first (once after
// the log opened or lost its tail) so that it follows every batch and
// holds the state at each segment the log seals, for that segment's
// snapshot, instead of the snapshot being computed by reading the segment
// again. Holding the lock from the append to the record keeps the state
// and the log's end in step for whoever reads both under it.
func (s *producerState) appendReplica(l *hotlog.Log, data []byte, readFrom int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.built && !s.mu.buildFailed {
		if err := s.rebuildLocked(l); err != nil {
			s.mu.buildFailed = true
			s.files(l).logger.Warn("cannot build the producer state of a follower; its snapshots will be computed from the log", "dir", l.Dir(), "err", err)
		}
	}
	end := l.LogEndOffset()
	appendReplica := l.AppendReplica
	if readFrom != NoReadFrom {
		appendReplica = func(data []byte) (hotlog.AppendResult, error) { return l.AppendReplicaFrom(data, readFrom) }
	}
	if _, err := appendReplica(data); err != nil {
		if l.LogEndOffset() != end {
			s.clearLocked() // part of data is in the log, unrecorded
		}
		return err
	}
	s.appendedLocked(data)
	return nil
}

// appendedLocked records data, whole batches just appended to the log in
// order, and keeps the state at each segment base they reach or pass (the
// log rolled there): with every batch below that base recorded and none
// above, the state at that moment is the state as of the base.
func (s *producerState) appendedLocked(data []byte) {
	if !s.mu.built {
		return // the rebuild will find them in the log
	}
	ps := s.snaps.Load()
	var bases []int64
	if ps != nil && ps.log.ActiveBaseOffset() > s.mu.seenBase {
		for _, seg := range ps.log.Segments() {
			if seg.BaseOffset > s.mu.seenBase {
				bases = append(bases, seg.BaseOffset)
			}
		}
	}
	end := int64(-1)
	for rest := data; len(rest) > 0; {
		b, next, err := record.NextVerified(rest) // appended, so whole
		if err != nil {
			break
		}
		for len(bases) > 0 && bases[0] <= b.BaseOffset() {
			s.captureLocked(ps, bases[0])
			bases = bases[1:]
		}
		s.recordLocked(b)
		end, rest = b.NextOffset(), next
	}
	if len(data) == 0 && ps != nil {
		end = ps.log.LogEndOffset()
	}
	for len(bases) > 0 && bases[0] <= end {
		s.captureLocked(ps, bases[0])
		bases = bases[1:]
	}
}

// captureLocked keeps the state as of x, a segment base, if the state is
// that: no recorded batch reaches past x. A base below that (crossed while
// the state was not built, or while a chunk was cut short) is passed over:
// its snapshot is computed from the log.
func (s *producerState) captureLocked(ps *producerSnapshots, x int64) {
	s.mu.seenBase = max(s.mu.seenBase, x)
	if x < s.mu.next {
		return
	}
	epoch, ok, err := lastEpochAt(ps.log, x)
	if err != nil || !ok {
		return // x is the log start, or the log moved: nothing to snapshot
	}
	snap := s.snapshotLocked(x, epoch)
	snap.partial = !s.mu.exact
	if len(s.mu.captured) == maxCaptured {
		s.mu.captured = slices.Delete(s.mu.captured, 0, 1)
	}
	s.mu.captured = append(s.mu.captured, snap)
}

// takeCaptured returns, and forgets, the state kept as of x, if any.
func (s *producerState) takeCaptured(x int64) *producerSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, snap := range s.mu.captured {
		if snap.offset == x {
			s.mu.captured = slices.Delete(s.mu.captured, i, i+1)
			return snap
		}
	}
	return nil
}

// captureIdleLocked keeps the state as of segments sealed without an
// append after them (by age): the caller holds the partition's lock, so no
// append or truncation is under way and the state is that of the log end.
func (s *producerState) captureIdleLocked() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appendedLocked(nil)
}

// reset forgets everything: the state is rebuilt from the log before the
// next check. Call it after the log lost its tail (truncated to a new
// leader's, or reset to a new start), which may hold remembered batches;
// it also deletes the snapshots that describe what the log lost.
func (s *producerState) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
	s.mu.buildFailed = false
	if ps := s.snaps.Load(); ps != nil {
		if err := ps.prune(); err != nil {
			ps.logger.Warn("pruning producer snapshots after a truncation failed", "dir", ps.dir, "err", err)
		}
	}
}

func (s *producerState) clearLocked() {
	s.notifyLocked()
	clear(s.mu.producers)
	s.mu.lru.Init()
	s.mu.built = false
	s.mu.next = 0
	s.mu.exact = false
	s.mu.seenBase = -1
	s.mu.captured = nil
}

// rebuild replaces the state with the state at l's end: its newest
// snapshot at or below the end, then the headers of the batches from there.
// On error the state is left unbuilt, to be rebuilt at the next check.
func (s *producerState) rebuild(l *hotlog.Log) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rebuildLocked(l)
}

func (s *producerState) rebuildLocked(l *hotlog.Log) error {
	s.clearLocked()
	exact, _, err := s.files(l).buildInto(s, l.LogEndOffset())
	if err != nil {
		s.clearLocked()
		return err
	}
	s.mu.built, s.mu.exact = true, exact
	return nil
}

// snapshotSealed writes the snapshots the log's sealed segments lack (see
// producerSnapshots.snapshotSealed); nothing before attach.
func (s *producerState) snapshotSealed() error {
	if ps := s.snaps.Load(); ps != nil {
		return ps.snapshotSealed()
	}
	return nil
}

// snapshotLocked copies the state into a snapshot at offset, producers
// least recently seen first.
func (s *producerState) snapshotLocked(offset int64, lastEpoch int32) *producerSnapshot {
	snap := &producerSnapshot{offset: offset, lastEpoch: lastEpoch, producers: make([]producerEntry, 0, len(s.mu.producers))}
	for el := s.mu.lru.Back(); el != nil; el = el.Prev() {
		e := el.Value.(*producerEntry)
		c := producerEntry{id: e.id, epoch: e.epoch, n: e.n}
		for i := range e.n {
			c.batches[i] = e.batches[(e.head+i)%producerBatches]
		}
		snap.producers = append(snap.producers, c)
	}
	return snap
}

// loadLocked replaces the state with a snapshot's (keeping the most
// recently seen maxProducers, should it hold more).
func (s *producerState) loadLocked(snap *producerSnapshot) {
	clear(s.mu.producers)
	s.mu.lru.Init()
	ps := snap.producers
	if len(ps) > maxProducers {
		ps = ps[len(ps)-maxProducers:]
	}
	for i := range ps {
		e := ps[i]
		s.mu.producers[e.id] = s.mu.lru.PushFront(&e)
	}
}

// ensureBuiltLocked rebuilds the state from l unless it is built.
func (s *producerState) ensureBuiltLocked(l *hotlog.Log) error {
	if s.mu.built {
		return nil
	}
	return s.rebuildLocked(l)
}

// recordLocked notes an appended batch.
func (s *producerState) recordLocked(b record.Batch) {
	id := b.ProducerID()
	if id == record.NoProducerID || b.BaseOffset() < s.mu.next {
		return
	}
	s.mu.next = b.NextOffset()
	s.notifyLocked()
	var e *producerEntry
	if el, ok := s.mu.producers[id]; ok {
		s.mu.lru.MoveToFront(el)
		e = el.Value.(*producerEntry)
	} else {
		if len(s.mu.producers) >= maxProducers {
			oldest := s.mu.lru.Back()
			delete(s.mu.producers, oldest.Value.(*producerEntry).id)
			s.mu.lru.Remove(oldest)
		}
		e = &producerEntry{id: id, epoch: b.ProducerEpoch()}
		s.mu.producers[id] = s.mu.lru.PushFront(e)
	}
	if b.ProducerEpoch() != e.epoch {
		*e = producerEntry{id: id, epoch: b.ProducerEpoch()}
	}
	pb := producerBatch{
		firstSeq:      b.BaseSequence(),
		lastSeq:       addSequence(b.BaseSequence(), b.LastOffsetDelta()),
		baseOffset:    b.BaseOffset(),
		lastOffset:    b.LastOffset(),
		logAppendTime: -1,
	}
	if b.TimestampType() == record.LogAppendTime {
		pb.logAppendTime = b.MaxTimestamp()
	}
	e.add(pb)
}

// checkLocked decides whether the leader may append a batch of an
// idempotent producer (see the top of this file): nil and nil to append it,
// the original batch for a duplicate, or a refusal.
func (s *producerState) checkLocked(b record.Batch) (dup *producerBatch, refusal *Error) {
	id, epoch, first := b.ProducerID(), b.ProducerEpoch(), b.BaseSequence()
	if id < 0 || epoch < 0 || first < 0 {
		return nil, refuse(ReasonInvalidRequest, nil, "batch has producer id %d, epoch %d and base sequence %d: with a producer id, none may be negative", id, epoch, first)
	}
	el, ok := s.mu.producers[id]
	if !ok {
		if first != 0 {
			return nil, refuse(ReasonUnknownProducerID, nil, "producer %d (epoch %d) is not known here and its batch starts at sequence %d, not 0", id, epoch, first).
				with("producer_id", itoa(id)).with("producer_epoch", itoa(int64(epoch))).with("sequence", strconv.Itoa(int(first)))
		}
		return nil, nil
	}
	e := el.Value.(*producerEntry)
	switch {
	case epoch < e.epoch:
		return nil, refuse(ReasonInvalidProducerEpoch, nil, "producer %d: epoch %d is fenced by epoch %d", id, epoch, e.epoch).
			with("producer_id", itoa(id)).with("producer_epoch", itoa(int64(epoch))).with("current_epoch", itoa(int64(e.epoch)))
	case epoch > e.epoch:
		if first != 0 {
			return nil, outOfOrder(id, first, 0)
		}
		return nil, nil
	}
	last := addSequence(first, b.LastOffsetDelta())
	for i := range e.n {
		if pb := &e.batches[i]; pb.firstSeq == first && pb.lastSeq == last {
			orig := *pb
			return &orig, nil
		}
	}
	if want := addSequence(e.last().lastSeq, 1); first != want {
		return nil, outOfOrder(id, first, want)
	}
	return nil, nil
}

// notifyLocked wakes the batches waiting for their turn.
func (s *producerState) notifyLocked() {
	if s.mu.changed != nil {
		close(s.mu.changed)
		s.mu.changed = nil
	}
}

// awaitTurn waits, at most limit or until ctx ends, while b starts past
// where its producer's sequences in the partition stand: the batches sent
// ahead of it may still be on their way. It calls onWait when it starts
// waiting. It decides nothing: checkLocked then takes b or refuses it.
func (s *producerState) awaitTurn(ctx context.Context, l *hotlog.Log, b record.Batch, limit time.Duration, onWait func()) {
	var expired <-chan time.Time
	for {
		s.mu.Lock()
		if s.ensureBuiltLocked(l) != nil || !s.earlyLocked(b) {
			s.mu.Unlock()
			return
		}
		if s.mu.changed == nil {
			s.mu.changed = make(chan struct{})
		}
		changed := s.mu.changed
		s.mu.Unlock()
		if expired == nil {
			onWait()
			t := time.NewTimer(limit)
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-changed:
		case <-expired:
			return
		case <-ctx.Done():
			return
		}
	}
}

// earlyLocked says b starts past where its producer's sequences stand, so
// checkLocked would refuse it for a gap that batches sent ahead of it may
// fill: sequence 0 has not come from a producer (or epoch) the partition
// does not know, or b starts ahead of the producer's next sequence, by less
// than half the sequence space (beyond that, it is behind: an old batch no
// longer remembered).
func (s *producerState) earlyLocked(b record.Batch) bool {
	id, epoch, first := b.ProducerID(), b.ProducerEpoch(), b.BaseSequence()
	if id < 0 || epoch < 0 || first < 0 {
		return false
	}
	el, ok := s.mu.producers[id]
	if !ok {
		return first != 0
	}
	e := el.Value.(*producerEntry)
	switch {
	case epoch < e.epoch:
		return false
	case epoch > e.epoch:
		return first != 0
	}
	for i := range e.n {
		if e.batches[i].firstSeq == first {
			return false // a resend, or a batch that overlaps one
		}
	}
	want := addSequence(e.last().lastSeq, 1)
	return first != want && sequenceDistance(want, first) <= math.MaxInt32/2
}

// sequenceDistance counts the records from sequence from up to sequence
// to, going forward and wrapping from MaxInt32 to 0.
func sequenceDistance(from, to int32) int32 {
	if to >= from {
		return to - from
	}
	return math.MaxInt32 - from + to + 1
}

func outOfOrder(id int64, got, want int32) *Error {
	return refuse(ReasonOutOfOrderSequence, nil, "producer %d: batch starts at sequence %d, expected %d", id, got, want).
		with("producer_id", itoa(id)).with("sequence", strconv.Itoa(int(got))).with("expected_sequence", strconv.Itoa(int(want)))
}

// addSequence returns the sequence n records after seq, wrapping from
// MaxInt32 to 0 as Kafka's producers do.
func addSequence(seq, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}
