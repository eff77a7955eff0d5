package broker

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/strata-log/strata/cluster"
)

// Reason is the machine-readable cause of a refused request. The names are
// the wire names of the API's ErrorReason (without its ERROR_REASON_ prefix).
type Reason string

// Reasons; the reasons table below says which are retriable, and each
// front end maps them to its wire.
const (
	ReasonTopicNotFound      Reason = "TOPIC_NOT_FOUND"
	ReasonPartitionNotFound  Reason = "PARTITION_NOT_FOUND"
	ReasonNotLeader          Reason = "NOT_LEADER"           // retriable, at the leader
	ReasonOffsetOutOfRange   Reason = "OFFSET_OUT_OF_RANGE"  //
	ReasonRecordTooLarge     Reason = "RECORD_TOO_LARGE"     //
	ReasonCorruptBatch       Reason = "CORRUPT_BATCH"        //
	ReasonInvalidConfig      Reason = "INVALID_CONFIG"       //
	ReasonNotEnoughReplicas  Reason = "NOT_ENOUGH_REPLICAS"  // retriable
	ReasonThrottled          Reason = "THROTTLED"            // retriable, after RetryAfter
	ReasonTopicAlreadyExists Reason = "TOPIC_ALREADY_EXISTS" //
	ReasonInvalidTopicName   Reason = "INVALID_TOPIC_NAME"   //
	ReasonInvalidRequest     Reason = "INVALID_REQUEST"      //
	ReasonTimeout            Reason = "TIMEOUT"              // retriable; the write may have happened
	ReasonStorageError       Reason = "STORAGE_ERROR"        // retriable elsewhere
	ReasonUnavailable        Reason = "UNAVAILABLE"          // retriable
	ReasonFencedEpoch        Reason = "FENCED_EPOCH"         //
	ReasonLeaderNotAvailable Reason = "LEADER_NOT_AVAILABLE" // retriable
	ReasonCorruptData        Reason = "CORRUPT_DATA"         // stored data failed its checks on read; it is never returned
	// An idempotent producer's batch does not follow its last one: retriable,
	// since resending the earlier batches in order fills the gap.
	ReasonOutOfOrderSequence Reason = "OUT_OF_ORDER_SEQUENCE"
	// A newer instance of an idempotent producer has fenced this one.
	ReasonInvalidProducerEpoch Reason = "INVALID_PRODUCER_EPOCH"
	// The partition does not know the batch's idempotent producer and the
	// batch does not start at sequence 0. Not retriable as it is: resent
	// unchanged it is refused again. The producer recovers by starting its
	// sequences again under a new epoch (KIP-360), which is a new request.
	ReasonUnknownProducerID Reason = "UNKNOWN_PRODUCER_ID"
	// An acks=all batch was written, but the ISR fell below
	// min.insync.replicas before it committed: retriable, and a retry may
	// write it twice unless the producer is idempotent.
	ReasonNotEnoughReplicasAfterAppend Reason = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
	// The caller showed no credentials, or ones that do not check out.
	ReasonUnauthenticated Reason = "UNAUTHENTICATED"
	// The caller is known, and no ACL lets it do what it asked.
	ReasonPermissionDenied Reason = "PERMISSION_DENIED"
	// The broker is a read-only replica of a bucket another cluster writes
	// (readreplica.go): it refuses every write. Not retriable here; the
	// writing cluster's brokers take the call.
	ReasonReadReplica Reason = "READ_REPLICA"
	// No consumer group of that name has members or committed offsets.
	ReasonGroupNotFound Reason = "GROUP_NOT_FOUND"
	// The coordinator does not know the member (session expired, removed,
	// coordinator moved): it has lost its partitions and joins again.
	ReasonUnknownMember Reason = "UNKNOWN_MEMBER"
	// A member's commit names a partition it does not own, or an epoch
	// older than the one that granted it: nothing was committed.
	ReasonFencedMember Reason = "FENCED_MEMBER"
	// The group has members: stop them, or force.
	ReasonGroupNotEmpty Reason = "GROUP_NOT_EMPTY"
	// A produced record's timestamp is outside the topic's bounds or
	// negative, or the batch claims the LogAppendTime type only the broker
	// sets. Resent unchanged it is refused again.
	ReasonInvalidTimestamp Reason = "INVALID_TIMESTAMP"
	// A producer sent what only brokers write: a control batch.
	ReasonInvalidRecord Reason = "INVALID_RECORD"
	// A producer sent a transactional batch; Strata has no transactions.
	ReasonTransactionsNotSupported Reason = "TRANSACTIONS_NOT_SUPPORTED"
	// The data dir's file system has less free space than
	// storage.min_free_bytes, or none: produce is refused (retriable, after
	// RetryAfter) while reads and metadata go on; see disk.go.
	ReasonStorageFull Reason = "STORAGE_FULL"
	// Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat):
	// the member's assignment is changing and it must join again to hear
	// it; the member names a generation other than its current one; the
	// member's protocols do not match the group's.
	ReasonRebalanceInProgress       Reason = "REBALANCE_IN_PROGRESS"
	ReasonIllegalGeneration         Reason = "ILLEGAL_GENERATION"
	ReasonInconsistentGroupProtocol Reason = "INCONSISTENT_GROUP_PROTOCOL"
)

// reasons is the one table of reasons: every reason the broker refuses a
// request with, and whether retrying the same request can help (a client
// reads it as the "retriable" of the error's metadata). Each front end maps
// every reason here to its wire, and a test there holds its map to this
// table and to the wire's own list: rpc/errors.go to gRPC status codes and
// errors.proto, the Kafka front end to Kafka error codes. A reason missing
// here is a test failure (TestReasonTable), not a silent "not retriable".
var reasons = map[Reason]struct{ retriable bool }{
	ReasonTopicNotFound:                {},
	ReasonPartitionNotFound:            {},
	ReasonNotLeader:                    {retriable: true},
	ReasonOffsetOutOfRange:             {},
	ReasonRecordTooLarge:               {},
	ReasonCorruptBatch:                 {},
	ReasonInvalidConfig:                {},
	ReasonNotEnoughReplicas:            {retriable: true},
	ReasonThrottled:                    {retriable: true},
	ReasonTopicAlreadyExists:           {},
	ReasonInvalidTopicName:             {},
	ReasonInvalidRequest:               {},
	ReasonTimeout:                      {retriable: true},
	ReasonStorageError:                 {retriable: true},
	ReasonUnavailable:                  {retriable: true},
	ReasonFencedEpoch:                  {},
	ReasonLeaderNotAvailable:           {retriable: true},
	ReasonCorruptData:                  {},
	ReasonOutOfOrderSequence:           {retriable: true},
	ReasonInvalidProducerEpoch:         {},
	ReasonUnknownProducerID:            {},
	ReasonNotEnoughReplicasAfterAppend: {retriable: true},
	ReasonUnauthenticated:              {},
	ReasonPermissionDenied:             {},
	ReasonReadReplica:                  {},
	ReasonGroupNotFound:                {},
	ReasonUnknownMember:                {},
	ReasonFencedMember:                 {},
	ReasonGroupNotEmpty:                {},
	ReasonInvalidTimestamp:             {},
	ReasonInvalidRecord:                {},
	ReasonTransactionsNotSupported:     {},
	ReasonStorageFull:                  {retriable: true},
	ReasonRebalanceInProgress:          {},
	ReasonIllegalGeneration:            {},
	ReasonInconsistentGroupProtocol:    {},
}

// Reasons returns every reason, sorted: what a front end's map must cover.
func Reasons() []Reason {
	out := make([]Reason, 0, len(reasons))
	for r := range reasons {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// Retriable reports whether a request refused for r may succeed later, sent
// again as it was.
func (r Reason) Retriable() bool { return reasons[r].retriable }

// Error is a refused request: a reason, a message for people, detail for
// programs (Meta: for NOT_LEADER the leader's id and address, for
// OFFSET_OUT_OF_RANGE the valid range, for INVALID_CONFIG the key, value and
// allowed values) and, when throttled, how long to wait.
type Error struct {
	Reason     Reason
	Message    string
	Meta       map[string]string
	RetryAfter time.Duration
	cause      error
}

func (e *Error) Error() string { return "broker: " + e.Message }

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.cause }

// Retriable reports whether the same request may succeed later.
func (e *Error) Retriable() bool { return e.Reason.Retriable() }

func refuse(reason Reason, cause error, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...), cause: cause}
}

func (e *Error) with(key, value string) *Error {
	if e.Meta == nil {
		e.Meta = map[string]string{}
	}
	e.Meta[key] = value
	return e
}

// ReasonOf returns the reason of a broker error, or "" for other errors.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// InvalidRequest is the error for a malformed request: a missing or
// impossible field.
func InvalidRequest(format string, args ...any) *Error {
	return refuse(ReasonInvalidRequest, nil, format, args...)
}

// Unauthenticated is the error for a caller whose credentials are missing
// or do not check out.
func Unauthenticated(format string, args ...any) *Error {
	return refuse(ReasonUnauthenticated, nil, format, args...)
}

// PermissionDenied is the error for a caller no ACL allows to do what it
// asked.
func PermissionDenied(format string, args ...any) *Error {
	return refuse(ReasonPermissionDenied, nil, format, args...)
}

// With adds a detail for programs to e.
func (e *Error) With(key, value string) *Error { return e.with(key, value) }

// Unavailable is the error for a request this broker cannot serve right now
// (it is starting or stopping); the client should retry, here or elsewhere.
func Unavailable(format string, args ...any) *Error {
	return refuse(ReasonUnavailable, nil, format, args...)
}

// notLeaderError is every NOT_LEADER the broker answers, built one way:
// this broker does not lead the partition (or no longer does), as the
// message says, and leader does, at addr (its client address, "" where
// the metadata has none). Meta names the leader for the client to go to,
// "leader_id" and "leader_address", both empty while no broker leads it
// (cluster.NoLeader: an election is under way).
func notLeaderError(leader int32, addr string, format string, args ...any) *Error {
	e := refuse(ReasonNotLeader, nil, format, args...)
	id := ""
	switch {
	case leader == cluster.NoLeader:
		addr = ""
		e.Message += "; no broker leads it yet"
	case addr == "":
		id = itoa(int64(leader))
		e.Message += fmt.Sprintf("; broker %d leads it", leader)
	default:
		id = itoa(int64(leader))
		e.Message += fmt.Sprintf("; broker %d at %s leads it", leader, addr)
	}
	return e.with("leader_id", id).with("leader_address", addr)
}

// notLeading is the refusal of a request for a partition this broker does
// not lead: NOT_LEADER naming leader at addr (notLeaderError), or
// LEADER_NOT_AVAILABLE while no broker leads it (an election: the client
// waits and asks again rather than go elsewhere).
func notLeading(leader int32, addr string, format string, args ...any) *Error {
	if leader == cluster.NoLeader {
		e := refuse(ReasonLeaderNotAvailable, nil, format, args...)
		e.Message += "; no broker leads it right now"
		return e
	}
	return notLeaderError(leader, addr, format, args...)
}

// CorruptData is the error for stored data that fails its checks when read
// back (a length, a CRC, records that do not decode): the data is not
// returned, and retrying cannot help. offset is where the damage is.
func CorruptData(cause error, offset int64, format string, args ...any) *Error {
	return refuse(ReasonCorruptData, cause, format, args...).with("offset", itoa(offset))
}
