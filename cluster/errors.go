package cluster

import (
	"errors"
	"fmt"
	"strconv"
)

// Errors returned by the cluster package. Callers test for them with
// errors.Is; the returned errors wrap them with detail (which topic, which
// epoch). The same values come back whether a request was refused by the
// proposer before Raft or by the state machine after it, so a caller never
// has to care which of the two caught it.
var (
	// ErrTopicExists: a topic of that name (or that topic id) already exists.
	ErrTopicExists = errors.New("cluster: topic already exists")
	// ErrTopicNotFound: no topic of that name exists (or it was deleted and
	// recreated as a different topic since the caller looked it up).
	ErrTopicNotFound = errors.New("cluster: topic not found")
	// ErrPartitionNotFound: the topic exists but has no such partition.
	ErrPartitionNotFound = errors.New("cluster: partition not found")
	// ErrGroupNotFound: no committed offsets for the consumer group.
	ErrGroupNotFound = errors.New("cluster: group not found")
	// ErrInvalidTopicName: a topic name breaks the naming rules; the error
	// names the rule.
	ErrInvalidTopicName = errors.New("cluster: invalid topic name")
	// ErrInvalidPartitions: a partition count outside 1..MaxPartitions.
	ErrInvalidPartitions = errors.New("cluster: invalid partition count")
	// ErrInvalidReplicationFactor: a replication factor below 1.
	ErrInvalidReplicationFactor = errors.New("cluster: invalid replication factor")
	// ErrNotEnoughBrokers: the replication factor is larger than the number of
	// registered brokers; the error says how many are registered.
	ErrNotEnoughBrokers = errors.New("cluster: not enough brokers")
	// ErrInvalidAssignment: a proposed partition assignment is inconsistent
	// (gaps in partition numbers, empty or duplicate replicas, ISR outside the
	// replicas, leader outside the ISR).
	ErrInvalidAssignment = errors.New("cluster: invalid partition assignment")
	// ErrBrokerNotFound: a replica or server names a broker id that is not
	// registered.
	ErrBrokerNotFound = errors.New("cluster: broker not registered")
	// ErrInvalidBroker: a broker registration with a negative id or a bad
	// address.
	ErrInvalidBroker = errors.New("cluster: invalid broker")
	// ErrInvalidConfig: a topic config change with an empty key or a key both
	// set and deleted.
	ErrInvalidConfig = errors.New("cluster: invalid topic config change")
	// ErrInvalidOffsetCommit: an offset commit with an empty group, a negative
	// offset or metadata longer than MaxOffsetMetadata.
	ErrInvalidOffsetCommit = errors.New("cluster: invalid offset commit")
	// ErrInvalidISR: a proposed ISR is empty, has duplicates or names a broker
	// that is not a replica of the partition.
	ErrInvalidISR = errors.New("cluster: invalid ISR")
	// ErrInvalidACL: an ACL that security.ACL.Validate refuses; the error
	// names the ACL and the rule it breaks.
	ErrInvalidACL = errors.New("cluster: invalid ACL")
	// ErrInvalidGroupState: a consumer group's membership, as its
	// coordinator writes it, breaks a rule (two members granted one
	// partition, a grant newer than its member's epoch, a bound exceeded);
	// the error names the rule.
	ErrInvalidGroupState = errors.New("cluster: invalid consumer group state")
	// ErrTooManyACLs: the change would store more than MaxACLs ACLs, or one
	// call names more than that.
	ErrTooManyACLs = errors.New("cluster: too many ACLs")
	// ErrNotController: a write reached a broker that is not the controller
	// (the Raft leader). The error is a *NotControllerError naming the
	// controller when one is known.
	ErrNotController = errors.New("cluster: not the controller")
	// ErrStaleEpoch: a leader or ISR change carries a leader epoch other than
	// the partition's current one; a newer leadership has fenced it.
	ErrStaleEpoch = errors.New("cluster: stale leader epoch")
	// ErrNotInISR: a new leader that is not in the ISR, or an ISR change that
	// would drop the current leader.
	ErrNotInISR = errors.New("cluster: broker not in the ISR")
	// ErrInvalidCommand: the state machine got a command it cannot decode: an
	// unknown type or version, or malformed JSON. Nothing was applied.
	ErrInvalidCommand = errors.New("cluster: invalid command")
	// ErrOutcomeUnknown: a proposal was handed to Raft but the caller stopped
	// waiting (context done) or leadership was lost before it committed. The
	// change may or may not have been applied; read the metadata to find out.
	ErrOutcomeUnknown = errors.New("cluster: outcome of the change is unknown")
	// ErrClosed: the node was closed.
	ErrClosed = errors.New("cluster: node is closed")
)

// NotControllerError is returned for writes sent to a broker that is not the
// controller. It matches ErrNotController with errors.Is. The broker passes
// such a call on to the controller it names (broker/controller.go).
type NotControllerError struct {
	// ControllerID is the broker id of the controller, or -1 when no
	// controller is known (an election is under way).
	ControllerID int32
	// Addr is the controller's advertised gRPC address if it has registered
	// itself as a broker, else empty.
	Addr string
	// RaftAddr is the controller's Raft address, or empty when unknown.
	RaftAddr string
}

// Error names the controller, and its gRPC address when it is registered.
func (e *NotControllerError) Error() string {
	if e.ControllerID < 0 {
		return "cluster: not the controller; no controller is known right now"
	}
	s := "cluster: not the controller; the controller is broker " + strconv.Itoa(int(e.ControllerID))
	if e.Addr != "" {
		s += " at " + e.Addr
	}
	return s
}

// Is makes errors.Is(err, ErrNotController) true.
func (e *NotControllerError) Is(target error) bool { return target == ErrNotController }

// errorf wraps a sentinel with detail: "<sentinel>: <detail>".
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}
