package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// sentinels maps every ErrorReason of errors.proto to its sentinel and the
// code the contract gives it.
var sentinels = map[stratav1.ErrorReason]struct {
	err       *Error
	code      codes.Code
	retriable bool
}{
	stratav1.ErrorReason_ERROR_REASON_TOPIC_NOT_FOUND:        {ErrTopicNotFound, codes.NotFound, false},
	stratav1.ErrorReason_ERROR_REASON_PARTITION_NOT_FOUND:    {ErrPartitionNotFound, codes.NotFound, false},
	stratav1.ErrorReason_ERROR_REASON_NOT_LEADER:             {ErrNotLeader, codes.FailedPrecondition, true},
	stratav1.ErrorReason_ERROR_REASON_OFFSET_OUT_OF_RANGE:    {ErrOffsetOutOfRange, codes.OutOfRange, false},
	stratav1.ErrorReason_ERROR_REASON_RECORD_TOO_LARGE:       {ErrRecordTooLarge, codes.InvalidArgument, false},
	stratav1.ErrorReason_ERROR_REASON_CORRUPT_BATCH:          {ErrCorruptBatch, codes.InvalidArgument, false},
	stratav1.ErrorReason_ERROR_REASON_INVALID_CONFIG:         {ErrInvalidConfig, codes.InvalidArgument, false},
	stratav1.ErrorReason_ERROR_REASON_NOT_ENOUGH_REPLICAS:    {ErrNotEnoughReplicas, codes.Unavailable, true},
	stratav1.ErrorReason_ERROR_REASON_THROTTLED:              {ErrThrottled, codes.ResourceExhausted, true},
	stratav1.ErrorReason_ERROR_REASON_TOPIC_ALREADY_EXISTS:   {ErrTopicAlreadyExists, codes.AlreadyExists, false},
	stratav1.ErrorReason_ERROR_REASON_INVALID_TOPIC_NAME:     {ErrInvalidTopicName, codes.InvalidArgument, false},
	stratav1.ErrorReason_ERROR_REASON_INVALID_REQUEST:        {ErrInvalidRequest, codes.InvalidArgument, false},
	stratav1.ErrorReason_ERROR_REASON_TIMEOUT:                {ErrTimeout, codes.DeadlineExceeded, true},
	stratav1.ErrorReason_ERROR_REASON_STORAGE_ERROR:          {ErrStorage, codes.Unavailable, true},
	stratav1.ErrorReason_ERROR_REASON_UNAVAILABLE:            {ErrUnavailable, codes.Unavailable, true},
	stratav1.ErrorReason_ERROR_REASON_FENCED_EPOCH:           {ErrFencedEpoch, codes.FailedPrecondition, false},
	stratav1.ErrorReason_ERROR_REASON_LEADER_NOT_AVAILABLE:   {ErrLeaderNotAvailable, codes.Unavailable, true},
	stratav1.ErrorReason_ERROR_REASON_CORRUPT_DATA:           {ErrCorruptData, codes.DataLoss, false},
	stratav1.ErrorReason_ERROR_REASON_OUT_OF_ORDER_SEQUENCE:  {ErrOutOfOrderSequence, codes.FailedPrecondition, true},
	stratav1.ErrorReason_ERROR_REASON_INVALID_PRODUCER_EPOCH: {ErrInvalidProducerEpoch, codes.FailedPrecondition, false},
	stratav1.ErrorReason_ERROR_REASON_UNKNOWN_PRODUCER_ID:    {ErrUnknownProducerID, codes.FailedPrecondition, false},

	stratav1.ErrorReason_ERROR_REASON_NOT_ENOUGH_REPLICAS_AFTER_APPEND: {ErrNotEnoughReplicasAfterAppend, codes.Unavailable, true},
	stratav1.ErrorReason_ERROR_REASON_UNAUTHENTICATED:                  {ErrUnauthenticated, codes.Unauthenticated, false},
	stratav1.ErrorReason_ERROR_REASON_PERMISSION_DENIED:                {ErrPermissionDenied, codes.PermissionDenied, false},
	stratav1.ErrorReason_ERROR_REASON_READ_REPLICA:                     {ErrReadReplica, codes.FailedPrecondition, false},
	stratav1.ErrorReason_ERROR_REASON_GROUP_NOT_FOUND:                  {ErrGroupNotFound, codes.NotFound, false},
	stratav1.ErrorReason_ERROR_REASON_UNKNOWN_MEMBER:                   {ErrUnknownMember, codes.FailedPrecondition, false},
	stratav1.ErrorReason_ERROR_REASON_FENCED_MEMBER:                    {ErrFencedMember, codes.FailedPrecondition, false},
	stratav1.ErrorReason_ERROR_REASON_GROUP_NOT_EMPTY:                  {ErrGroupNotEmpty, codes.FailedPrecondition, false},
	stratav1.ErrorReason_ERROR_REASON_INVALID_TIMESTAMP:                {ErrInvalidTimestamp, codes.InvalidArgument, false},
	stratav1.ErrorReason_ERROR_REASON_INVALID_RECORD:                   {ErrInvalidRecord, codes.InvalidArgument, false},
	stratav1.ErrorReason_ERROR_REASON_TRANSACTIONS_NOT_SUPPORTED:       {ErrTransactionsNotSupported, codes.Unimplemented, false},
	stratav1.ErrorReason_ERROR_REASON_STORAGE_FULL:                     {ErrStorageFull, codes.ResourceExhausted, true},
	stratav1.ErrorReason_ERROR_REASON_REBALANCE_IN_PROGRESS:            {ErrRebalanceInProgress, codes.FailedPrecondition, false},
	stratav1.ErrorReason_ERROR_REASON_ILLEGAL_GENERATION:               {ErrIllegalGeneration, codes.FailedPrecondition, false},
	stratav1.ErrorReason_ERROR_REASON_INCONSISTENT_GROUP_PROTOCOL:      {ErrInconsistentGroupProtocol, codes.FailedPrecondition, false},
}

// brokerError builds the status error a broker sends, as the contract
// describes it.
func brokerError(t *testing.T, code codes.Code, reason string, retriable bool, md map[string]string, extra ...*errdetails.RetryInfo) error {
	t.Helper()
	meta := map[string]string{"retriable": fmt.Sprint(retriable)}
	for k, v := range md {
		meta[k] = v
	}
	st := status.New(code, "broker says "+strings.ToLower(reason))
	var err error
	if len(extra) > 0 {
		st, err = st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: meta}, extra[0])
	} else {
		st, err = st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: meta})
	}
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

func TestEveryReasonHasASentinel(t *testing.T) {
	for num, name := range stratav1.ErrorReason_name {
		reason := stratav1.ErrorReason(num)
		if reason == stratav1.ErrorReason_ERROR_REASON_UNSPECIFIED {
			continue
		}
		want, ok := sentinels[reason]
		if !ok {
			t.Errorf("%s has no sentinel in the test table: add one to errors.go and here", name)
			continue
		}
		short := strings.TrimPrefix(name, "ERROR_REASON_")
		if want.err.Reason != short {
			t.Errorf("sentinel for %s has reason %q", name, want.err.Reason)
		}
	}
}

func TestErrorFromStatusMatchesSentinel(t *testing.T) {
	for reason, want := range sentinels {
		short := strings.TrimPrefix(reason.String(), "ERROR_REASON_")
		t.Run(short, func(t *testing.T) {
			raw := brokerError(t, want.code, short, want.retriable, nil)
			for _, err := range []error{toError(raw), wrapOp("some call", raw), raw} {
				if !errors.Is(err, want.err) && err != raw {
					t.Errorf("errors.Is(%v, %s) = false", err, short)
				}
				for other, o := range sentinels {
					if other != reason && errors.Is(err, o.err) {
						t.Errorf("%v also matches %s", err, o.err.Reason)
					}
				}
				e, ok := AsError(err)
				if !ok {
					t.Fatalf("AsError(%v) found nothing", err)
				}
				if e.Reason != short || e.Code != want.code || e.Retriable != want.retriable {
					t.Errorf("got reason %q code %s retriable %v, want %q %s %v", e.Reason, e.Code, e.Retriable, short, want.code, want.retriable)
				}
				if e.Message != "broker says "+strings.ToLower(short) {
					t.Errorf("message %q", e.Message)
				}
				if IsRetriable(err) != want.retriable {
					t.Errorf("IsRetriable = %v, want %v", IsRetriable(err), want.retriable)
				}
			}
			if err := wrapOp("some call", raw); !strings.HasPrefix(err.Error(), "strata: some call: "+short) || strings.Count(err.Error(), "strata: ") != 1 {
				t.Errorf("wrapped text %q", err.Error())
			}
		})
	}
}

// The retriable flag comes from the broker's metadata, not from the
// reason: the same reason can be sent either way.
func TestRetriableFollowsMetadata(t *testing.T) {
	err := toError(brokerError(t, codes.NotFound, "TOPIC_NOT_FOUND", true, nil))
	if !IsRetriable(err) {
		t.Error("retriable=true in metadata, IsRetriable false")
	}
	err = toError(brokerError(t, codes.Unavailable, "UNAVAILABLE", false, nil))
	if IsRetriable(err) {
		t.Error("retriable=false in metadata, IsRetriable true")
	}
}

func TestThrottledRetryAfter(t *testing.T) {
	raw := brokerError(t, codes.ResourceExhausted, "THROTTLED", true, nil,
		&errdetails.RetryInfo{RetryDelay: durationpb.New(1500 * time.Millisecond)})
	err := wrapOp("produce to t/0", raw)
	e, ok := AsError(err)
	if !ok || !errors.Is(err, ErrThrottled) {
		t.Fatalf("%v: not THROTTLED", err)
	}
	if e.RetryAfter != 1500*time.Millisecond {
		t.Errorf("RetryAfter = %s", e.RetryAfter)
	}
	if retryAfter(err) != 1500*time.Millisecond {
		t.Errorf("retryAfter = %s", retryAfter(err))
	}
	// The backoff honours it as a floor.
	if d := defaultBackoff.delay(0, e.RetryAfter); d != 1500*time.Millisecond {
		t.Errorf("delay = %s", d)
	}
}

func TestNotLeaderMetadata(t *testing.T) {
	raw := brokerError(t, codes.FailedPrecondition, "NOT_LEADER", true,
		map[string]string{"leader_id": "3", "leader_address": "10.0.0.3:7400"})
	e, _ := AsError(raw)
	if e.Metadata["leader_id"] != "3" || e.Metadata["leader_address"] != "10.0.0.3:7400" {
		t.Errorf("metadata %v", e.Metadata)
	}
}

func TestTransportErrors(t *testing.T) {
	cases := []struct {
		err       error
		retriable bool
	}{
		{status.Error(codes.Unavailable, "connection refused"), true},
		{status.Error(codes.DeadlineExceeded, "deadline"), true},
		{status.Error(codes.InvalidArgument, "no details"), false},
		{status.Error(codes.Internal, "boom"), false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
		{errors.New("plain"), false},
		{ErrClosed, false},
		{nil, false},
	}
	for _, c := range cases {
		if got := IsRetriable(c.err); got != c.retriable {
			t.Errorf("IsRetriable(%v) = %v, want %v", c.err, got, c.retriable)
		}
	}
	e, ok := AsError(status.Error(codes.Unavailable, "connection refused"))
	if !ok || e.Reason != "" || e.Code != codes.Unavailable {
		t.Fatalf("AsError = %+v, %v", e, ok)
	}
	// No reason: matches no sentinel.
	for _, s := range sentinels {
		if errors.Is(e, s.err) {
			t.Errorf("transport error matches %s", s.err.Reason)
		}
	}
	if got := e.Error(); got != "strata: Unavailable: connection refused" {
		t.Errorf("Error() = %q", got)
	}
}

// Details from another domain are not Strata's reasons.
func TestForeignDomainIgnored(t *testing.T) {
	st, err := status.New(codes.NotFound, "x").WithDetails(&errdetails.ErrorInfo{Reason: "TOPIC_NOT_FOUND", Domain: "example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if errors.Is(toError(st.Err()), ErrTopicNotFound) {
		t.Error("foreign ErrorInfo matched a sentinel")
	}
}

func TestErrorText(t *testing.T) {
	e := toError(brokerError(t, codes.OutOfRange, "OFFSET_OUT_OF_RANGE", false, nil))
	if got, want := e.Error(), "strata: OFFSET_OUT_OF_RANGE: broker says offset_out_of_range (OutOfRange)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	// A context error reported with the last broker error keeps both
	// reachable and one prefix.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := wrapOp("list offsets", ctxError(ctx, e))
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("%v: lost a cause", err)
	}
	if strings.Count(err.Error(), "strata: ") != 1 || !strings.HasPrefix(err.Error(), "strata: list offsets: context canceled; last error: OFFSET_OUT_OF_RANGE") {
		t.Errorf("text %q", err.Error())
	}
	if IsRetriable(err) {
		t.Error("a cancelled call is not retriable")
	}
}

func TestConfigErrorIsInvalidConfig(t *testing.T) {
	err := configError("WithLinger", "-1s", "a duration >= 0")
	if !errors.Is(err, ErrInvalidConfig) {
		t.Error("config error is not ErrInvalidConfig")
	}
	if err.Metadata["key"] != "WithLinger" || err.Metadata["value"] != "-1s" || err.Metadata["allowed"] == "" {
		t.Errorf("metadata %v", err.Metadata)
	}
}
