package kafka

// Errors: the one map from the broker's reasons (broker.Reasons) to Kafka
// error codes (franz-go's kerr, which mirrors Kafka's list). A test holds
// it to every broker reason. Where Kafka's code and the reason disagree on
// whether a retry can help, the exceptions are listed in the test with why.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/broker"
)

var codes = map[broker.Reason]*kerr.Error{
	broker.ReasonTopicNotFound:                kerr.UnknownTopicOrPartition,
	broker.ReasonPartitionNotFound:            kerr.UnknownTopicOrPartition,
	broker.ReasonNotLeader:                    kerr.NotLeaderForPartition,
	broker.ReasonOffsetOutOfRange:             kerr.OffsetOutOfRange,
	broker.ReasonRecordTooLarge:               kerr.MessageTooLarge,
	broker.ReasonCorruptBatch:                 kerr.CorruptMessage,
	broker.ReasonInvalidConfig:                kerr.InvalidConfig,
	broker.ReasonNotEnoughReplicas:            kerr.NotEnoughReplicas,
	broker.ReasonThrottled:                    kerr.ThrottlingQuotaExceeded,
	broker.ReasonTopicAlreadyExists:           kerr.TopicAlreadyExists,
	broker.ReasonInvalidTopicName:             kerr.InvalidTopicException,
	broker.ReasonInvalidRequest:               kerr.InvalidRequest,
	broker.ReasonTimeout:                      kerr.RequestTimedOut,
	broker.ReasonStorageError:                 kerr.KafkaStorageError,
	broker.ReasonUnavailable:                  kerr.BrokerNotAvailable,
	broker.ReasonFencedEpoch:                  kerr.FencedLeaderEpoch,
	broker.ReasonLeaderNotAvailable:           kerr.LeaderNotAvailable,
	broker.ReasonCorruptData:                  kerr.UnknownServerError,
	broker.ReasonOutOfOrderSequence:           kerr.OutOfOrderSequenceNumber,
	broker.ReasonInvalidProducerEpoch:         kerr.InvalidProducerEpoch,
	broker.ReasonUnknownProducerID:            kerr.UnknownProducerID,
	broker.ReasonNotEnoughReplicasAfterAppend: kerr.NotEnoughReplicasAfterAppend,
	broker.ReasonUnauthenticated:              kerr.SaslAuthenticationFailed,
	broker.ReasonPermissionDenied:             kerr.TopicAuthorizationFailed,
	broker.ReasonReadReplica:                  kerr.PolicyViolation,
	broker.ReasonGroupNotFound:                kerr.GroupIDNotFound,
	broker.ReasonUnknownMember:                kerr.UnknownMemberID,
	broker.ReasonFencedMember:                 kerr.FencedMemberEpoch,
	broker.ReasonGroupNotEmpty:                kerr.NonEmptyGroup,
	broker.ReasonInvalidTimestamp:             kerr.InvalidTimestamp,
	broker.ReasonInvalidRecord:                kerr.InvalidRecord,
	broker.ReasonTransactionsNotSupported:     kerr.InvalidTxnState,
	broker.ReasonStorageFull:                  kerr.KafkaStorageError,
	broker.ReasonRebalanceInProgress:          kerr.RebalanceInProgress,
	broker.ReasonIllegalGeneration:            kerr.IllegalGeneration,
	broker.ReasonInconsistentGroupProtocol:    kerr.InconsistentGroupProtocol,
}

// causes are errors the broker wraps under a reason that Kafka tells
// apart by a code of its own; each is checked before the reason, and its
// code is as retriable as the reason it comes under (TestErrorTable).
var causes = []struct {
	err    error
	reason broker.Reason
	code   *kerr.Error
}{
	{broker.ErrUnknownLeaderEpoch, broker.ReasonLeaderNotAvailable, kerr.UnknownLeaderEpoch},
}

// codeOf is the Kafka error code for err: its reason's, REQUEST_TIMED_OUT
// for a request that ran out of time here, UNKNOWN_SERVER_ERROR for
// anything else. nil is 0.
func codeOf(err error) int16 {
	return kerrOf(err).Code
}

var noError = &kerr.Error{Message: "NONE"}

func kerrOf(err error) *kerr.Error {
	if err == nil {
		return noError
	}
	for _, c := range causes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	if e, ok := codes[broker.ReasonOf(err)]; ok {
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return kerr.RequestTimedOut
	}
	return kerr.UnknownServerError
}

// messageOf is err's message for the responses that carry one, nil for
// none.
func messageOf(err error) *string {
	if err == nil {
		return nil
	}
	m := err.Error()
	return &m
}

func asBrokerError(err error, e **broker.Error) bool { return errors.As(err, e) }

// offsetCommitCode is OffsetCommit's code for err. A refused commit names
// the same refusals differently from the table: a member that lost a
// partition (FENCED_MEMBER) is STALE_MEMBER_EPOCH from v9, the versions
// KIP-848 members commit with, and ILLEGAL_GENERATION before (the classic
// protocol's name); a commit from outside a group with members
// (GROUP_NOT_EMPTY) is UNKNOWN_MEMBER_ID, as Kafka answers it.
func offsetCommitCode(version int16, err error) *kerr.Error {
	switch broker.ReasonOf(err) {
	case broker.ReasonFencedMember:
		if version >= 9 {
			return kerr.StaleMemberEpoch
		}
		return kerr.IllegalGeneration
	case broker.ReasonGroupNotEmpty:
		return kerr.UnknownMemberID
	}
	return kerrOf(err)
}

// heartbeatCode is ConsumerGroupHeartbeat's and JoinGroup's code for
// err: a join refused because the group is full is INVALID_REQUEST to the
// broker, with the limit named in its detail, and GROUP_MAX_SIZE_REACHED
// to Kafka clients.
func heartbeatCode(err error) *kerr.Error {
	var be *broker.Error
	if asBrokerError(err, &be) && be.Reason == broker.ReasonInvalidRequest && be.Meta["limit_reached"] == broker.LimitGroupMembers {
		return kerr.GroupMaxSizeReached
	}
	return kerrOf(err)
}
