package broker

import (
	"sync"
	"sync/atomic"

	"github.com/strata-log/strata/cluster"
)

// brokerMetrics are the counters of events the broker sees happen, as
// opposed to the figures WriteMetrics reads at scrape time (partitions,
// ISRs, lags). The zero value is ready.
type brokerMetrics struct {
	// once gives requests its view of the metadata (RequestMetrics).
	once     sync.Once
	requests RequestMetrics
	// kafka counts the Kafka front end's requests (metrics_kafka.go).
	kafka KafkaMetrics
	// cleaner counts the log cleaner's work (cleaner.go).
	cleaner cleanerStats
	// coldCleaner counts the cold cleaner's work in the bucket
	// (tier_clean.go).
	coldCleaner coldCleanerStats
	// leaderElections counts the leaders this broker elected as controller
	// (membership.go, electLeader).
	leaderElections atomic.Int64
	// isrShrinks and isrExpands count the ISR changes of the partitions
	// this broker leads (observeISR).
	isrShrinks atomic.Int64
	isrExpands atomic.Int64
	// sequenceWaits counts idempotent batches that reached this leader
	// before batches their producer sent ahead of them and waited for
	// them (producers.go, awaitTurn).
	sequenceWaits atomic.Int64
	// claimsRefused counts the refusals of gossip claims this broker
	// logged: a member that did not prove the broker id it claims
	// (claims.go), counted as often as it is logged.
	claimsRefused atomic.Int64
	// throttled counts produce and fetch requests refused with THROTTLED,
	// by the limit that refused them (throttleLimits), through either
	// front end: both reach the broker's Produce and Fetch.
	throttled [len(throttleLimits)]atomic.Int64
	// quotaHeldNanos is the time fetches over their quota were held
	// before being served (quota.go, admitFetch), which no refusal shows.
	quotaHeldNanos atomic.Int64
	// reconcileAll and reconcileChanged count reconcile rounds that
	// compared every partition, and those that applied only the
	// partitions the metadata changes named (reconcile.go).
	reconcileAll     atomic.Int64
	reconcileChanged atomic.Int64

	isr struct {
		sync.Mutex
		// md is the metadata observeISR last looked at; seen each led
		// partition's ISR in it.
		md   *cluster.Metadata
		seen map[cluster.TopicPartition]isrSeen
	}
}

// Indexes of brokerMetrics.throttled, and their limit label.
const (
	throttleProduceQuota = iota
	throttleFetchQuota
	throttleUploadBacklog
)

var throttleLimits = [...]string{
	throttleProduceQuota:  "produce_quota",  // quotas.produce_bytes_per_sec
	throttleFetchQuota:    "fetch_quota",    // quotas.fetch_bytes_per_sec
	throttleUploadBacklog: "upload_backlog", // tiering.max_unuploaded_bytes
}

// throttle counts a request refused by the limit at index i.
func (m *brokerMetrics) throttle(i int) { m.throttled[i].Add(1) }

// isrSeen is a led partition's state as observeISR last saw it.
type isrSeen struct {
	topicID        string
	leaderEpoch    int32
	partitionEpoch int32
	isr            []int32
}
