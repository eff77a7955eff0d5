package broker

// Produce: the leader appends one batch to a partition, in three steps:
// admitProduce runs every check up to the batch's stored form, appendBatch
// appends it (an idempotent producer's turn, then the checks under the
// replica lock), and awaitAcks answers once the acks asked for are met.
// Every NOT_LEADER names the leader by id and address (notLeaderError).
//
// Checks, in order, each refusing with its reason and changing nothing:
// the topic and partition exist (TOPIC_NOT_FOUND, PARTITION_NOT_FOUND); this
// broker leads the partition (NOT_LEADER with the leader's address) and has
// it open (LEADER_NOT_AVAILABLE); the caller is within its produce quota
// (THROTTLED, quota.go); the disk has room (STORAGE_FULL, disk.go); the
// sealed bytes awaiting upload are within the backlog bound (THROTTLED,
// checkBacklog in tier.go); a tiered partition's leader has taken the cold
// tier over in this epoch (ensureTier in tier.go: LEADER_NOT_AVAILABLE
// while it cannot).
// Then the batch itself (checkBatch): it is within max.message.bytes
// (RECORD_TOO_LARGE) and passes its length, magic and CRC checks
// (CORRUPT_BATCH); it sets none of the attribute bits only brokers set
// (validate.go): control (INVALID_RECORD), transactional
// (TRANSACTIONS_NOT_SUPPORTED), LogAppendTime (INVALID_TIMESTAMP); its
// producer id, if any, belongs to the caller (PERMISSION_DENIED,
// producer_binding.go); its records decode (CORRUPT_BATCH); under
// CreateTime, its header's first and max timestamps are its records'
// (CORRUPT_BATCH) and no record's timestamp is negative other than -1, nor
// further behind or ahead of the broker's clock than
// message.timestamp.before.max.ms and message.timestamp.after.max.ms allow
// (INVALID_TIMESTAMP). Under a compression.type other than "producer" the
// leader then recompresses it (storedForm; RECORD_TOO_LARGE if it grows
// past the limit). Under the replica lock (appendAsLeader): this broker
// still leads (NOT_LEADER), is not waiting for a new epoch after a restart
// (LEADER_NOT_AVAILABLE), and for acks=all the ISR has at least
// min.insync.replicas members (NOT_ENOUGH_REPLICAS).
// A batch of an idempotent producer (with a producer id) is then checked
// against what the producer wrote before (producers.go): a resend of one of
// its last batches is answered with that batch's offsets and Duplicate set,
// writing nothing; a gap is OUT_OF_ORDER_SEQUENCE, a fenced epoch
// INVALID_PRODUCER_EPOCH, a producer the partition does not know
// UNKNOWN_PRODUCER_ID unless its batch starts at sequence 0. Then the
// batch gets its offsets (and, under LogAppendTime, the broker's clock)
// in its header and is appended. acks=none returns once it is written,
// acks=leader once the flush policy is met (under "always", fsynced), and
// acks=all once the high watermark passes it in the leader epoch it was
// appended in: every in-sync replica has it fsynced under "always", written
// under "interval" and "never" (committedEnd). TIMEOUT if that takes
// longer than the request allows: the batch may still commit; NOT_LEADER
// if leadership moves first: the batch may be lost; and
// NOT_ENOUGH_REPLICAS_AFTER_APPEND if it committed while the ISR fell
// below min.insync.replicas. A duplicate is answered under the same
// rules, for the original batch.

import (
	"context"
	"errors"
	"time"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/record"
)

// Acks says when a produce is answered.
type Acks int8

const (
	AcksAll Acks = iota
	AcksLeader
	AcksNone
)

// ProduceRequest is one batch for one partition.
type ProduceRequest struct {
	Topic     string
	Partition int32
	// Batch is an encoded batch; its header is rewritten in place unless
	// the topic's compression.type makes the leader store a recompressed
	// copy.
	Batch   record.Batch
	Acks    Acks
	Timeout time.Duration // for AcksAll; 0 means 30s
}

// ProduceResult says where the batch went.
type ProduceResult struct {
	BaseOffset     int64
	LastOffset     int64
	LogAppendTime  int64 // -1 unless the topic uses LogAppendTime
	LogStartOffset int64
	// Duplicate says the batch was a resend of one already written: the
	// offsets and append time are the original's, and nothing was written.
	Duplicate bool
}

const defaultProduceTimeout = 30 * time.Second

// Produce appends a batch to a partition this broker leads.
func (b *Broker) Produce(ctx context.Context, req ProduceRequest) (ProduceResult, error) {
	return b.role.produce(ctx, req)
}

func (b clusterMember) produce(ctx context.Context, req ProduceRequest) (ProduceResult, error) {
	a, err := b.admitProduce(ctx, req)
	if err != nil {
		return ProduceResult{}, err
	}
	defer a.finish()
	res, w, err := a.p.appendBatch(ctx, a.batch, req.Acks, func() { b.metrics.sequenceWaits.Add(1) })
	if err != nil {
		return ProduceResult{}, err
	}
	return a.p.awaitAcks(ctx, res, w, req.Acks, req.Timeout)
}

// admitted is a produce admitProduce let through: the partition it goes
// to, the batch in the form the topic stores, and the end of its timing.
type admitted struct {
	p     *partition
	batch record.Batch
	// finish ends the produce's timing for the cold-read yield
	// (coldyield.go): call it once the produce is answered.
	finish func()
}

// admitProduce runs Produce's checks, in the order the top of this file
// lists them, and changes nothing: the partition's leader is this broker
// and has it open (leaderPartition), the caller's quota, the disk's room,
// the upload backlog, the cold tier taken over in this epoch (ensureTier),
// then the batch itself (admitBatch). The produce is timed for the
// cold-read yield from when the quota let it through.
func (b clusterMember) admitProduce(ctx context.Context, req ProduceRequest) (_ admitted, err error) {
	p, err := b.leaderPartition(req.Topic, req.Partition)
	if err != nil {
		return admitted{}, err
	}
	if err := b.limits.admitProduce(ctx, len(req.Batch)); err != nil {
		b.metrics.throttle(throttleProduceQuota)
		return admitted{}, err
	}
	finish := b.timeProduce()
	defer func() {
		if err != nil {
			finish()
		}
	}()
	if err := b.checkDiskSpace(); err != nil {
		return admitted{}, err
	}
	if err := b.checkBacklog(); err != nil {
		b.metrics.throttle(throttleUploadBacklog)
		return admitted{}, err
	}
	if err := b.ensureTier(ctx, p); err != nil {
		return admitted{}, err
	}
	batch, err := p.admitBatch(req.Batch, b.producerOwner(ctx))
	if err != nil {
		return admitted{}, err
	}
	return admitted{p: p, batch: batch, finish: finish}, nil
}

// timeProduce starts timing a produce for the cold-read yield: cold reads
// yield to writers by what they see from here on (coldyield.go), so it
// starts after the quota, whose wait is not theirs to answer for. It
// returns the end of the timing.
func (b *Broker) timeProduce() func() {
	if b.coldPace == nil || b.coldPace.yield == nil {
		return func() {}
	}
	y, start := b.coldPace.yield, time.Now()
	w := y.produceStart()
	return func() { y.produceEnd(w, time.Since(start)) }
}

// awaitAcks answers a produce appended at res once req's acks are met:
// acks=none at once, acks=leader once the flush policy made it durable,
// acks=all once it committed (commitOutcome), or TIMEOUT after timeout (0:
// defaultProduceTimeout). w is the wait appendBatch registered for
// acks=all.
func (p *partition) awaitAcks(ctx context.Context, res ProduceResult, w *produceWaiter, acks Acks, timeout time.Duration) (ProduceResult, error) {
	if acks == AcksNone {
		return res, nil
	}
	if err := p.log.WaitDurable(res.LastOffset + 1); err != nil {
		p.dropWaiter(w)
		return ProduceResult{}, appendError(p, err)
	}
	if acks != AcksAll {
		return res, nil
	}
	if timeout <= 0 {
		timeout = defaultProduceTimeout
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case err := <-w.done:
		if err := p.commitOutcome(res, err); err != nil {
			return ProduceResult{}, err
		}
		return res, nil
	case <-wctx.Done():
		p.dropWaiter(w)
		return ProduceResult{}, p.commitTimedOut(res, timeout, wctx.Err())
	}
}

// admitBatch runs Produce's checks of the batch itself (checkBatch) under
// the topic's settings, and returns it in the form the topic stores
// (storedForm). ownsProducer says whether the caller may use a producer
// id. It changes nothing.
func (p *partition) admitBatch(batch record.Batch, ownsProducer func(id int64) error) (record.Batch, error) {
	cfg := p.cfg.Load()
	if err := checkBatch(p, cfg, batch, ownsProducer); err != nil {
		return nil, err
	}
	return storedForm(p, cfg, batch)
}

// appendBatch appends an admitted batch as the partition's leader: an
// idempotent producer's batch first waits for its turn (onSequenceWait
// counts those that wait), then appendAsLeader. It returns where the
// batch went and, for acks=all, the wait for its commit.
func (p *partition) appendBatch(ctx context.Context, batch record.Batch, acks Acks, onSequenceWait func()) (ProduceResult, *produceWaiter, error) {
	if batch.ProducerID() != record.NoProducerID {
		p.producers.awaitTurn(ctx, p.log, batch, sequenceWait, onSequenceWait)
	}
	return p.appendAsLeader(batch, acks)
}

// storedForm is the batch as the topic's compression.type stores it: as
// sent under "producer" or when already in the topic's codec, else
// recompressed by the leader (record.Recompress: offsets, producer id,
// epoch and sequence, timestamps kept; the CRC recomputed), as Kafka does.
// Followers and consumers get these bytes. A batch that grows past
// max.message.bytes in the new codec is RECORD_TOO_LARGE, as in Kafka.
func storedForm(p *partition, cfg *config.Topic, batch record.Batch) (record.Batch, error) {
	c, ok := topicCodec(cfg.CompressionType)
	if !ok || batch.Compression() == c {
		return batch, nil
	}
	out, err := record.Recompress(batch, c, int(cfg.MaxMessageBytes))
	if err != nil {
		// validateRecords decompressed it under the same bound already.
		return nil, refuse(ReasonCorruptBatch, err, "%s: recompressing the batch to %s (compression.type): %v", p.name(), c, err)
	}
	if int64(len(out)) > cfg.MaxMessageBytes {
		return nil, refuse(ReasonRecordTooLarge, nil, "batch of %d bytes is %d bytes in %s (compression.type of %s), over max.message.bytes (%d)", len(batch), len(out), c, p.topic, cfg.MaxMessageBytes).
			with("size", itoa(int64(len(out)))).with("max", itoa(cfg.MaxMessageBytes))
	}
	return out, nil
}

// topicCodec is the codec compression.type stores batches in; false for
// "producer", which keeps each batch's own.
func topicCodec(t config.CompressionType) (record.Compression, bool) {
	switch t {
	case config.CompressionUncompressed:
		return record.CompressionNone, true
	case config.CompressionGzip:
		return record.CompressionGzip, true
	case config.CompressionSnappy:
		return record.CompressionSnappy, true
	case config.CompressionLZ4:
		return record.CompressionLZ4, true
	case config.CompressionZstd:
		return record.CompressionZstd, true
	}
	return 0, false
}

// commitOutcome is what an acks=all produce of the batch at res answers
// once its wait ended with err: committed (nil), NOT_LEADER (leadership
// moved first: the batch may be lost), or NOT_ENOUGH_REPLICAS_AFTER_APPEND
// (it committed while the ISR was below min.insync.replicas).
func (p *partition) commitOutcome(res ProduceResult, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errNotLeaderNow):
		leader := p.view.Load().Leader
		return notLeaderError(leader, p.brokerAddr(leader), "%s: leadership changed before the batch at %d committed; it is not acknowledged and may be lost", p.name(), res.BaseOffset)
	}
	return refuse(ReasonNotEnoughReplicasAfterAppend, err, "%s: the batch at %d was written, but the in-sync replicas fell below min.insync.replicas (%d) before it committed; it is not acknowledged", p.name(), res.BaseOffset, p.cfg.Load().MinInsyncReplicas)
}

// commitTimedOut is what an acks=all produce of the batch at res answers
// when its batch did not commit within timeout.
func (p *partition) commitTimedOut(res ProduceResult, timeout time.Duration, cause error) *Error {
	return refuse(ReasonTimeout, cause, "batch at %d of %s was not committed by the in-sync replicas within %v; it may still commit", res.BaseOffset, p.name(), timeout)
}

// producerOwner says whether the caller of ctx may write with a producer
// id (checkProducerID).
func (b *Broker) producerOwner(ctx context.Context) func(id int64) error {
	return func(id int64) error { return b.checkProducerID(ctx, id) }
}

// checkBatch runs Produce's checks of the batch itself, in order (see the
// top of this file), under the topic settings cfg; ownsProducer says
// whether the caller may use the batch's producer id. It changes nothing.
func checkBatch(p *partition, cfg *config.Topic, batch record.Batch, ownsProducer func(id int64) error) error {
	if int64(len(batch)) > cfg.MaxMessageBytes {
		return refuse(ReasonRecordTooLarge, nil, "batch of %d bytes is over max.message.bytes (%d) of %s", len(batch), cfg.MaxMessageBytes, p.topic).
			with("size", itoa(int64(len(batch)))).with("max", itoa(cfg.MaxMessageBytes))
	}
	if err := batch.Validate(); err != nil {
		return refuse(ReasonCorruptBatch, err, "%v", err)
	}
	if err := checkAttributes(p, cfg, batch); err != nil {
		return err
	}
	if err := ownsProducer(batch.ProducerID()); err != nil {
		return err
	}
	return validateRecords(p, cfg, batch)
}

// appendAsLeader appends a batch as the partition's leader, in the leader
// epoch of the moment, and for acks=all registers the wait for its commit
// in that same epoch: both under the replica lock, so a change of epoch
// comes wholly before (NOT_LEADER now) or after (the wait ends with
// NOT_LEADER). A resend of an idempotent producer's batch is answered with
// the original's offsets and waits for the original to commit.
func (p *partition) appendAsLeader(batch record.Batch, acks Acks) (ProduceResult, *produceWaiter, error) {
	cfg := p.cfg.Load()
	res := ProduceResult{LogAppendTime: -1}
	if cfg.MessageTimestampType == config.LogAppendTime {
		res.LogAppendTime = p.now().UnixMilli()
		batch.SetLogAppendTime(res.LogAppendTime)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := p.mu.rs
	switch rs.checkProduce(acks == AcksAll) {
	case refusedNotLeader:
		return ProduceResult{}, nil, notLeading(rs.info.Leader, p.brokerAddr(rs.info.Leader), "broker %d no longer leads %s", p.self, p.name())
	case refusedTakingTheLead:
		return ProduceResult{}, nil, refuse(ReasonLeaderNotAvailable, nil, "%s: this broker restarted while leading it and waits for the controller to start a new leader epoch", p.name())
	case refusedNotEnoughReplicas:
		return ProduceResult{}, nil, refuse(ReasonNotEnoughReplicas, nil, "%s has %d in-sync replicas, min.insync.replicas is %d", p.name(), len(rs.info.ISR), rs.minISR)
	}
	epoch := rs.info.LeaderEpoch
	rs.beforeAppend(p.log.LogEndOffset(), p.now())
	defer p.markDirty() // a roll deadline, producer snapshots, ISR lag
	if batch.ProducerID() == record.NoProducerID {
		ar, err := p.log.AppendVerified(batch, epoch) // Produce verified its CRC
		if err != nil {
			return ProduceResult{}, nil, appendError(p, err)
		}
		res.BaseOffset, res.LastOffset = ar.BaseOffset, ar.LastOffset
	} else {
		ar, dup, err := appendIdempotent(p, batch, epoch)
		switch {
		case err != nil:
			return ProduceResult{}, nil, err
		case dup != nil:
			res.BaseOffset, res.LastOffset, res.LogAppendTime, res.Duplicate = dup.baseOffset, dup.lastOffset, dup.logAppendTime, true
		default:
			res.BaseOffset, res.LastOffset = ar.BaseOffset, ar.LastOffset
		}
	}
	res.LogStartOffset = p.log.LogStartOffset()
	var w *produceWaiter
	if acks == AcksAll {
		w = newProduceWaiter(res.LastOffset, epoch)
		rs.addWaiter(w)
	}
	// What is committed already ends its wait now: a resend's original, or
	// (under flush.policy=never) the batch itself on a partition without
	// followers. Anything else ends when a durable end or a follower's
	// acknowledgement moves the high watermark (the advancer, followerReport).
	p.advanceLocked()
	return res, w, nil
}

// dropWaiter forgets a produce wait its caller gave up on.
func (p *partition) dropWaiter(w *produceWaiter) {
	if w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.rs.removeWaiter(w)
}

// appendIdempotent appends a batch of an idempotent producer unless it is a
// resend of one already written, which it returns instead. The check, the
// append and the record run under the partition's producer lock, so two
// copies of one batch sent at once cannot both pass the check; the caller
// waits for the fsync after it is released, so that concurrent producers
// still share one (group commit).
func appendIdempotent(p *partition, batch record.Batch, epoch int32) (hotlog.AppendResult, *producerBatch, error) {
	s := p.producers
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ensureBuiltLocked(p.log); err != nil {
		return hotlog.AppendResult{}, nil, refuse(ReasonStorageError, err, "%s: %v", p.name(), err)
	}
	dup, refusal := s.checkLocked(batch)
	if refusal != nil {
		refusal.Message = p.name() + ": " + refusal.Message
		return hotlog.AppendResult{}, nil, refusal
	}
	if dup != nil {
		return hotlog.AppendResult{}, dup, nil
	}
	ar, err := p.log.AppendVerified(batch, epoch) // Produce verified its CRC
	if err != nil {
		return hotlog.AppendResult{}, nil, appendError(p, err)
	}
	s.appendedLocked(batch)
	return ar, nil, nil
}

// appendError translates a log's refusal.
func appendError(p *partition, err error) error {
	switch {
	case errors.Is(err, hotlog.ErrBatchTooLarge):
		return refuse(ReasonRecordTooLarge, err, "%s: %v", p.name(), err)
	case errors.Is(err, hotlog.ErrInvalidBatch):
		return refuse(ReasonCorruptBatch, err, "%s: %v", p.name(), err)
	case errors.Is(err, hotlog.ErrStaleEpoch):
		return refuse(ReasonFencedEpoch, err, "%s: %v", p.name(), err)
	case errors.Is(err, hotlog.ErrClosed):
		return refuse(ReasonUnavailable, err, "%s is closing", p.name())
	}
	return refuse(ReasonStorageError, err, "%s: %v", p.name(), err)
}

// BatchOf builds one batch from simple records, for a front end whose
// producers send records rather than encoded batches: keys, values and
// headers as given (nil stays null), compressed with c, and a timestamp
// of 0 meaning the broker's clock now (-1, "no timestamp", and any other
// time stay as sent, for Produce's checks to judge). A batch that cannot
// be built is INVALID_REQUEST.
func BatchOf(recs []record.Record, c record.Compression) (record.Batch, error) {
	opts := record.DefaultBatchOptions()
	opts.Compression = c
	bl := record.NewBuilder(opts)
	now := time.Now().UnixMilli()
	for _, r := range recs {
		if r.Timestamp == 0 {
			r.Timestamp = now
		}
		bl.Add(r)
	}
	batch, err := bl.Build()
	if err != nil {
		return nil, InvalidRequest("%v", err)
	}
	return batch, nil
}
