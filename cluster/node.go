package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// Node is one broker's member of the metadata Raft group. Every node has the
// whole metadata locally (reads never leave the process); the node that
// leads the group is the controller, and only it accepts writes.
type Node struct {
	cfg   Config
	log   *slog.Logger
	fsm   *fsm
	raft  *raft.Raft
	trans *raft.NetworkTransport
	store *raftboltdb.BoltStore // log and stable store
	logs  raft.LogStore         // store behind a read cache
	// roomShort is set while raft.db could not be given all of its
	// reserve (room.go), so that a full disk is reported once, not on
	// every KeepRoom.
	roomShort atomic.Bool

	// syncedTerm is the Raft term in which this node, as leader, last
	// completed a barrier: from then on its local state includes everything
	// earlier leaders committed, so it may validate writes against it.
	syncedTerm atomic.Uint64

	mu struct {
		sync.Mutex
		closed bool
	}
	// waiters counts goroutines waiting on Raft futures for a caller that
	// may give up early (context). Raft resolves every future on Shutdown,
	// so Close can wait for them. Add only under mu with closed false.
	waiters   sync.WaitGroup
	closing   chan struct{} // closed when Close starts
	closeOnce sync.Once
	closeErr  error
}

// Open starts the node: it opens (or creates) the Raft data in cfg.Dir,
// listens on cfg.Bind, restores the latest snapshot, and bootstraps a new
// cluster if cfg.Bootstrap is set and there is no state yet. It returns
// before an election; WaitReady waits for one.
func Open(cfg Config) (*Node, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("node", cfg.NodeID)
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}

	rlog := newHclogAdapter(log, "raft", cfg.RaftLogLevel.Level())
	rc := raft.DefaultConfig()
	rc.LocalID = serverID(cfg.NodeID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.Logger = rlog
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("cluster: config: %w", err)
	}

	n := &Node{cfg: cfg, log: log, fsm: newFSM(log), closing: make(chan struct{})}
	// Opening an existing store writes to it (raft-boltdb makes sure of its
	// buckets): top up its room first, in case the disk has space again.
	if _, err := os.Stat(n.storePath()); err == nil {
		n.KeepRoom()
	}
	var err error
	// A timeout on the file lock: a second process on the same Dir gets an
	// error instead of hanging for ever.
	n.store, err = raftboltdb.New(raftboltdb.Options{
		Path:        n.storePath(),
		BoltOptions: &bbolt.Options{Timeout: 2 * time.Second},
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: open %s: %w", n.storePath(), err)
	}
	n.KeepRoom()
	fail := func(err error) (*Node, error) {
		if n.trans != nil {
			n.trans.Close()
		}
		n.store.Close()
		return nil, err
	}
	if n.logs, err = raft.NewLogCache(512, n.store); err != nil {
		return fail(fmt.Errorf("cluster: %w", err))
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, cfg.SnapshotRetain, rlog.Named("snapshot"))
	if err != nil {
		return fail(fmt.Errorf("cluster: snapshot store: %w", err))
	}
	var advertise net.Addr
	if cfg.Advertise != "" {
		if advertise, err = net.ResolveTCPAddr("tcp", cfg.Advertise); err != nil {
			return fail(fmt.Errorf("cluster: advertise address %q: %w", cfg.Advertise, err))
		}
	}
	if cfg.TLS == nil {
		n.trans, err = raft.NewTCPTransportWithLogger(cfg.Bind, advertise, 3, 10*time.Second, rlog.Named("net"))
	} else {
		var layer *tlsStreamLayer
		if layer, err = newTLSStreamLayer(cfg.Bind, advertise, cfg.TLS); err == nil {
			n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
				Stream: layer, MaxPool: 3, Timeout: 10 * time.Second, Logger: rlog.Named("net"),
			})
		}
	}
	if err != nil {
		return fail(fmt.Errorf("cluster: raft transport on %s: %w", cfg.Bind, err))
	}

	if cfg.Bootstrap {
		has, err := raft.HasExistingState(n.logs, n.store, snaps)
		if err != nil {
			return fail(fmt.Errorf("cluster: %w", err))
		}
		if !has {
			conf := n.bootstrapConfiguration()
			if err := raft.BootstrapCluster(rc, n.logs, n.store, snaps, n.trans, conf); err != nil {
				return fail(fmt.Errorf("cluster: bootstrap: %w", err))
			}
			log.Info("cluster: bootstrapped a new metadata group", "servers", len(conf.Servers))
		}
	}

	// NewRaft restores the newest snapshot into the FSM before it returns;
	// log entries after it are applied once they are known to be committed.
	if n.raft, err = raft.NewRaft(rc, n.fsm, n.logs, n.store, snaps, n.trans); err != nil {
		return fail(fmt.Errorf("cluster: start raft: %w", err))
	}
	return n, nil
}

func (n *Node) storePath() string { return filepath.Join(n.cfg.Dir, "raft.db") }

// KeepRoom tops up the room raft.db keeps allocated past its end
// (Config.StoreReserve, see room.go) with what Raft has used of it. The
// node does it when it opens; the broker calls it now and then while it
// runs. On a full disk it does what it can, and says so once.
func (n *Node) KeepRoom() {
	err := keepRoom(n.storePath(), n.cfg.StoreReserve)
	switch {
	case err == nil:
		if n.roomShort.CompareAndSwap(true, false) {
			n.log.Info("cluster: raft.db has its reserve of room again", "path", n.storePath(), "reserve", n.cfg.StoreReserve)
		}
	case errors.Is(err, errRoomUnsupported):
		if n.roomShort.CompareAndSwap(false, true) {
			n.log.Warn("cluster: cannot keep room in raft.db; on a full disk the metadata group may stop committing", "path", n.storePath(), "err", err)
		}
	default:
		if n.roomShort.CompareAndSwap(false, true) {
			n.log.Warn("cluster: cannot give raft.db its reserve of room; Raft writes go on into the room it kept before, and fail once that is used", "path", n.storePath(), "reserve", n.cfg.StoreReserve, "err", err)
		}
	}
}

// bootstrapConfiguration is the initial Raft membership.
func (n *Node) bootstrapConfiguration() raft.Configuration {
	self := raft.Server{Suffrage: raft.Voter, ID: serverID(n.cfg.NodeID), Address: n.trans.LocalAddr()}
	if len(n.cfg.BootstrapServers) == 0 {
		return raft.Configuration{Servers: []raft.Server{self}}
	}
	var conf raft.Configuration
	for _, s := range n.cfg.BootstrapServers {
		rs := raft.Server{Suffrage: raft.Nonvoter, ID: serverID(s.ID), Address: raft.ServerAddress(s.RaftAddr)}
		if s.Voter {
			rs.Suffrage = raft.Voter
		}
		if s.ID == n.cfg.NodeID && s.RaftAddr == "" {
			rs.Address = self.Address
		}
		conf.Servers = append(conf.Servers, rs)
	}
	return conf
}

// WaitReady waits until the group has a leader and this node has applied
// everything it knows to be committed. On the controller that is exact (a
// Raft barrier). On a follower it means the leader has been heard from and
// every command up to the commit index the leader announced is applied. A
// follower learns the leader's commit index only as far as its own log
// reaches, so one that is far behind (catching up in batches) may pass
// before it has every entry and reaches the leader's state shortly after;
// an exact check needs a round trip to the controller (a read index), which
// comes with request forwarding.
func (n *Node) WaitReady(ctx context.Context) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if n.isClosed() {
			return ErrClosed
		}
		switch n.raft.State() {
		case raft.Leader:
			err := n.syncLeader(ctx)
			switch {
			case err == nil:
				return nil
			case errors.Is(err, ErrClosed):
				return ErrClosed
			case ctx.Err() != nil:
				return fmt.Errorf("cluster: waiting for the controller: %w", ctx.Err())
			}
			// Leadership lost during the barrier: wait for the next leader.
		case raft.Follower:
			if n.followerCaughtUp() {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for the controller: %w", ctx.Err())
		case <-n.closing:
			return ErrClosed
		case <-tick.C:
		}
	}
}

// maxReadyScan bounds how many log entries followerCaughtUp inspects; a
// follower further behind than this is simply not ready yet.
const maxReadyScan = 1024

// followerCaughtUp reports whether a leader is known and this node's state
// machine has applied every command up to the commit index. Raft's applied
// index says what was handed to the FSM goroutine, not what it finished, and
// Raft does not hand it no-op and configuration entries at all, so the FSM's
// own index is compared after skipping entries that are not commands.
func (n *Node) followerCaughtUp() bool {
	if _, id := n.raft.LeaderWithID(); id == "" || n.raft.LastContact().IsZero() {
		return false
	}
	commit, applied := n.raft.CommitIndex(), n.raft.AppliedIndex()
	if commit == 0 || applied < commit {
		return false
	}
	done := n.fsm.index.Load()
	if done >= applied {
		return true
	}
	if applied-done > maxReadyScan {
		return false
	}
	for i := applied; i > done; i-- {
		var l raft.Log
		if err := n.logs.GetLog(i, &l); err != nil {
			continue // compacted into a snapshot, hence applied
		}
		if l.Type == raft.LogCommand {
			return false
		}
	}
	return true
}

// syncLeader makes sure this node is the leader and has applied everything
// earlier leaders committed before it decides anything from its local
// state. A new leader learns what is committed only when an entry of its own
// term commits, so the first write of each term waits for a barrier.
func (n *Node) syncLeader(ctx context.Context) error {
	if n.raft.State() != raft.Leader {
		return n.notController()
	}
	term := n.raft.CurrentTerm()
	if n.syncedTerm.Load() == term {
		return nil
	}
	timeout, err := applyTimeout(ctx)
	if err != nil {
		return err
	}
	if err := n.await(ctx, n.raft.Barrier(timeout)); err != nil {
		return err
	}
	n.syncedTerm.Store(term)
	return nil
}

// IsController reports whether this node leads the metadata group.
func (n *Node) IsController() bool { return n.raft.State() == raft.Leader }

// ControllerID returns the broker id of the controller, if one is known.
func (n *Node) ControllerID() (int32, bool) {
	_, id := n.raft.LeaderWithID()
	return parseServerID(id)
}

// RaftAddr returns the Raft address other nodes use to reach this one.
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// Metadata returns the current metadata: an immutable value, read without
// locks. Call Changed first to wait for the next one without missing it.
func (n *Node) Metadata() *Metadata { return n.fsm.meta.Load() }

// Changed returns a channel that is closed when the next change is applied
// (including an offset commit or a snapshot restore). Take the channel
// before reading Metadata, so a change in between is not missed:
//
//	for {
//		ch := n.Changed()
//		if done(n.Metadata()) { break }
//		select { case <-ch: case <-ctx.Done(): ... }
//	}
//
// After Close no change comes, so waiters should also watch their context.
func (n *Node) Changed() <-chan struct{} { return n.fsm.changed.wait() }

// ChangesSince reports what changed in the topics in the versions after
// from up to and including to (a Metadata's Version): the partitions whose
// leader or ISR changed, or All when anything else did or the log of
// recent changes no longer reaches back to from.
func (n *Node) ChangesSince(from, to uint64) Changes { return n.fsm.changes.since(from, to) }

// CommittedOffset returns a group's committed offset for one partition.
func (n *Node) CommittedOffset(group, topic string, partition int32) (OffsetCommit, bool) {
	return n.fsm.offsets.get(group, TopicPartition{topic, partition})
}

// CommittedOffsets returns all of a group's committed offsets; the map is
// the caller's.
func (n *Node) CommittedOffsets(group string) map[TopicPartition]OffsetCommit {
	m := maps.Clone(map[TopicPartition]OffsetCommit(n.fsm.offsets.group(group)))
	if m == nil {
		m = map[TopicPartition]OffsetCommit{}
	}
	return m
}

// Close stops Raft, waits for every goroutine the node started and closes
// the stores. Later calls return the first call's result. Metadata keeps
// returning the last state.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		n.mu.closed = true
		n.mu.Unlock()
		close(n.closing)
		err := n.raft.Shutdown().Error()
		n.waiters.Wait()
		n.closeErr = errors.Join(err, n.trans.Close(), n.store.Close())
		if n.closeErr != nil {
			n.closeErr = fmt.Errorf("cluster: close: %w", n.closeErr)
		}
	})
	return n.closeErr
}

func (n *Node) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.mu.closed
}

// notController builds the error for a write on a non-leader.
func (n *Node) notController() error {
	if n.isClosed() {
		return ErrClosed
	}
	addr, id := n.raft.LeaderWithID()
	e := &NotControllerError{ControllerID: -1}
	if cid, ok := parseServerID(id); ok {
		e.ControllerID = cid
		e.RaftAddr = string(addr)
		if b, ok := n.Metadata().Broker(cid); ok {
			e.Addr = b.Addr
		}
	}
	return e
}

// propose commits a command through Raft and returns the state machine's
// answer. The context's deadline bounds the whole wait: handing the command
// to Raft and seeing it applied.
func (n *Node) propose(ctx context.Context, c command) (*applyResponse, error) {
	data, err := encodeCommand(c)
	if err != nil {
		return nil, fmt.Errorf("cluster: encode %s: %w", c.typ(), err)
	}
	timeout, err := applyTimeout(ctx)
	if err != nil {
		return nil, err
	}
	f := n.raft.Apply(data, timeout)
	if err := n.await(ctx, f); err != nil {
		return nil, err
	}
	resp, ok := f.Response().(*applyResponse)
	if !ok {
		return nil, fmt.Errorf("cluster: unexpected state machine response %T", f.Response())
	}
	return resp, resp.err
}

// applyTimeout turns the context's remaining time into a Raft timeout
// (0 = none).
func applyTimeout(ctx context.Context) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	d, ok := ctx.Deadline()
	if !ok {
		return 0, nil
	}
	t := time.Until(d)
	if t <= 0 {
		return 0, context.DeadlineExceeded
	}
	return t, nil
}

// await waits for a Raft future, or for the context. A future's Error
// blocks without a way to cancel it, so the wait runs in a goroutine that
// ends when Raft resolves the future, at the latest on Shutdown.
func (n *Node) await(ctx context.Context, f raft.Future) error {
	n.mu.Lock()
	if n.mu.closed {
		n.mu.Unlock()
		return n.raftError(f.Error()) // Shutdown resolves it at once
	}
	n.waiters.Add(1)
	n.mu.Unlock()

	done := make(chan error, 1)
	go func() {
		defer n.waiters.Done()
		done <- f.Error()
	}()
	select {
	case err := <-done:
		return n.raftError(err)
	case <-ctx.Done():
		return fmt.Errorf("%w: stopped waiting: %w", ErrOutcomeUnknown, ctx.Err())
	}
}

// raftError translates Raft's errors into the package's.
func (n *Node) raftError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return n.notController()
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: leadership was lost before the change was known to commit", ErrOutcomeUnknown)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w; %w", ErrClosed, ErrOutcomeUnknown)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("cluster: raft did not take the proposal before the deadline: %w", context.DeadlineExceeded)
	}
	return fmt.Errorf("cluster: raft: %w", err)
}

// serverID is a broker id as a Raft server id.
func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.FormatInt(int64(id), 10)) }

// parseServerID is the inverse of serverID; ok is false for "" (no leader).
func parseServerID(id raft.ServerID) (int32, bool) {
	v, err := strconv.ParseInt(string(id), 10, 32)
	if err != nil {
		return -1, false
	}
	return int32(v), true
}
