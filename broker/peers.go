package broker

// How a broker reaches the other brokers. The broker knows no wire format:
// package rpc implements Peers over gRPC, and a simulation can implement it
// over anything.

import (
	"context"

	"github.com/strata-log/strata/cluster"
)

// Peers is what a broker asks of other brokers: as a follower, of the
// leaders it replicates from; as a leader, of the controller; while it
// bootstraps, of the brokers gossip found. Errors a peer refused a request
// with are *Error values with their reason.
type Peers interface {
	// Replicate opens a follower's stream to a leader broker.
	Replicate(ctx context.Context, to Peer) (FollowerStream, error)
	// EndOffsetForEpoch asks a leader where an epoch ends in its log.
	EndOffsetForEpoch(ctx context.Context, to Peer, q EpochQuery) (EpochEnd, error)
	// AlterISR asks the controller for an ISR change and returns the
	// partition after it.
	AlterISR(ctx context.Context, to Peer, req ISRRequest) (PartitionInfo, error)
	// NewLeaderEpoch asks the controller to start the leader epoch after
	// req.LeaderEpoch with the same leader; req.ISR is not used.
	NewLeaderEpoch(ctx context.Context, to Peer, req ISRRequest) (PartitionInfo, error)
	// KnowsController asks a broker whether it knows a controller: one
	// about to bootstrap a cluster must not start a second one.
	KnowsController(ctx context.Context, to Peer) (bool, error)
	// VerifyBroker proves a gossip member's claim to be broker claim.ID:
	// where brokers have certificates, that broker, reached at the claimed
	// addresses and authenticated by its certificate, confirms that it is
	// this gossip member at these addresses (claims.go); without them
	// every claim passes. Gossip is only a rumour: a member counts as a
	// broker, and the controller registers its addresses or gives it a
	// vote, only once its claim is proven.
	VerifyBroker(ctx context.Context, claim BrokerIdentity) error
	// Controller returns a client of the controller, broker to, to pass
	// on a call only the controller can answer (controller.go): it names
	// the principal of ctx on each call and marks the call forwarded, so
	// the controller checks that principal and does not pass it on again.
	Controller(to Peer) (ControllerClient, error)
	// Close ends every connection.
	Close() error
}

// Peer is a broker to reach: its id and advertised address.
type Peer struct {
	ID   int32
	Addr string
}

// FollowerStream is a follower's end of a replication stream: it sends its
// positions and receives the leader's chunks. The leader's end is
// ReplicaStream.
type FollowerStream interface {
	Send(ReplicaUpdate) error
	Recv() (ReplicaChunk, error)
}

// EpochQuery asks a leader where a leader epoch ends in its log.
type EpochQuery struct {
	Topic     string
	TopicID   string
	Partition int32
	Epoch     int32
}

// EpochEnd is a leader's answer to an EpochQuery: the largest epoch at or
// below the one asked for that its log knows, and the offset where it
// ended; hotlog.UndefinedEpoch and -1 when it knows none.
type EpochEnd struct {
	Epoch     int32
	EndOffset int64
	// LogEnd is the answering leader's log end offset, or -1 when it did
	// not say (an older broker). A follower whose epochs the leader does
	// not know keeps no record at or past it (truncationStep).
	LogEnd int64
}

// ISRRequest is a leader's request to change a partition's ISR, computed
// from the partition at LeaderEpoch and PartitionEpoch.
type ISRRequest struct {
	Topic          string
	TopicID        string
	Partition      int32
	LeaderID       int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
}

// PartitionInfo is a partition's replicas, ISR, leader and epochs as the
// controller decided them: what AlterISR and NewLeaderEpoch answer. It is
// the metadata's own record (cluster.PartitionInfo), which the answer is
// applied as, under the broker's name so callers need not import cluster.
type PartitionInfo = cluster.PartitionInfo
