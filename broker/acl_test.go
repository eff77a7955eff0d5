package broker

import (
	"context"
	"fmt"
	"testing"

	"github.com/strata-log/strata/cluster"
)

// TestACLErrors: the cluster's refusals of ACL changes become the reasons
// the API sends: a bad ACL or too many is INVALID_REQUEST, the wrong
// broker is UNAVAILABLE naming the controller (which the API forwards to).
func TestACLErrors(t *testing.T) {
	for _, tc := range []struct {
		err    error
		reason Reason
		meta   map[string]string
	}{
		{fmt.Errorf("%w: \"x\": bad", cluster.ErrInvalidACL), ReasonInvalidRequest, nil},
		{fmt.Errorf("%w: 10001", cluster.ErrTooManyACLs), ReasonInvalidRequest, map[string]string{"limit": "10000"}},
		{&cluster.NotControllerError{ControllerID: 3, Addr: "10.0.0.3:7400"}, ReasonUnavailable, map[string]string{"controller_id": "3", "controller_address": "10.0.0.3:7400"}},
		{fmt.Errorf("%w: stopped waiting: %w", cluster.ErrOutcomeUnknown, context.DeadlineExceeded), ReasonTimeout, nil},
	} {
		err := aclError(tc.err)
		e, ok := err.(*Error)
		if !ok || e.Reason != tc.reason {
			t.Errorf("%v: got %v, want reason %s", tc.err, err, tc.reason)
			continue
		}
		for k, v := range tc.meta {
			if e.Meta[k] != v {
				t.Errorf("%v: meta %s = %q, want %q", tc.err, k, e.Meta[k], v)
			}
		}
	}
	if err := checkACLs(nil); ReasonOf(err) != ReasonInvalidRequest {
		t.Errorf("no ACLs: %v", err)
	}
}
