package cluster

import (
	"fmt"
	"log/slog"
	"time"
)

// Config configures a Node. Zero durations and counts take the defaults of
// DefaultConfig, which suit brokers on one network (loopback, a LAN, one
// cloud region).
type Config struct {
	// NodeID is this broker's id; it is also its Raft server id.
	NodeID int32
	// Dir holds the Raft data: <Dir>/raft.db (the log and Raft's own state,
	// in bbolt) and <Dir>/snapshots.
	Dir string
	// Bind is the Raft TCP address to listen on, host:port. Port 0 picks a
	// free port (tests); RaftAddr reports the one chosen.
	Bind string
	// Advertise is the Raft address other brokers dial, host:port; empty
	// means the bound address, which must then be a specific IP, not
	// 0.0.0.0.
	Advertise string
	// Bootstrap makes the node create a new cluster if Dir holds no Raft
	// state yet: of BootstrapServers, or of this node alone as the single
	// voter when that list is empty. With existing state it does nothing, so
	// a broker can keep the flag across restarts without harm.
	Bootstrap bool
	// BootstrapServers is the initial membership when bootstrapping (the
	// bootstrap-expect pattern: once gossip has seen enough brokers, the
	// lowest id bootstraps all of them). It must list this node as a voter;
	// this node's RaftAddr may be left empty to mean its own address.
	BootstrapServers []Server
	// TLS, if set, runs the Raft transport over TLS with these configs.
	TLS *TransportTLS
	// Logger receives the node's log; nil means slog.Default().
	Logger *slog.Logger
	// RaftLogLevel is the least severe level of Raft's own messages that is
	// passed on to Logger; nil means warn, as Raft logs every election and
	// snapshot at info.
	RaftLogLevel slog.Leveler

	// HeartbeatTimeout is how long a follower goes without hearing from the
	// leader before it starts an election. Default 500ms.
	HeartbeatTimeout time.Duration
	// ElectionTimeout is how long a candidate waits for votes. Default 500ms.
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout is how long a leader stays leader without reaching
	// a quorum; at most HeartbeatTimeout. Default 250ms.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout is the longest a follower waits to learn of a commit when
	// nothing else is sent. Default 50ms.
	CommitTimeout time.Duration
	// SnapshotInterval is how often Raft checks whether to snapshot.
	// Default 2m.
	SnapshotInterval time.Duration
	// SnapshotThreshold is how many new log entries trigger a snapshot.
	// Default 8192.
	SnapshotThreshold uint64
	// TrailingLogs is how many entries stay in the log after a snapshot, so
	// a slightly lagging follower catches up from the log rather than a
	// snapshot. Default 10240.
	TrailingLogs uint64
	// SnapshotRetain is how many snapshots are kept on disk. Default 2.
	SnapshotRetain int
	// StoreReserve is how many bytes of room past its end raft.db keeps
	// allocated, so that Raft can elect and commit on a full disk (room.go).
	// Default 8 MiB; negative keeps none.
	StoreReserve int64
}

// Server is one member of the Raft group.
type Server struct {
	// ID is the broker id.
	ID int32
	// RaftAddr is the broker's Raft address, host:port.
	RaftAddr string
	// Voter is true for a voting member, false for a non-voter that only
	// replicates (and so has the metadata locally).
	Voter bool
}

// DefaultConfig returns the defaults of every tuning field; the caller fills
// in NodeID, Dir, Bind and the rest.
func DefaultConfig() Config {
	return Config{
		HeartbeatTimeout:   500 * time.Millisecond,
		ElectionTimeout:    500 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond,
		CommitTimeout:      50 * time.Millisecond,
		SnapshotInterval:   2 * time.Minute,
		SnapshotThreshold:  8192,
		TrailingLogs:       10240,
		SnapshotRetain:     2,
		StoreReserve:       8 << 20,
	}
}

// withDefaults fills zero tuning fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	set := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	set(&c.HeartbeatTimeout, d.HeartbeatTimeout)
	set(&c.ElectionTimeout, d.ElectionTimeout)
	set(&c.LeaderLeaseTimeout, d.LeaderLeaseTimeout)
	set(&c.CommitTimeout, d.CommitTimeout)
	set(&c.SnapshotInterval, d.SnapshotInterval)
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = d.SnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = d.TrailingLogs
	}
	if c.SnapshotRetain == 0 {
		c.SnapshotRetain = d.SnapshotRetain
	}
	if c.StoreReserve == 0 {
		c.StoreReserve = d.StoreReserve
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RaftLogLevel == nil {
		c.RaftLogLevel = slog.LevelWarn
	}
	return c
}

// Validate checks the fields a caller sets; each error names the field, the
// value and what is allowed. Raft's own timing rules are checked when the
// node opens.
func (c Config) Validate() error {
	if c.NodeID < 0 {
		return fmt.Errorf("cluster: config: NodeID %d: must be >= 0", c.NodeID)
	}
	if c.Dir == "" {
		return fmt.Errorf("cluster: config: Dir is empty: the Raft data needs a directory")
	}
	if err := validateHostPort(c.Bind); err != nil {
		return fmt.Errorf("cluster: config: Bind %q: %v", c.Bind, err)
	}
	if c.Advertise != "" {
		if err := validateHostPort(c.Advertise); err != nil {
			return fmt.Errorf("cluster: config: Advertise %q: %v", c.Advertise, err)
		}
	}
	if len(c.BootstrapServers) > 0 {
		seen := map[int32]bool{}
		self := false
		for _, s := range c.BootstrapServers {
			if s.ID < 0 || seen[s.ID] {
				return fmt.Errorf("cluster: config: BootstrapServers: id %d is negative or listed twice", s.ID)
			}
			seen[s.ID] = true
			if s.ID == c.NodeID {
				self = s.Voter
				if s.RaftAddr == "" {
					continue
				}
			}
			if err := validateHostPort(s.RaftAddr); err != nil {
				return fmt.Errorf("cluster: config: BootstrapServers: server %d: RaftAddr %q: %v", s.ID, s.RaftAddr, err)
			}
		}
		if !self {
			return fmt.Errorf("cluster: config: BootstrapServers must list this node (%d) as a voter", c.NodeID)
		}
	}
	if c.SnapshotRetain < 0 {
		return fmt.Errorf("cluster: config: SnapshotRetain %d: must be >= 1", c.SnapshotRetain)
	}
	return nil
}
