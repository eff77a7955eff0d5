package broker

// Limits that keep one client from hurting the rest (config.Limits and
// config.Quotas), read once at start:
//
//   - partition replicas per broker: limits.max_partitions_per_broker
//     (20,000 unless set). The bound is about what every replica costs
//     whether written or not (memory, metadata, start time), not open
//     files: an idle replica holds none, its segment files are opened on
//     demand through one broker-wide cache of at most segmentFiles open
//     files (hotlog.FileCache), sized from the open-file limit
//     (RLIMIT_NOFILE). A replica being written holds its active segment
//     file until the flush policy's fsync, and briefly an index,
//     checkpoint or snapshot file, its directory, or a copy of a segment
//     for an upload; a broker whose limit lets more replicas be written
//     at once than its open files cover says so at start. CreateTopic and
//     RestoreTopic refuse a topic that would put more replicas on any
//     broker than the limit. The check runs on the broker that handles
//     the call, before it asks the controller, against the replica counts
//     of every broker in the replicated metadata and the placement the
//     controller would choose now (cluster.ReplicaCounts); the limit is
//     this broker's own, applied to all (brokers do not advertise
//     theirs), so set it alike everywhere. A call this broker forwards to
//     the controller is checked there again with the controller's limit.
//     Replicas moved onto a broker later (when the controller reassigns a
//     dead broker's replicas) are not checked.
//   - fetch response size: limits.max_fetch_bytes caps max_bytes.
//   - consumer groups: limits.max_groups, checked by the controller when a
//     commit would create a group (cluster.WithMaxGroups).
//   - byte rates per principal: quota.go.

import (
	"log/slog"
	"maps"
	"slices"
	"syscall"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/hotlog"
)

const (
	// fdsPerWrittenReplica is what one partition replica being written is
	// counted to hold open beyond the segment file cache, on the safe side:
	// its active segment file, which the cache cannot close while it has
	// writes the flush policy has yet to fsync (all of it under
	// FlushNever), and one or two of the files opened only for a moment:
	// an index, the state or epoch checkpoint or a producer snapshot while
	// it is written, the partition directory to fsync it, a segment the
	// tiering loop copies to the bucket. An idle replica holds nothing.
	fdsPerWrittenReplica = 3
	// fdReserve is kept out of the budget for everything else a broker
	// opens: client and peer connections, listeners, the Raft log and
	// snapshots, gossip, the fs object store, the chunk cache's reads.
	fdReserve = 1024
	// The segment file cache gets a quarter of what the reserve leaves,
	// within these bounds: enough for readers of many partitions at once
	// (each read holds one file), and no more than a broker reading
	// everywhere needs.
	minSegmentFiles = 16
	maxSegmentFiles = 4096
)

// limits are this broker's bounds, fixed at start. A nil *limits (a Broker
// not made by Start) bounds nothing.
type limits struct {
	// maxReplicas bounds the partition replicas of one broker
	// (limits.max_partitions_per_broker).
	maxReplicas int
	// segmentFiles bounds the segment files the broker's logs keep open
	// (files), derived from the open-file limit.
	segmentFiles int
	files        *hotlog.FileCache
	// syncs lets the logs' fsyncs share syncfs rounds of the data dir's
	// file system (storage.shared_sync_after); nil when off.
	syncs         *hotlog.SyncGroup
	maxFetchBytes int
	maxGroups     int // 0: no bound
	produce       *quota
	fetch         *quota
}

// newLimits reads the broker's limits from cfg and sizes the segment file
// cache from the process's open-file limit. A limit too low for many
// replicas written at once is logged at info level: it bounds only a
// load, and a default start warns of nothing.
func newLimits(cfg config.Broker, logger *slog.Logger) *limits {
	l := &limits{
		maxReplicas:   cfg.Limits.MaxPartitionsPerBroker,
		maxFetchBytes: int(cfg.Limits.MaxFetchBytes),
		maxGroups:     cfg.Limits.MaxGroups,
		produce:       newQuota("quotas.produce_bytes_per_sec", int64(cfg.Quotas.ProduceBytesPerSec)),
		fetch:         newQuota("quotas.fetch_bytes_per_sec", int64(cfg.Quotas.FetchBytesPerSec)),
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		rl.Cur = 1024 // the usual soft limit: the safe guess
		logger.Warn("reading the open-file limit failed; sizing the segment file cache from 1024 files", "err", err)
	}
	l.segmentFiles = segmentFileBound(rl.Cur)
	l.files = hotlog.NewFileCache(l.segmentFiles)
	if l.maxReplicas > 0 {
		if written := writtenAtOnce(rl.Cur, l.segmentFiles); written < l.maxReplicas {
			logger.Info("the open-file limit covers fewer partition replicas written at once than limits.max_partitions_per_broker allows; idle replicas hold no files, but raise ulimit -n if many are written at once (each holds its active segment until fsynced)",
				"open_files", rl.Cur, "segment_file_cache", l.segmentFiles, "written_at_once", written, "max_partitions_per_broker", l.maxReplicas)
		}
	}
	return l
}

// shareSyncs sends the segment files' fsyncs through a group on the file
// system of dataDir (hotlog.SyncGroup), unless storage.shared_sync_after is
// 0. A group that cannot open leaves each fsync its own, with a warning.
func (l *limits) shareSyncs(cfg config.Broker, logger *slog.Logger) {
	if cfg.Storage.SharedSyncAfter <= 0 {
		return
	}
	g, err := hotlog.DiskSyncGroup(cfg.DataDir, cfg.Storage.SharedSyncAfter)
	if err != nil {
		logger.Warn("fsyncs of partitions written at once will not share file-system syncs", "err", err)
		return
	}
	if g != nil {
		l.syncs = g
		l.files.ShareSyncs(g)
	}
}

// budget is the open files left after a reserve for everything but the
// logs (half the files when there are few).
func budget(nofile uint64) uint64 {
	return nofile - min(uint64(fdReserve), nofile/2)
}

// segmentFileBound sizes the broker-wide segment file cache for nofile
// open files: a quarter of the budget, within [minSegmentFiles,
// maxSegmentFiles].
func segmentFileBound(nofile uint64) int {
	return int(min(max(budget(nofile)/4, minSegmentFiles), maxSegmentFiles))
}

// writtenAtOnce is how many partition replicas a broker allowed nofile
// open files, segmentFiles of them for its cache, can have written at
// once: what is left after the reserve and the cache, at
// fdsPerWrittenReplica each.
func writtenAtOnce(nofile uint64, segmentFiles int) int {
	b := budget(nofile)
	b -= min(uint64(segmentFiles), b)
	return int(min(b/fdsPerWrittenReplica, 1<<30))
}

// checkReplicaBudget refuses a new topic of partitions × replicationFactor
// that would put more partition replicas on a broker than the limit.
func (b *Broker) checkReplicaBudget(topic string, partitions int32, replicationFactor int) error {
	if b.limits == nil || b.limits.maxReplicas <= 0 {
		return nil
	}
	now, after := cluster.ReplicaCounts(b.meta.Metadata(), partitions, replicationFactor)
	// Only brokers the topic adds replicas to count: one already beyond a
	// limit lowered since does not block topics placed elsewhere.
	worst, over := int32(-1), 0
	for _, id := range slices.Sorted(maps.Keys(after)) {
		if n := after[id]; n > now[id] && n > b.limits.maxReplicas && n > over {
			worst, over = id, n
		}
	}
	if worst < 0 {
		return nil
	}
	limit := b.limits.maxReplicas
	return refuse(ReasonInvalidRequest, nil,
		"topic %q with %d partitions × %d replicas would put %d partition replicas on broker %d, which holds %d; at most %d are allowed per broker (limits.max_partitions_per_broker is %d). "+
			"Create fewer partitions (one request may ask for at most %d), add brokers, or raise limits.max_partitions_per_broker on every broker",
		topic, partitions, replicationFactor, over, worst, now[worst], limit, limit, cluster.MaxPartitions).
		with("broker_id", itoa(int64(worst))).with("replicas", itoa(int64(now[worst]))).
		with("requested", itoa(int64(over-now[worst]))).with("limit", itoa(int64(limit))).
		with("setting", "limits.max_partitions_per_broker")
}

// fetchBytes is the max_bytes a fetch is served: the request's, or the
// default, capped by limits.max_fetch_bytes.
func (l *limits) fetchBytes(asked int) int {
	if asked <= 0 {
		asked = defaultFetchBytes
	}
	if l != nil && l.maxFetchBytes > 0 && asked > l.maxFetchBytes {
		return l.maxFetchBytes
	}
	return asked
}

// commitOptions bounds an offset commit by limits.max_groups.
func (l *limits) commitOptions() []cluster.CommitOption {
	if l == nil || l.maxGroups <= 0 {
		return nil
	}
	return []cluster.CommitOption{cluster.WithMaxGroups(l.maxGroups)}
}

// maxGroupsError explains a commit refused for creating a group beyond
// limits.max_groups.
func maxGroupsError(err error, tm *cluster.TooManyGroupsError) *Error {
	return refuse(ReasonInvalidRequest, err,
		"%v (limits.max_groups of the controller); groups go away only with the topics they committed offsets for, so raise limits.max_groups on every broker or reuse a group", err).
		with("limit", itoa(int64(tm.Max))).with("groups", itoa(int64(tm.Groups))).with("setting", "limits.max_groups")
}

// segmentFileCache is the cache the broker's logs share, or nil (a Broker
// not made by Start: each log then has a small one of its own).
func (l *limits) segmentFileCache() *hotlog.FileCache {
	if l == nil {
		return nil
	}
	return l.files
}
