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

	isr struct {
		sync.Mutex
		// md is the metadata observeISR last looked at; seen each led
		// partition's ISR in it.
		md   *cluster.Metadata
		seen map[cluster.TopicPartition]isrSeen
	}
}

// isrSeen is a led partition's state as observeISR last saw it.
type isrSeen struct {
	topicID        string
	leaderEpoch    int32
	partitionEpoch int32
	isr            []int32
}
