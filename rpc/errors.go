package rpc

import (
	"context"
	"errors"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/strata-log/strata/broker"
)

// ErrorDomain is the domain of every ErrorInfo Strata sends.
const ErrorDomain = "strata.dev"

// codeOf is the gRPC status code for each of the broker's reasons
// (broker.Reasons; whether one is retriable is the broker's to say, and
// toStatus sends it); see errors.proto. Mapping them is all rpc knows of
// reasons.
var codeOf = map[broker.Reason]codes.Code{
	broker.ReasonTopicNotFound:      codes.NotFound,
	broker.ReasonPartitionNotFound:  codes.NotFound,
	broker.ReasonNotLeader:          codes.FailedPrecondition,
	broker.ReasonOffsetOutOfRange:   codes.OutOfRange,
	broker.ReasonRecordTooLarge:     codes.InvalidArgument,
	broker.ReasonCorruptBatch:       codes.InvalidArgument,
	broker.ReasonInvalidConfig:      codes.InvalidArgument,
	broker.ReasonNotEnoughReplicas:  codes.Unavailable,
	broker.ReasonThrottled:          codes.ResourceExhausted,
	broker.ReasonTopicAlreadyExists: codes.AlreadyExists,
	broker.ReasonInvalidTopicName:   codes.InvalidArgument,
	broker.ReasonInvalidRequest:     codes.InvalidArgument,
	broker.ReasonTimeout:            codes.DeadlineExceeded,
	broker.ReasonStorageError:       codes.Unavailable,
	broker.ReasonUnavailable:        codes.Unavailable,
	broker.ReasonFencedEpoch:        codes.FailedPrecondition,
	broker.ReasonLeaderNotAvailable: codes.Unavailable,
	broker.ReasonCorruptData:        codes.DataLoss,
	// Like NOT_LEADER: the request is sound, the partition's state does not
	// allow it now.
	broker.ReasonOutOfOrderSequence:   codes.FailedPrecondition,
	broker.ReasonInvalidProducerEpoch: codes.FailedPrecondition,
	broker.ReasonUnknownProducerID:    codes.FailedPrecondition,

	broker.ReasonNotEnoughReplicasAfterAppend: codes.Unavailable,

	broker.ReasonUnauthenticated:  codes.Unauthenticated,
	broker.ReasonPermissionDenied: codes.PermissionDenied,

	broker.ReasonReadReplica: codes.FailedPrecondition,

	broker.ReasonGroupNotFound: codes.NotFound,
	broker.ReasonUnknownMember: codes.FailedPrecondition,
	broker.ReasonFencedMember:  codes.FailedPrecondition,
	broker.ReasonGroupNotEmpty: codes.FailedPrecondition,

	broker.ReasonInvalidTimestamp: codes.InvalidArgument,
	broker.ReasonInvalidRecord:    codes.InvalidArgument,
	// What the gRPC codes call an operation "not supported or not
	// enabled in this service".
	broker.ReasonTransactionsNotSupported: codes.Unimplemented,
	// Like THROTTLED: a resource runs short, and the call may be retried.
	broker.ReasonStorageFull: codes.ResourceExhausted,
	// Kafka's classic group protocol only.
	broker.ReasonRebalanceInProgress:       codes.FailedPrecondition,
	broker.ReasonIllegalGeneration:         codes.FailedPrecondition,
	broker.ReasonInconsistentGroupProtocol: codes.FailedPrecondition,
}

// toStatus turns an error from the broker into a gRPC status carrying an
// ErrorInfo (reason, domain, metadata with "retriable") and, when the broker
// asks the client to back off, a RetryInfo.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err // a status already, such as a refusal from the auth layer
	}
	var be *broker.Error
	if !errors.As(err, &be) {
		switch {
		case errors.Is(err, context.Canceled):
			return status.Error(codes.Canceled, err.Error())
		case errors.Is(err, context.DeadlineExceeded):
			return status.Error(codes.DeadlineExceeded, err.Error())
		}
		return status.Error(codes.Internal, err.Error())
	}
	code, ok := codeOf[be.Reason]
	if !ok {
		code = codes.Internal
	}
	meta := map[string]string{"retriable": strconv.FormatBool(be.Retriable())}
	for k, v := range be.Meta {
		meta[k] = v
	}
	st := status.New(code, be.Error())
	info := &errdetails.ErrorInfo{Reason: string(be.Reason), Domain: ErrorDomain, Metadata: meta}
	var withDetails *status.Status
	if be.RetryAfter > 0 {
		withDetails, err = st.WithDetails(info, &errdetails.RetryInfo{RetryDelay: durationpb.New(be.RetryAfter)})
	} else {
		withDetails, err = st.WithDetails(info)
	}
	if err != nil {
		return st.Err() // cannot happen for these well-formed messages
	}
	return withDetails.Err()
}

// invalid is the status for a malformed request.
func invalid(format string, args ...any) error {
	return toStatus(broker.InvalidRequest(format, args...))
}
