package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of Strata's errors. Details
// from any other domain are ignored.
const ErrorDomain = "strata.dev"

// Error is a failed call as the broker (or, for a few client-side checks,
// this package) describes it: a gRPC code, a machine-readable reason and
// whether the same call may succeed later.
//
// Test for a reason with errors.Is against the sentinels below, and read the
// details with AsError:
//
//	if errors.Is(err, client.ErrOffsetOutOfRange) { ... }
//	if e, ok := client.AsError(err); ok { hw := e.Metadata["high_watermark"] }
type Error struct {
	// Code is the gRPC status code.
	Code codes.Code
	// Reason is the ErrorReason name without its ERROR_REASON_ prefix
	// ("NOT_LEADER"), or "" for transport errors that carry no details.
	Reason string
	// Message is the human-readable text of the status.
	Message string
	// Retriable says the same call may succeed later.
	Retriable bool
	// Metadata holds the ErrorInfo metadata: "retriable" and per-reason keys
	// such as "leader_id" and "leader_address" for NOT_LEADER.
	Metadata map[string]string
	// RetryAfter is how long the broker asks the caller to wait (THROTTLED);
	// zero when it did not say.
	RetryAfter time.Duration
}

// Error formats the reason, the message and the code, prefixed "strata: ".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("strata: ")
	if e.Reason != "" {
		b.WriteString(e.Reason)
	} else {
		b.WriteString(e.Code.String())
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Reason != "" {
		fmt.Fprintf(&b, " (%s)", e.Code)
	}
	return b.String()
}

// Is reports whether target is an *Error with the same non-empty Reason, so
// errors.Is(err, ErrNotLeader) matches any NOT_LEADER answer whatever its
// message or metadata.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason != "" && t.Reason == e.Reason
}

// Sentinels, one per ErrorReason of rpc/proto/strata/v1/errors.proto. Only
// their Reason matters to errors.Is; their other fields describe the usual
// case. "Retriable" below is what brokers normally say; the Retriable field
// of the error actually returned is what counts.
var (
	// ErrTopicNotFound: no such topic (or not in the metadata yet).
	ErrTopicNotFound = sentinel(codes.NotFound, "TOPIC_NOT_FOUND", false)
	// ErrPartitionNotFound: the topic has no such partition.
	ErrPartitionNotFound = sentinel(codes.NotFound, "PARTITION_NOT_FOUND", false)
	// ErrNotLeader: the broker does not lead the partition; its metadata
	// names the leader ("leader_id", "leader_address"). Retriable; the
	// client follows it itself.
	ErrNotLeader = sentinel(codes.FailedPrecondition, "NOT_LEADER", true)
	// ErrOffsetOutOfRange: the offset is below the log start or above the
	// high watermark (metadata "log_start_offset", "high_watermark").
	ErrOffsetOutOfRange = sentinel(codes.OutOfRange, "OFFSET_OUT_OF_RANGE", false)
	// ErrRecordTooLarge: the batch is over the topic's max.message.bytes
	// (metadata "size", "max").
	ErrRecordTooLarge = sentinel(codes.InvalidArgument, "RECORD_TOO_LARGE", false)
	// ErrCorruptBatch: the broker refused a produced batch that failed its
	// checks: length, magic, CRC, or records that do not decode (the
	// message says which record and field). A fetched batch that fails is
	// ErrCorruptData.
	ErrCorruptBatch = sentinel(codes.InvalidArgument, "CORRUPT_BATCH", false)
	// ErrInvalidConfig: a topic setting, or an option of this package, is
	// invalid (metadata "key", "value", "allowed").
	ErrInvalidConfig = sentinel(codes.InvalidArgument, "INVALID_CONFIG", false)
	// ErrNotEnoughReplicas: fewer in-sync replicas than
	// min.insync.replicas. Retriable.
	ErrNotEnoughReplicas = sentinel(codes.Unavailable, "NOT_ENOUGH_REPLICAS", true)
	// ErrThrottled: the broker is shedding load; RetryAfter says when to
	// come back. Retriable.
	ErrThrottled = sentinel(codes.ResourceExhausted, "THROTTLED", true)
	// ErrTopicAlreadyExists: CreateTopic of an existing topic.
	ErrTopicAlreadyExists = sentinel(codes.AlreadyExists, "TOPIC_ALREADY_EXISTS", false)
	// ErrInvalidTopicName: the name is empty, too long or has characters
	// topics cannot have.
	ErrInvalidTopicName = sentinel(codes.InvalidArgument, "INVALID_TOPIC_NAME", false)
	// ErrInvalidRequest: a malformed request (missing field, bad value).
	ErrInvalidRequest = sentinel(codes.InvalidArgument, "INVALID_REQUEST", false)
	// ErrTimeout: the wait for replication timed out; the batch may or may
	// not be committed. Retriable.
	ErrTimeout = sentinel(codes.DeadlineExceeded, "TIMEOUT", true)
	// ErrStorage: the partition's log failed on the broker. Retriable.
	ErrStorage = sentinel(codes.Unavailable, "STORAGE_ERROR", true)
	// ErrUnavailable: the broker is starting or stopping, or the cluster
	// has no controller. Retriable.
	ErrUnavailable = sentinel(codes.Unavailable, "UNAVAILABLE", true)
	// ErrFencedEpoch: the request carries an old leader epoch.
	ErrFencedEpoch = sentinel(codes.FailedPrecondition, "FENCED_EPOCH", false)
	// ErrLeaderNotAvailable: the partition has no leader right now, or its
	// new leader is still loading it. Retriable.
	ErrLeaderNotAvailable = sentinel(codes.Unavailable, "LEADER_NOT_AVAILABLE", true)
	// ErrCorruptData: stored data failed its checks when read back, at the
	// broker (either tier) or, for fetched batches, in this client; nothing
	// was returned. Error.Metadata["offset"] says where, when it is known.
	// Reading again returns the same bytes: not retriable.
	ErrCorruptData = sentinel(codes.DataLoss, "CORRUPT_DATA", false)
	// ErrOutOfOrderSequence: an idempotent producer's batch does not follow
	// its previous one in the partition (metadata "producer_id",
	// "sequence", "expected_sequence"); nothing was written. Retriable: the
	// producer retries it in order (see WithIdempotence).
	ErrOutOfOrderSequence = sentinel(codes.FailedPrecondition, "OUT_OF_ORDER_SEQUENCE", true)
	// ErrInvalidProducerEpoch: a newer instance of the idempotent producer
	// has fenced this one.
	ErrInvalidProducerEpoch = sentinel(codes.FailedPrecondition, "INVALID_PRODUCER_EPOCH", false)
	// ErrUnknownProducerID: the partition does not know the idempotent
	// producer (metadata "producer_id", "producer_epoch", "sequence") and
	// the batch does not start at sequence 0; nothing was written. Not
	// retriable as sent: the Producer recovers on its own by starting its
	// sequences again under its next epoch (see WithIdempotence). It gives
	// it to a batch only when an earlier send of that batch got no answer,
	// so the batch may have been written and is not numbered again.
	ErrUnknownProducerID = sentinel(codes.FailedPrecondition, "UNKNOWN_PRODUCER_ID", false)
	// ErrUnauthenticated: the broker requires credentials (a client
	// certificate, see WithTLS, or a token, see WithToken) and got none, or
	// ones that do not check out.
	ErrUnauthenticated = sentinel(codes.Unauthenticated, "UNAUTHENTICATED", false)
	// ErrPermissionDenied: no ACL lets this client's principal do what it
	// asked (metadata "principal", "operation", "resource").
	ErrPermissionDenied = sentinel(codes.PermissionDenied, "PERMISSION_DENIED", false)
	// ErrNotEnoughReplicasAfterAppend: an acks=all batch was written but
	// the in-sync replicas fell below min.insync.replicas before it
	// committed, so it was not acknowledged. Retriable; a retry may write
	// it twice unless the producer is idempotent.
	ErrNotEnoughReplicasAfterAppend = sentinel(codes.Unavailable, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", true)
	// ErrReadReplica: the broker is a read-only replica of another
	// cluster's bucket (strata serve --read-replica); it serves fetches,
	// offsets and metadata but refuses produce, producer ids, topic and
	// ACL admin and offset commits. Send writes to the writing cluster.
	ErrReadReplica = sentinel(codes.FailedPrecondition, "READ_REPLICA", false)
	// ErrGroupNotFound: no consumer group of that name has members or
	// committed offsets.
	ErrGroupNotFound = sentinel(codes.NotFound, "GROUP_NOT_FOUND", false)
	// ErrUnknownMember: the group's coordinator does not know the member
	// (its session expired, it was removed, or the coordinator moved). A
	// GroupConsumer handles it itself: its partitions are lost and it joins
	// again.
	ErrUnknownMember = sentinel(codes.FailedPrecondition, "UNKNOWN_MEMBER", false)
	// ErrFencedMember: a group member's commit named a partition it no
	// longer owns (it lost it in a rebalance), or an older epoch than the
	// one that gave it the partition. Nothing was committed.
	ErrFencedMember = sentinel(codes.FailedPrecondition, "FENCED_MEMBER", false)
	// ErrGroupNotEmpty: the group has members (a reset, a deletion, or a
	// commit made outside the group); stop them, or force.
	ErrGroupNotEmpty = sentinel(codes.FailedPrecondition, "GROUP_NOT_EMPTY", false)
	// ErrInvalidTimestamp: a record's timestamp is further from the
	// broker's clock than the topic's message.timestamp.before.max.ms or
	// message.timestamp.after.max.ms allow (metadata "timestamp" and
	// "earliest" or "latest"), or before 1970; the broker refused its whole
	// batch, so records sent with it get it too. A Producer refuses a
	// record before 1970 itself, before it joins a batch.
	ErrInvalidTimestamp = sentinel(codes.InvalidArgument, "INVALID_TIMESTAMP", false)
	// ErrInvalidRecord: the batch is what only brokers write (a control
	// batch). A Producer never sends one.
	ErrInvalidRecord = sentinel(codes.InvalidArgument, "INVALID_RECORD", false)
	// ErrTransactionsNotSupported: the batch is transactional; Strata has
	// no transactions. A Producer never sends one.
	ErrTransactionsNotSupported = sentinel(codes.Unimplemented, "TRANSACTIONS_NOT_SUPPORTED", false)
	// ErrStorageFull: the broker's data disk has less free space than its
	// storage.min_free_bytes, or none (metadata "free_bytes",
	// "min_free_bytes"). It refuses produce and still serves reads and
	// metadata; nothing was written. Retriable: RetryAfter says when to
	// come back, and produce is taken again once space is freed there.
	ErrStorageFull = sentinel(codes.ResourceExhausted, "STORAGE_FULL", true)
	// ErrRebalanceInProgress, ErrIllegalGeneration and
	// ErrInconsistentGroupProtocol answer Kafka's classic group protocol
	// (JoinGroup, SyncGroup, Heartbeat), which the Kafka front end serves
	// on the same coordinator: a classic member must join again, named a
	// generation other than its own, or offered protocols the group's
	// other members do not share. A GroupConsumer never sees them.
	ErrRebalanceInProgress       = sentinel(codes.FailedPrecondition, "REBALANCE_IN_PROGRESS", false)
	ErrIllegalGeneration         = sentinel(codes.FailedPrecondition, "ILLEGAL_GENERATION", false)
	ErrInconsistentGroupProtocol = sentinel(codes.FailedPrecondition, "INCONSISTENT_GROUP_PROTOCOL", false)
)

// ErrClosed is returned by calls on a Client, Producer or Consumer after
// Close, and given to records that Close had to abandon.
var ErrClosed = errors.New("strata: closed")

// ErrDeliveryTimeout is given to a produced record that was not written
// within the producer's delivery timeout (WithDeliveryTimeout); the error
// also wraps the last failure seen.
var ErrDeliveryTimeout = errors.New("strata: delivery timeout")

// ErrCommitOutcomeUnknown is returned by a group member's commit
// (GroupConsumer.Commit, CommitOffsets, Close) when nobody can tell whether
// the commit was applied: an attempt got no answer (it timed out, or the
// connection broke, as when the controller is paused or dies), and neither
// it nor a retry was answered with success. A refusal of the retry
// (UNKNOWN_MEMBER from a new controller, say) does not undo an earlier
// attempt that may have been applied, so the error is this one and not the
// refusal, whose text it carries. The positions may or may not have been
// committed: a later commit of the same or newer positions settles it, and
// whoever resumes the partitions may read again what came after the
// previous commit (delivery is at least once). It also wraps the failure of
// the attempt that got no answer.
var ErrCommitOutcomeUnknown = errors.New("strata: commit outcome unknown")

func sentinel(code codes.Code, reason string, retriable bool) *Error {
	return &Error{Code: code, Reason: reason, Retriable: retriable,
		Message: strings.ToLower(strings.ReplaceAll(reason, "_", " "))}
}

// AsError finds the *Error in err's chain. A gRPC status error that was not
// converted yet (from code outside this package) is parsed on the fly.
func AsError(err error) (*Error, bool) {
	if err == nil {
		return nil, false
	}
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.OK {
		return fromStatus(st), true
	}
	return nil, false
}

// IsRetriable reports whether the call that returned err may succeed if
// made again: the broker said so, or the error is a transport failure
// (Unavailable, DeadlineExceeded) without details. Context cancellation and
// everything else are not retriable.
func IsRetriable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, ErrClosed) {
		return false
	}
	e, ok := AsError(err)
	return ok && e.Retriable
}

// toError converts a gRPC error into an *Error; other errors (context
// errors, ErrClosed, already converted ones) pass through unchanged.
func toError(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	if st.Code() == codes.OK {
		return nil
	}
	return fromStatus(st)
}

// fromStatus reads the strata ErrorInfo and RetryInfo details of a status.
func fromStatus(st *status.Status) *Error {
	e := &Error{Code: st.Code(), Message: st.Message()}
	found := false
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.GetDomain() != ErrorDomain || found {
				continue
			}
			found = true
			e.Reason = d.GetReason()
			e.Metadata = d.GetMetadata()
			e.Retriable = e.Metadata["retriable"] == "true"
		case *errdetails.RetryInfo:
			if d.GetRetryDelay() != nil {
				e.RetryAfter = d.GetRetryDelay().AsDuration()
			}
		}
	}
	if !found {
		// No details: the call died in transport (connection refused,
		// broker gone, deadline) and the same call may well work again.
		e.Retriable = e.Code == codes.Unavailable || e.Code == codes.DeadlineExceeded
	}
	return e
}

// newError builds a client-side *Error that behaves like the broker's.
func newError(code codes.Code, reason string, retriable bool, format string, args ...any) *Error {
	return &Error{Code: code, Reason: reason, Retriable: retriable, Message: fmt.Sprintf(format, args...)}
}

// configError is the *Error of an invalid option: reason INVALID_CONFIG
// with the key, the value and what is allowed, as the broker reports a bad
// topic setting.
func configError(key string, value any, allowed string) *Error {
	v := fmt.Sprint(value)
	return &Error{
		Code: codes.InvalidArgument, Reason: "INVALID_CONFIG",
		Message:  fmt.Sprintf("option %s = %s: want %s", key, v, allowed),
		Metadata: map[string]string{"key": key, "value": v, "allowed": allowed, "retriable": "false"},
	}
}

// opError names the operation that failed while keeping one "strata: "
// prefix however deep the wrapping goes.
type opError struct {
	op  string
	err error
}

func (e *opError) Error() string {
	return "strata: " + e.op + ": " + bare(e.err)
}

func (e *opError) Unwrap() error { return e.err }

// wrapOp converts err (see toError) and names the operation.
func wrapOp(op string, err error) error {
	if err == nil {
		return nil
	}
	return &opError{op: op, err: toError(err)}
}

// chainError is an error made of several: its text is composed once, with
// a single "strata: " prefix, and errors.Is and errors.As see every part.
type chainError struct {
	msg  string
	errs []error
}

func (e *chainError) Error() string   { return e.msg }
func (e *chainError) Unwrap() []error { return e.errs }

// bare is err's text without the package prefix, for composing.
func bare(err error) string { return strings.TrimPrefix(err.Error(), "strata: ") }

// withLast reports cause (a context error, ErrDeliveryTimeout) together with
// the last failure seen before it, if any.
func withLast(cause, last error, format string, args ...any) error {
	if cause == nil {
		return last
	}
	msg := "strata: " + bare(cause)
	if format != "" {
		msg += " " + fmt.Sprintf(format, args...)
	}
	if last == nil {
		return &chainError{msg: msg, errs: []error{cause}}
	}
	return &chainError{msg: msg + "; last error: " + bare(last), errs: []error{cause, last}}
}
