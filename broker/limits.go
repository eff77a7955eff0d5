package broker

// Limits that keep one client from hurting the rest (config.Limits and
// config.Quotas), read once at start:
//
//   - partition replicas per broker: each replica keeps files open, and a
//     broker out of file descriptors answers nothing, health checks
//     included. CreateTopic and RestoreTopic refuse a topic that would put
//     more replicas on any broker than limits.max_partitions_per_broker
//     allows, or, when that is 0, than this broker's open-file limit
//     (RLIMIT_NOFILE) leaves room for. The check runs on the broker that
//     handles the call, before it asks the controller, against the replica
//     counts of every broker in the replicated metadata and the placement
//     the controller would choose now (cluster.ReplicaCounts); the limit is
//     this broker's own, applied to all (brokers do not advertise theirs),
//     so set it alike everywhere. A call this broker forwards to the
//     controller is checked there again with the controller's limit.
//     Replicas moved onto a broker later (when the controller reassigns a
//     dead broker's replicas) are not checked.
//   - fetch response size: limits.max_fetch_bytes caps max_bytes.
//   - consumer groups: limits.max_groups, checked by the controller when a
//     commit would create a group (cluster.WithMaxGroups).
//   - byte rates per principal: quota.go.

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"syscall"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
)

const (
	// fdsPerReplica is what one partition replica is counted to keep open,
	// on the safe side. The hot log keeps every local segment's .log file
	// open (the active one and each sealed one until local retention
	// deletes it after its upload); it opens the active segment's two
	// indexes while it writes them, a checkpoint or producer snapshot file
	// while it writes one and the partition directory to fsync it after;
	// the tiering loop opens a segment to upload it. That is 1 + 2 + 2 + 1
	// at the peak, plus the sealed segments retained locally: 16 leaves
	// room for ten of them.
	fdsPerReplica = 16
	// fdReserve is kept out of the budget for everything else a broker
	// opens: client and peer connections, listeners, the Raft log and
	// snapshots, gossip, the fs object store, the chunk cache's reads.
	fdReserve = 1024
	// maxDerivedReplicas bounds a limit derived from a very large (or
	// unlimited) open-file limit.
	maxDerivedReplicas = 1 << 20
)

// limits are this broker's bounds, fixed at start. A nil *limits (a Broker
// not made by Start) bounds nothing.
type limits struct {
	// maxReplicas bounds the partition replicas of one broker.
	maxReplicas int
	// nofile is the open-file limit maxReplicas was derived from, or 0
	// when limits.max_partitions_per_broker set it.
	nofile        uint64
	maxFetchBytes int
	maxGroups     int // 0: no bound
	produce       *quota
	fetch         *quota
}

// newLimits reads the broker's limits from cfg and, when the partition
// limit is to be derived, the process's open-file limit.
func newLimits(cfg config.Broker, logger *slog.Logger) *limits {
	l := &limits{
		maxReplicas:   cfg.Limits.MaxPartitionsPerBroker,
		maxFetchBytes: int(cfg.Limits.MaxFetchBytes),
		maxGroups:     cfg.Limits.MaxGroups,
		produce:       newQuota("quotas.produce_bytes_per_sec", int64(cfg.Quotas.ProduceBytesPerSec)),
		fetch:         newQuota("quotas.fetch_bytes_per_sec", int64(cfg.Quotas.FetchBytesPerSec)),
	}
	if l.maxReplicas <= 0 {
		var rl syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			rl.Cur = 1024 // the usual soft limit: the safe guess
			logger.Warn("reading the open-file limit failed; deriving the partition limit from 1024 files", "err", err)
		}
		l.nofile = rl.Cur
		l.maxReplicas = derivedReplicaLimit(rl.Cur)
		logger.Info("partition replicas per broker bounded by the open-file limit (limits.max_partitions_per_broker is 0)",
			"open_files", rl.Cur, "max_partitions_per_broker", l.maxReplicas)
	}
	return l
}

// derivedReplicaLimit is the partition replicas a broker allowed nofile
// open files can hold: what is left after a reserve (half the files when
// there are few), at fdsPerReplica each, and at least one.
func derivedReplicaLimit(nofile uint64) int {
	reserve := min(uint64(fdReserve), nofile/2)
	n := (nofile - reserve) / fdsPerReplica
	return int(max(1, min(n, maxDerivedReplicas)))
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
	source := fmt.Sprintf("limits.max_partitions_per_broker is %d", limit)
	if b.limits.nofile > 0 {
		source = fmt.Sprintf("limits.max_partitions_per_broker is 0, so broker %d derived it from its open-file limit of %d at %d files per replica", b.id, b.limits.nofile, fdsPerReplica)
	}
	return refuse(ReasonInvalidRequest, nil,
		"topic %q with %d partitions × %d replicas would put %d partition replicas on broker %d, which holds %d; at most %d are allowed per broker (%s). "+
			"Create fewer partitions (one request may ask for at most %d), add brokers, or raise limits.max_partitions_per_broker (and the open-file limit, ulimit -n) on every broker",
		topic, partitions, replicationFactor, over, worst, now[worst], limit, source, cluster.MaxPartitions).
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
func maxGroupsError(err error, tm *cluster.TooManyGroupsError) error {
	return refuse(ReasonInvalidRequest, err,
		"%v (limits.max_groups of the controller); groups go away only with the topics they committed offsets for, so raise limits.max_groups on every broker or reuse a group", err).
		with("limit", itoa(int64(tm.Max))).with("groups", itoa(int64(tm.Groups))).with("setting", "limits.max_groups")
}
