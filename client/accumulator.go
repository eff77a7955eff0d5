package client

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/record"
)

// The accumulator gathers produced records into one batch per partition
// and hands closed batches to the partition's sender in order. It does no
// I/O and starts no goroutine, so its batching can be tested alone.
//
// A partition's batches move open -> queued -> inflight -> done:
//   - open: records are encoded into it as they come (record.Builder);
//   - queued: closed because full (WithBatchBytes), waiting for the sender;
//   - inflight: taken by the sender (next), encoded and being written;
//   - done: every record has its answer; done is closed.
//
// The open batch is taken directly by next once its linger has passed or
// while a flush is pending. Lock order: accumulator.mu, then partQueue.mu.

// pendingRecord is a record waiting for its answer.
type pendingRecord struct {
	r   *Record
	ctx context.Context
	fn  func(*Record, error)
}

// batch is one partition's batch from its first record to its answer.
type batch struct {
	tp      TopicPartition
	created time.Time
	// builder holds the encoded records until encode; nil after.
	builder *record.Builder
	// data is the encoded batch, a view of buf.
	data  record.Batch
	buf   []byte
	recs  []pendingRecord
	bytes int64 // buffer bytes (limiter) to give back when done
	done  chan struct{}
	// stamped says the batch carries identity and a sequence number
	// (idempotence): set when it is first sent, fixed from then on unless
	// the leader refuses the sequence and the producer moves to a new
	// epoch (idempotence.go). refused says the last answer was such a
	// refusal, so the batch is known not to be written. All three are
	// guarded by the partition's partQueue.mu once the batch is in flight,
	// since the other batches of the partition read them.
	stamped  bool
	identity identity
	refused  bool
	// takenNo orders the partition's batches by when the sender took
	// them (next), which is the order they were produced in; batches are
	// first stamped in that order, so their sequence numbers follow it
	// whatever order their senders run in.
	takenNo uint64
	// stampNo orders the partition's batches by when they were stamped,
	// which is the order of their sequence numbers: a batch numbered
	// again after a refusal may come after batches taken later.
	stampNo uint64
	// afterAcks says that when the batch was last sent, every batch
	// numbered before it under its identity was acknowledged: a refusal
	// of its sequence then cannot be an earlier batch's doing (requests in
	// flight together reach the leader in any order).
	afterAcks bool
	// unanswered says an attempt with the batch's current numbering ended
	// without an answer that it was not written (lost, timed out, or
	// refused only after the leader appended it), so the leader may hold
	// it. Only the batch's sender reads and writes it.
	unanswered bool
}

// partQueue is one partition's batches.
type partQueue struct {
	tp TopicPartition
	// kick wakes the partition's sender: a batch was opened (arm the
	// linger timer), closed, or a flush began. Size one, sent without
	// blocking: a pending kick is enough.
	kick chan struct{}

	mu struct {
		sync.Mutex
		open     *batch
		queued   []*batch
		inflight []*batch
		seq      sequence // for the next batch stamped (idempotence)
		stamps   uint64   // batches stamped, for batch.stampNo
		taken    uint64   // batches taken, for batch.takenNo
		// seqChanged is closed (and replaced) when a batch in flight is
		// answered, refused or stamped again: what a batch waiting to be
		// re-sequenced waits for. nil until first needed.
		seqChanged chan struct{}
	}
}

// seqChangedLocked returns the channel that the next change of the
// partition's batches in flight closes.
func (pq *partQueue) seqChangedLocked() <-chan struct{} {
	if pq.mu.seqChanged == nil {
		pq.mu.seqChanged = make(chan struct{})
	}
	return pq.mu.seqChanged
}

// notifySeqLocked wakes the batches waiting for a change of the
// partition's batches in flight.
func (pq *partQueue) notifySeqLocked() {
	if pq.mu.seqChanged != nil {
		close(pq.mu.seqChanged)
		pq.mu.seqChanged = nil
	}
}

func (pq *partQueue) wake() {
	select {
	case pq.kick <- struct{}{}:
	default:
	}
}

// accumulator holds every partition's queue.
type accumulator struct {
	batchBytes int
	linger     time.Duration
	opts       record.BatchOptions
	// onClose is told when a batch closes (the sticky partitioner moves
	// on); nil for none. It is called without locks held.
	onClose func(TopicPartition)

	// flushing counts pending Flush calls: while positive, open batches
	// are sent without waiting for their linger.
	flushing atomic.Int32

	// Spare builders, encoded-batch buffers and record lists, so a steady
	// stream of batches allocates nothing per batch.
	builders freeList[*record.Builder]
	buffers  freeList[[]byte]
	pendings freeList[[]pendingRecord]

	mu    sync.RWMutex
	parts map[TopicPartition]*partQueue
}

// spareBatches is how many batches' worth of memory the accumulator keeps
// for reuse: enough for a few partitions filling and sending at once.
const spareBatches = 8

func newAccumulator(batchBytes int, linger time.Duration, codec record.Compression, onClose func(TopicPartition)) *accumulator {
	opts := record.DefaultBatchOptions()
	opts.Compression = codec
	return &accumulator{
		batchBytes: batchBytes, linger: linger, opts: opts, onClose: onClose,
		builders: newFreeList[*record.Builder](spareBatches),
		buffers:  newFreeList[[]byte](spareBatches),
		pendings: newFreeList[[]pendingRecord](spareBatches),
		parts:    make(map[TopicPartition]*partQueue),
	}
}

// queue returns tp's queue, creating it on first use; created says this
// call made it, so its caller starts the sender.
func (a *accumulator) queue(tp TopicPartition) (pq *partQueue, created bool) {
	a.mu.RLock()
	pq = a.parts[tp]
	a.mu.RUnlock()
	if pq != nil {
		return pq, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if pq = a.parts[tp]; pq != nil {
		return pq, false
	}
	pq = &partQueue{tp: tp, kick: make(chan struct{}, 1)}
	a.parts[tp] = pq
	return pq, true
}

// recordOverhead bounds what a record costs beyond its key, value and
// headers: length, attributes, timestamp and offset deltas, key and value
// lengths, header count (varints of at most 5 or 10 bytes).
const recordOverhead = 5 + 1 + 10 + 5 + 5 + 5 + 5

// recordSize is what a record is charged against the buffer and the batch
// size before it is encoded: a slight overestimate of its encoded size.
func recordSize(r *Record) int64 {
	n := recordOverhead + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// append adds a record of the given size to tp's open batch, closing the
// batch first when the record would overflow it and after when it is full.
// It reports whether the sender must be woken.
func (a *accumulator) append(pq *partQueue, pr pendingRecord, size int64, now time.Time) (wake bool) {
	var closed int
	pq.mu.Lock()
	if b := pq.mu.open; b != nil && b.builder.EstimatedSize()+int(size) > a.batchBytes {
		pq.closeOpenLocked()
		closed++
		wake = true
	}
	b := pq.mu.open
	if b == nil {
		b = a.newBatch(pq.tp, now)
		pq.mu.open = b
		wake = true // arm the linger timer
	}
	r := pr.r
	b.builder.Add(record.Record{Timestamp: r.Timestamp.UnixMilli(), Key: r.Key, Value: r.Value, Headers: r.Headers})
	b.recs = append(b.recs, pr)
	b.bytes += size
	if b.builder.EstimatedSize() >= a.batchBytes {
		pq.closeOpenLocked()
		closed++
		wake = true
	}
	pq.mu.Unlock()
	for range closed {
		a.closed(pq.tp)
	}
	return wake
}

func (a *accumulator) newBatch(tp TopicPartition, now time.Time) *batch {
	return &batch{tp: tp, created: now, builder: a.getBuilder(), recs: a.pendings.get(), done: make(chan struct{})}
}

// closeOpenLocked moves the open batch to the queue.
func (pq *partQueue) closeOpenLocked() {
	pq.mu.queued = append(pq.mu.queued, pq.mu.open)
	pq.mu.open = nil
}

func (a *accumulator) closed(tp TopicPartition) {
	if a.onClose != nil {
		a.onClose(tp)
	}
}

// next takes the partition's next batch to send: the oldest queued one, or
// the open one once its linger has passed (or a flush is pending). Without
// one, it returns how long until the open batch is due, or -1 when there is
// no open batch.
func (a *accumulator) next(pq *partQueue, now time.Time) (*batch, time.Duration) {
	pq.mu.Lock()
	if len(pq.mu.queued) > 0 {
		b := pq.mu.queued[0]
		pq.mu.queued[0] = nil
		pq.mu.queued = pq.mu.queued[1:]
		pq.takeLocked(b)
		pq.mu.Unlock()
		return b, 0
	}
	b := pq.mu.open
	if b == nil {
		pq.mu.Unlock()
		return nil, -1
	}
	if due := b.created.Add(a.linger); now.Before(due) && a.flushing.Load() == 0 {
		pq.mu.Unlock()
		return nil, due.Sub(now)
	}
	pq.mu.open = nil
	pq.takeLocked(b)
	pq.mu.Unlock()
	a.closed(pq.tp)
	return b, 0
}

// takeLocked moves a batch the sender takes to those in flight, numbering
// it in the order taken.
func (pq *partQueue) takeLocked(b *batch) {
	pq.mu.taken++
	b.takenNo = pq.mu.taken
	pq.mu.inflight = append(pq.mu.inflight, b)
}

// encode turns a batch's builder into its bytes and recycles the builder.
func (a *accumulator) encode(b *batch) error {
	data, buf, err := b.builder.AppendTo(a.buffers.get())
	a.putBuilder(b.builder)
	b.builder = nil
	b.data, b.buf = data, buf
	return err
}

// rebuild encodes the batch again from its records, after some of them were
// dropped. The records are still the caller's (they may not be modified
// before their callback), so they are the source.
func (a *accumulator) rebuild(b *batch) error {
	bld := a.getBuilder()
	for _, pr := range b.recs {
		r := pr.r
		bld.Add(record.Record{Timestamp: r.Timestamp.UnixMilli(), Key: r.Key, Value: r.Value, Headers: r.Headers})
	}
	data, buf, err := bld.AppendTo(b.buf[:0])
	a.putBuilder(bld)
	b.data, b.buf = data, buf
	return err
}

func (a *accumulator) getBuilder() *record.Builder {
	if bld := a.builders.get(); bld != nil {
		return bld
	}
	return record.NewBuilder(a.opts)
}

// putBuilder keeps a builder for reuse unless one huge record made its
// buffer much larger than a batch: that memory should go back to the GC.
func (a *accumulator) putBuilder(bld *record.Builder) {
	if bld.EstimatedSize() <= 2*a.batchBytes+record.HeaderSize {
		bld.Reset(a.opts)
		a.builders.put(bld)
	}
}

// finish removes a batch taken by next from its partition (pq is nil for
// one that drain took), marks it done and recycles its memory. Every record
// must have had its answer.
func (a *accumulator) finish(pq *partQueue, b *batch) {
	if pq != nil {
		pq.mu.Lock()
		if i := slices.Index(pq.mu.inflight, b); i >= 0 {
			pq.mu.inflight = slices.Delete(pq.mu.inflight, i, i+1)
			pq.notifySeqLocked()
		}
		pq.mu.Unlock()
	}
	if b.builder != nil {
		a.putBuilder(b.builder)
		b.builder = nil
	}
	if b.buf != nil && cap(b.buf) <= 2*a.batchBytes+record.HeaderSize {
		a.buffers.put(b.buf[:0])
	}
	if b.recs != nil {
		clear(b.recs[:cap(b.recs)]) // drop the references to records, contexts and callbacks
		a.pendings.put(b.recs[:0])
	}
	b.buf, b.data, b.recs = nil, nil, nil
	close(b.done)
}

// pending lists every batch not yet done, in every partition, and wakes the
// senders: what a Flush waits for.
func (a *accumulator) pending() []*batch {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []*batch
	for _, pq := range a.parts {
		pq.mu.Lock()
		out = append(out, pq.mu.inflight...)
		out = append(out, pq.mu.queued...)
		if pq.mu.open != nil {
			out = append(out, pq.mu.open)
		}
		pq.mu.Unlock()
		pq.wake()
	}
	return out
}

// drain removes and returns the batches no sender has taken (open and
// queued), for Close to fail once the senders have stopped.
func (a *accumulator) drain() []*batch {
	a.mu.RLock()
	defer a.mu.RUnlock()
	var out []*batch
	for _, pq := range a.parts {
		pq.mu.Lock()
		out = append(out, pq.mu.queued...)
		if pq.mu.open != nil {
			out = append(out, pq.mu.open)
		}
		pq.mu.queued, pq.mu.open = nil, nil
		pq.mu.Unlock()
	}
	return out
}
