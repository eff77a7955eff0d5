package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/gossip"
	"github.com/strata-log/strata/tiering"
	"github.com/strata-log/strata/tiering/objstore"
)

// Broker is one running broker.
type Broker struct {
	cfg      config.Broker
	id       int32
	defaults config.Topic
	log      *slog.Logger
	meta     *cluster.Node
	logsDir  string
	lock     *os.File // flock on the data dir

	// The cold tier: nil when object_store.type is none.
	store        objstore.Bucket
	storeMetrics *objstore.Metrics
	cold         *tiering.ColdReader
	coldPace     *coldPacer
	// coldCleanThrottle paces every partition's cold cleaner together
	// (tiering.cold_cleaner_io_max_bytes_per_second).
	coldCleanThrottle *tiering.Throttle
	// reload holds the settings of the last Reload (at first, those the
	// broker started with).
	reload struct {
		sync.Mutex
		live config.Broker
	}
	// unuploaded is the sealed bytes awaiting upload, summed by the tiering
	// loop; produce is throttled beyond tiering.max_unuploaded_bytes.
	unuploaded atomic.Int64
	// tierKick wakes the tiering loop before its next tick: a topic's
	// settings changed, and an alter waits for its leaders here to write
	// them to the bucket.
	tierKick chan struct{}
	// limits bound what one client may take (limits.go, quota.go).
	limits *limits
	// freeSpace reads the free bytes of the data dir's file system
	// (disk.go): statfs unless WithFreeSpace replaced it.
	freeSpace func(dir string) (int64, error)

	mu struct {
		sync.RWMutex
		partitions map[cluster.TopicPartition]*partition
		// reconciled is the metadata version the partitions reflect.
		reconciled uint64
		closed     bool
	}
	reconciledCh chan struct{} // closed and replaced after each reconcile
	// reconcileMu keeps reconcile rounds apart (reconcile.go).
	reconcileMu sync.Mutex
	// beforeOpen, when set, is called before a replica's log is opened
	// (WithBeforeOpen).
	beforeOpen func(topic string, partition int32)
	// beforeUpdate, when set, is called before metadata is applied to an
	// open replica (WithBeforeUpdate).
	beforeUpdate func(topic string, partition int32)
	// house tells the housekeeping loop which replicas have work
	// (housekeeping.go).
	house *housekeeper

	peers    Peers          // the other brokers
	fetchers *fetchers      // this broker's replication as a follower
	gossip   *gossip.Gossip // membership
	// counted holds, with TLS, the gossip members that proved the broker
	// ids they claim, as of the controller loop's last round (liveMembers).
	counted atomic.Pointer[[]gossip.Member]

	// life is the broker's lifetime: every goroutine the broker starts in
	// the background runs under it (goLoop, goTask) or a context derived
	// from it, and Close cancels it (end), then waits for them (wg).
	life context.Context
	end  context.CancelFunc
	wg   sync.WaitGroup
	// tasks refuses goTask once Close began, so that no task joins wg
	// after Close waits on it. Its own lock, held for nothing else: a
	// leader's pusher starts a pass from a log's change callback, which
	// may run under the partition's and the log's locks.
	tasks struct {
		sync.Mutex
		closed bool
	}

	// raftTLS, when set, runs the metadata group's transport over TLS.
	raftTLS *cluster.TransportTLS
	// version is the software version published in gossip (WithVersion).
	version string
	// metrics are the counters WriteMetrics reports beside what it reads
	// at scrape time (metrics_*.go); the zero value is ready to count.
	metrics brokerMetrics
	// producerIDKey, when set, binds producer ids to principals
	// (producer_binding.go).
	producerIDKey []byte
	// role is what differs between a member of a writing cluster and a
	// read-only replica of its bucket (role.go): clusterMember{b}, or
	// readOnly (readreplica_role.go), in which case nothing else above
	// (partitions, gossip, metadata) exists. Set by Start, never changed.
	role role
	// groups coordinates consumer groups while this broker is the
	// controller (groups.go).
	groups groupCoordination
}

// Option adjusts how Start runs a broker.
type Option func(*Broker)

// WithVersion names the software version the broker publishes to its peers
// in its gossip metadata (strata version prints the same).
func WithVersion(v string) Option {
	return func(b *Broker) { b.version = v }
}

// WithRaftTLS runs the metadata group's Raft transport over TLS.
func WithRaftTLS(t *cluster.TransportTLS) Option {
	return func(b *Broker) { b.raftTLS = t }
}

// Start opens the data dir, joins (or bootstraps) the metadata group, opens
// every partition this broker holds and starts its background work. It
// reaches other brokers through peers, which it closes when it stops. It
// returns once the broker can serve.
func Start(ctx context.Context, cfg config.Broker, logger *slog.Logger, peers Peers, opts ...Option) (*Broker, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if peers == nil {
		return nil, errors.New("broker: no transport to other brokers")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	defaults, err := cfg.TopicDefaults()
	if err != nil {
		return nil, err
	}
	b := &Broker{
		cfg:          cfg,
		id:           cfg.NodeID,
		defaults:     defaults,
		log:          logger,
		logsDir:      filepath.Join(cfg.DataDir, "logs"),
		reconciledCh: make(chan struct{}),
		tierKick:     make(chan struct{}, 1),
		peers:        peers,
		house:        newHousekeeper(),
	}
	b.life, b.end = context.WithCancel(context.Background())
	for _, o := range opts {
		o(b)
	}
	b.reload.live = cfg
	b.mu.partitions = map[cluster.TopicPartition]*partition{}
	b.fetchers = newFetchers(b)
	if cfg.ReadReplica {
		// No data dir, gossip, metadata group or partitions: see
		// readreplica.go.
		b.limits = newLimits(cfg, logger)
		if err := b.startReadReplica(ctx); err != nil {
			b.end()
			peers.Close()
			return nil, err
		}
		return b, nil
	}
	b.role = clusterMember{b}
	if err := os.MkdirAll(b.logsDir, 0o755); err != nil {
		return nil, fmt.Errorf("broker: data dir: %w", err)
	}
	if b.lock, err = lockDir(cfg.DataDir); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			b.end()
			b.closeAll()
		}
	}()
	if b.freeSpace == nil {
		b.freeSpace = freeBytes
	}
	checkStartSpace(cfg.DataDir, cfg.Storage.MinFreeBytes, b.freeSpace, logger)
	b.limits = newLimits(cfg, logger)
	b.limits.shareSyncs(cfg, logger)

	if err := checkStoreIdentity(cfg.DataDir, b.logsDir, cfg.ObjectStore, logger); err != nil {
		return nil, err
	}
	b.storeMetrics = &objstore.Metrics{}
	if b.store, err = openStore(ctx, cfg, b.storeMetrics); err != nil {
		return nil, fmt.Errorf("broker: %w", ExplainStoreError(cfg, fmt.Errorf("object store: %w", err)))
	}
	if b.store != nil {
		if err := probeStore(ctx, cfg, b.store, logger); err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
		b.coldPace = newColdPacer(cfg.Tiering, b.topicReadLimits)
		b.coldCleanThrottle = tiering.NewThrottle(int64(cfg.Tiering.ColdCleanerIOMaxBytesPerSecond))
		b.cold, err = tiering.NewColdReader(b.store, b.coldReaderConfig())
		if err != nil {
			return nil, fmt.Errorf("broker: cold reader: %w", err)
		}
	}

	if err := b.startGossip(b.version); err != nil {
		return nil, fmt.Errorf("broker: gossip: %w", err)
	}
	bootstrap, servers, err := b.bootstrapPlan(ctx)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	b.meta, err = cluster.Open(cluster.Config{
		NodeID:           cfg.NodeID,
		Dir:              filepath.Join(cfg.DataDir, "raft"),
		Bind:             cfg.Raft.Listen,
		Advertise:        cfg.Raft.Advertise,
		Bootstrap:        bootstrap,
		BootstrapServers: servers,
		TLS:              b.raftTLS,
		Logger:           logger,
	})
	if err != nil {
		return nil, fmt.Errorf("broker: metadata: %w", err)
	}
	if err := b.meta.WaitReady(ctx); err != nil {
		return nil, fmt.Errorf("broker: waiting for the metadata group: %w", err)
	}
	if b.meta.IsController() {
		if err := b.register(ctx); err != nil {
			return nil, err
		}
	}
	if err := b.reconcile(); err != nil {
		return nil, err
	}
	b.goLoop(b.reconcileLoop)
	if b.coldPace != nil && b.coldPace.yield != nil {
		b.goLoop(b.coldPace.yield.run)
	}
	b.goLoop(b.housekeepingLoop)
	b.goLoop(b.tierLoop)
	b.goLoop(b.cleanerLoop)
	b.goLoop(b.controllerLoop)
	b.goLoop(b.isrWatchLoop)
	ok = true
	return b, nil
}

// register records this broker's addresses in the cluster metadata.
func (b *Broker) register(ctx context.Context) error {
	info := cluster.BrokerInfo{ID: b.id, Addr: b.cfg.AdvertiseAddr(), RaftAddr: b.meta.RaftAddr(), Rack: b.cfg.Gossip.Rack, KafkaAddr: b.cfg.Kafka.AdvertiseAddr()}
	if cur, ok := b.meta.Metadata().Broker(b.id); ok && cur == info {
		return nil
	}
	if err := b.meta.RegisterBroker(ctx, info); err != nil {
		return fmt.Errorf("broker: register broker %d: %w", b.id, err)
	}
	return nil
}

// lockDir takes an exclusive lock on dir, so two brokers never share one.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("broker: data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("broker: data dir %s is in use by another broker: %w", dir, err)
	}
	return f, nil
}

// ID is this broker's id.
func (b *Broker) ID() int32 { return b.id }

// DataDir is where this broker keeps its data.
func (b *Broker) DataDir() string { return b.cfg.DataDir }

// RaftAddr is the address of this broker's metadata transport; empty for a
// read-only replica, which has none.
func (b *Broker) RaftAddr() string {
	return b.role.raftAddr()
}

func (b clusterMember) raftAddr() string {
	return b.meta.RaftAddr()
}

// ReadReplica reports whether the broker is a read-only replica of a
// bucket another cluster writes (readreplica.go).
func (b *Broker) ReadReplica() bool {
	_, ok := b.role.(readOnly)
	return ok
}

// goLoop runs loop in the background under the broker's lifetime: its
// context ends when Close begins, and Close waits for it to return.
func (b *Broker) goLoop(loop func(ctx context.Context)) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		loop(b.life)
	}()
}

// goTask runs task as goLoop does, unless the broker is closing: a task a
// request or a loop starts while Close runs is dropped (false), so that
// Close's wait is not joined late.
func (b *Broker) goTask(task func(ctx context.Context)) bool {
	b.tasks.Lock()
	defer b.tasks.Unlock()
	if b.tasks.closed {
		return false
	}
	b.goLoop(task)
	return true
}

// Close stops background work, closes every partition (each fsyncs and
// checkpoints its log) and leaves the metadata group. In-flight requests
// should be finished first (the API server's graceful stop does that).
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.mu.closed {
		b.mu.Unlock()
		return nil
	}
	b.mu.closed = true
	b.mu.Unlock()
	b.tasks.Lock()
	b.tasks.closed = true
	b.tasks.Unlock()
	b.end()
	b.closeGroups() // held heartbeats return now
	b.wg.Wait()
	return b.closeAll()
}

func (b *Broker) closeAll() error {
	b.fetchers.stop()
	var errs []error
	b.mu.Lock()
	closing := slices.Collect(maps.Values(b.mu.partitions))
	clear(b.mu.partitions)
	b.mu.Unlock()
	// Several at once: each fsyncs what its flush policy left unsynced
	// and checkpoints a state that moved, and a broker of thousands of
	// replicas would otherwise stop one fsync at a time.
	closeErrs := make([]error, len(closing))
	inParallel(len(closing), func(i int) {
		if err := closing[i].close(); err != nil {
			closeErrs[i] = fmt.Errorf("close %s: %w", closing[i].name(), err)
		}
	})
	errs = append(errs, closeErrs...)
	if b.limits != nil {
		b.limits.syncs.Close() // after the logs: their last fsyncs may use it
	}
	if b.meta != nil {
		if err := b.meta.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if b.gossip != nil {
		b.gossip.Close() // a graceful leave: peers see a departure, not a failure
	}
	if b.cold != nil {
		b.cold.Close()
	}
	b.role.close()
	b.peers.Close()
	if b.lock != nil {
		b.lock.Close()
	}
	return errors.Join(errs...)
}

func (b *Broker) partitions() []*partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]*partition, 0, len(b.mu.partitions))
	for _, p := range b.mu.partitions {
		out = append(out, p)
	}
	return out
}
