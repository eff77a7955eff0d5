package rpc

import (
	"strings"
	"testing"

	"github.com/strata-log/strata/broker"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// TestEveryReasonHasACode holds the reason table against the wire's own
// list: every ErrorReason of errors.proto has a status code here, and every
// reason here is one the proto defines, so a reason added on one side only
// fails.
func TestEveryReasonHasACode(t *testing.T) {
	for num, name := range stratav1.ErrorReason_name {
		if stratav1.ErrorReason(num) == stratav1.ErrorReason_ERROR_REASON_UNSPECIFIED {
			continue
		}
		if _, ok := codeOf[broker.Reason(strings.TrimPrefix(name, "ERROR_REASON_"))]; !ok {
			t.Errorf("%s has no status code in codeOf", name)
		}
	}
	for reason := range codeOf {
		if _, ok := stratav1.ErrorReason_value["ERROR_REASON_"+string(reason)]; !ok {
			t.Errorf("reason %s is not in errors.proto", reason)
		}
	}
}

// TestCodesCoverTheBrokersReasons holds the map to the broker's one table
// of reasons: every reason the broker may refuse with has a status code
// and a name in errors.proto, and the map holds no other.
func TestCodesCoverTheBrokersReasons(t *testing.T) {
	for _, r := range broker.Reasons() {
		if _, ok := codeOf[r]; !ok {
			t.Errorf("broker reason %s has no status code in codeOf", r)
		}
		if _, ok := stratav1.ErrorReason_value["ERROR_REASON_"+string(r)]; !ok {
			t.Errorf("broker reason %s is not in errors.proto", r)
		}
	}
	if len(codeOf) != len(broker.Reasons()) {
		t.Errorf("codeOf maps %d reasons, the broker has %d", len(codeOf), len(broker.Reasons()))
	}
}
