package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/broker"
)

// TestErrorTable holds codes to the broker's reasons and to Kafka's list:
// every reason has a code, every code is Kafka's, and a client retries
// exactly the reasons the broker calls retriable, but for the exceptions
// below, each with why.
func TestErrorTable(t *testing.T) {
	exceptions := map[broker.Reason]string{
		// Kafka clients retry FENCED_LEADER_EPOCH after refreshing metadata,
		// which is a new request; resent unchanged it is refused again.
		broker.ReasonFencedEpoch: "retried by Kafka clients after a metadata refresh",
		// Kafka clients do not resend a batch refused for a sequence gap
		// as it is; they handle the code themselves (resending the earlier
		// batches, or resetting the producer), which is what the broker's
		// "retriable" promises.
		broker.ReasonOutOfOrderSequence: "handled by Kafka clients' own idempotence logic",
		// Kafka retries UNKNOWN_TOPIC_OR_PARTITION (the topic may be being
		// created); the broker does not, and the outcome is the same.
		broker.ReasonTopicNotFound:     "Kafka retries a topic that may yet appear",
		broker.ReasonPartitionNotFound: "Kafka retries a topic that may yet appear",
		// CORRUPT_MESSAGE is retriable in Kafka (a bit flipped on the
		// wire); a batch the broker finds corrupt is refused again if
		// resent as it is, and a client that retries finds that out.
		broker.ReasonCorruptBatch: "Kafka retries CORRUPT_MESSAGE",
	}
	for _, r := range broker.Reasons() {
		e, ok := codes[r]
		if !ok {
			t.Errorf("reason %s has no Kafka error code", r)
			continue
		}
		if kerr.ErrorForCode(e.Code) != e {
			t.Errorf("reason %s maps to %v, not Kafka's code %d", r, e, e.Code)
		}
		if _, ok := exceptions[r]; !ok && e.Retriable != r.Retriable() {
			t.Errorf("reason %s (retriable %v) maps to %s (retriable %v)", r, r.Retriable(), e.Message, e.Retriable)
		}
	}
	if len(codes) != len(broker.Reasons()) {
		t.Errorf("codes maps %d reasons, the broker has %d", len(codes), len(broker.Reasons()))
	}
}

// A full group is INVALID_REQUEST to the broker with the limit in its
// detail, and Kafka's GROUP_MAX_SIZE_REACHED to a heartbeat; a group's
// thousand members joining within one session is too slow to make for
// real here (group.TestJoinFullGroup makes one). OffsetCommit names a
// lost partition for each kind of member.
func TestErrorRefinements(t *testing.T) {
	full := &broker.Error{Reason: broker.ReasonInvalidRequest, Meta: map[string]string{"limit_reached": broker.LimitGroupMembers}}
	if got := heartbeatCode(full); got != kerr.GroupMaxSizeReached {
		t.Errorf("full group: %v", got)
	}
	if got := heartbeatCode(&broker.Error{Reason: broker.ReasonInvalidRequest}); got != kerr.InvalidRequest {
		t.Errorf("invalid heartbeat: %v", got)
	}
	fenced := &broker.Error{Reason: broker.ReasonFencedMember}
	if offsetCommitCode(9, fenced) != kerr.StaleMemberEpoch || offsetCommitCode(8, fenced) != kerr.IllegalGeneration {
		t.Error("a lost partition's commit is not STALE_MEMBER_EPOCH (v9+) and ILLEGAL_GENERATION (v8)")
	}
	if offsetCommitCode(9, &broker.Error{Reason: broker.ReasonGroupNotEmpty}) != kerr.UnknownMemberID {
		t.Error("a commit from outside a group with members is not UNKNOWN_MEMBER_ID")
	}
}
