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
