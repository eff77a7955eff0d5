package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// fsm is the cluster metadata as a Raft state machine. Raft calls Apply,
// Snapshot and Restore from one goroutine; everyone else reads through
// Metadata (lock-free: one atomic load of an immutable value) and the
// offset table (a short read lock).
type fsm struct {
	log *slog.Logger

	// meta is the current brokers, topics and ACLs; replaced, never
	// modified.
	meta atomic.Pointer[Metadata]
	// offsets holds committed consumer offsets.
	offsets offsetTable
	// memberships holds consumer groups' memberships (groups.go).
	memberships membershipTable
	// scram holds the SCRAM credentials (scram.go).
	scram scramTable
	// nextProducerID is the producer id the next allocation hands out.
	// Only the FSM goroutine touches it (Apply, Snapshot, Restore).
	nextProducerID int64
	// index is the Raft index of the last command applied, accepted or
	// refused (or of the restored snapshot's last command). Node.WaitReady
	// compares it with what Raft has committed.
	index atomic.Uint64
	// changed is broadcast after every change is visible.
	changed notifier
	// changes remembers which partitions recent versions changed.
	changes changeLog
}

var _ raft.FSM = (*fsm)(nil)

func newFSM(log *slog.Logger) *fsm {
	f := &fsm{log: log, nextProducerID: FirstProducerID}
	f.meta.Store(emptyMetadata())
	return f
}

// applyResponse is the state machine's answer to one command. Raft hands it
// to the proposer as ApplyFuture.Response; on other brokers it is dropped.
type applyResponse struct {
	// index is the command's Raft index.
	index uint64
	// topic and partition are the state after the change, for commands that
	// return them.
	topic     *TopicInfo
	partition PartitionInfo
	// producerID is the id an allocateProducerId command handed out.
	producerID int64
	// removed is how many ACLs a removeACLs command removed.
	removed int
	// err is the refusal, wrapping one of the package's sentinels; nothing
	// was changed.
	err error
}

// Apply applies one committed command. A command that is malformed, of an
// unknown type or version, or refused by validation returns its error in the
// response and changes nothing. Apply never panics on bad input: a panic in
// a transition (a bug) is recovered and turned into a refusal, which is safe
// because transitions build the next state aside and install it only at the
// end.
func (f *fsm) Apply(l *raft.Log) any {
	resp := f.apply(l.Index, l.Term, l.Data)
	f.index.Store(l.Index)
	return resp
}

func (f *fsm) apply(index, term uint64, data []byte) (resp *applyResponse) {
	defer func() {
		if r := recover(); r != nil {
			f.log.Error("cluster: panic while applying a command; refused it", "index", index, "panic", r, "stack", string(debug.Stack()))
			resp = &applyResponse{index: index, err: errorf(ErrInvalidCommand, "panic while applying: %v", r)}
		}
	}()
	cmd, err := decodeCommand(data)
	if err != nil {
		f.log.Warn("cluster: undecodable command in the raft log", "index", index, "err", err)
		return &applyResponse{index: index, err: err}
	}
	if c, ok := cmd.(*saveGroupCmd); ok && c.Term != term {
		// Written by a coordinator of another term (this node lost the lead
		// and won it back meanwhile): its successor resumed without it.
		return &applyResponse{index: index, err: errorf(ErrNotController, "a group membership written by the coordinator of term %d, applied in term %d", c.Term, term)}
	}
	cur := f.meta.Load()
	ch, err := transition(cur, f.offsets.groups, f.nextProducerID, cmd)
	if err != nil {
		f.log.Debug("cluster: command refused", "index", index, "type", cmd.typ(), "err", err)
		return &applyResponse{index: index, err: err}
	}
	next := ch.meta
	if next == nil {
		// Only offsets or the producer id counter changed, or nothing did
		// (an add of stored ACLs); the version still moves, so "Version >=
		// the index of my write" means a reader has seen it.
		next = &Metadata{Brokers: cur.Brokers, Topics: cur.Topics, acls: cur.acls}
	}
	next.Version = index
	switch {
	case ch.meta == nil || ch.aclsOnly:
		// Offsets, groups, producer ids, ACLs: no topic or broker changed.
	case ch.one:
		f.changes.record(changeEntry{version: index, tp: TopicPartition{Topic: ch.topic.Name, Partition: ch.partition.Partition}})
	default:
		f.changes.record(changeEntry{version: index, all: true})
	}
	f.offsets.install(ch.offsets)
	f.memberships.install(ch.memberships)
	f.scram.install(ch.scram)
	if ch.producerID != 0 {
		f.nextProducerID = ch.producerID + 1
	}
	f.meta.Store(next)
	f.changed.broadcast()
	return &applyResponse{index: index, topic: ch.topic, partition: ch.partition, producerID: ch.producerID, removed: ch.removed}
}

// Snapshot captures the state in O(groups): Metadata is immutable and the
// offset and membership tables are copied shallowly (their values are
// immutable), so
// Persist can encode it while Apply goes on.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{
		index:          f.index.Load(),
		meta:           f.meta.Load(),
		offsets:        f.offsets.snapshot(),
		memberships:    f.memberships.snapshot(),
		nextProducerID: f.nextProducerID,
		scram:          f.scram.load(),
	}, nil
}

// Restore replaces the whole state with a snapshot. The snapshot is decoded
// and checked completely before anything is replaced, so a bad snapshot
// leaves the state as it was.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	s, err := decodeSnapshot(rc)
	if err != nil {
		return fmt.Errorf("cluster: restore snapshot: %w", err)
	}
	f.offsets.replace(s.offsets)
	f.memberships.replace(s.memberships)
	f.scram.replace(s.scram)
	f.nextProducerID = s.nextProducerID
	f.changes.reset(s.meta.Version)
	f.meta.Store(s.meta)
	f.index.Store(s.index)
	f.changed.broadcast()
	return nil
}

// fsmSnapshot is a point-in-time state waiting to be persisted.
type fsmSnapshot struct {
	index          uint64
	meta           *Metadata
	offsets        map[string]groupOffsets
	memberships    map[string]*GroupMembership
	nextProducerID int64
	scram          map[scramKey]SCRAMCredential
}

// Persist writes the snapshot as JSON to the sink.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := encodeSnapshot(sink, s.index, s.meta, s.offsets, s.memberships, s.nextProducerID, s.scram); err != nil {
		sink.Cancel()
		return fmt.Errorf("cluster: persist snapshot: %w", err)
	}
	return sink.Close()
}

// Release does nothing: the snapshot holds only shared immutable values.
func (s *fsmSnapshot) Release() {}
