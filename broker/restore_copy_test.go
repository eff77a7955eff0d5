package broker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/strata-log/strata/tiering"
)

// TestRestoreCopyCut: what a restore request asks for, and the cuts that
// cannot be, refused as INVALID_REQUEST before anything else is checked.
func TestRestoreCopyCut(t *testing.T) {
	at := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		name   string
		rc     RestoreCopy
		copies bool
		cut    tiering.RestoreCut
		err    string
	}{
		{"the topic back", RestoreCopy{}, false, tiering.RestoreCut{ToOffset: tiering.NoCut, ToTime: tiering.NoCut}, ""},
		{"a new name", RestoreCopy{As: "b"}, true, tiering.RestoreCut{ToOffset: tiering.NoCut, ToTime: tiering.NoCut}, ""},
		{"to an offset", RestoreCopy{ToOffset: at(0)}, true, tiering.RestoreCut{ToOffset: 0, ToTime: tiering.NoCut}, ""},
		{"to a time", RestoreCopy{ToTime: at(1700000000000)}, true, tiering.RestoreCut{ToOffset: tiering.NoCut, ToTime: 1700000000000}, ""},
		{"both", RestoreCopy{ToOffset: at(5), ToTime: at(5)}, true, tiering.RestoreCut{}, "not both"},
		{"a time before 1970", RestoreCopy{ToTime: at(-1)}, true, tiering.RestoreCut{}, "restore to time -1: a time before 1970"},
		{"a negative offset", RestoreCopy{As: "b", ToOffset: at(-1)}, true, tiering.RestoreCut{}, "restore to offset -1: an offset is 0 or more"},
	} {
		if got := tc.rc.Copies(); got != tc.copies {
			t.Errorf("%s: Copies() = %v", tc.name, got)
		}
		cut, err := restoreCut(tc.rc)
		switch {
		case tc.err == "" && (err != nil || cut != tc.cut):
			t.Errorf("%s: cut %+v, %v; want %+v", tc.name, cut, err, tc.cut)
		case tc.err != "" && (ReasonOf(err) != ReasonInvalidRequest || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want INVALID_REQUEST saying %q", tc.name, err, tc.err)
		}
	}
	// Refused before the broker looks at anything: a zero Broker, with no
	// object store, would refuse for that at any later check.
	var b Broker
	if _, err := b.RestoreTopicCopy(t.Context(), "a", "", 1, RestoreCopy{ToTime: at(-5)}); !strings.Contains(fmt.Sprint(err), "restore to time -5") {
		t.Fatalf("RestoreTopicCopy with a bad cut: %v", err)
	}
}
