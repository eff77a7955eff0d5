package cluster

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestClassicMemberState: a classic member's protocol is written, carried
// by snapshots and checked; a state written before classic members
// existed (no "classic" field) reads as heartbeat members, and one with a
// classic member that breaks a rule is refused and changes nothing.
func TestClassicMemberState(t *testing.T) {
	h := newFSMHarness(t)
	plain := membership()
	h.ok(&saveGroupCmd{Term: 1, Group: "plain", Membership: plain})
	if js := string(snapshotBytes(t, h.f)); strings.Contains(js, `"classic"`) {
		t.Fatalf("a state without classic members writes the field: %s", js)
	}
	classic := membership()
	classic.Members[0].Classic = &GroupClassicMember{Protocols: []string{"range", "roundrobin"}, Protocol: "range", Version: 3}
	h.ok(&saveGroupCmd{Term: 1, Group: "classic", Membership: classic})
	mustEqual(t, "classic", h.f.memberships.all()["classic"], classic)
	mustEqual(t, "plain", h.f.memberships.all()["plain"], plain)

	dst := newFSMHarness(t)
	if err := dst.f.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, h.f)))); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "classic restored", dst.f.memberships.all()["classic"], classic)
	if dst.f.memberships.all()["plain"].Members[0].Classic != nil {
		t.Fatal("a heartbeat member restored as a classic one")
	}

	before := h.stateJSON()
	for what, c := range map[string]*GroupClassicMember{
		"no protocols":         {Protocol: "range"},
		"protocol not offered": {Protocols: []string{"range"}, Protocol: "sticky"},
		"no protocol":          {Protocols: []string{"range"}},
		"negative version":     {Protocols: []string{"range"}, Protocol: "range", Version: -1},
		"long protocol name":   {Protocols: []string{strings.Repeat("p", MaxGroupStringLen+1)}, Protocol: strings.Repeat("p", MaxGroupStringLen+1)},
		"too many protocols":   {Protocols: strings.Split(strings.Repeat("p,", MaxGroupClassicProtocols)+"p", ","), Protocol: "p"},
	} {
		m := membership()
		m.Members[1].Classic = c
		if err := h.refused(&saveGroupCmd{Term: 1, Group: "classic", Membership: m}, ErrInvalidGroupState); err == nil {
			t.Fatalf("%s: accepted", what)
		}
		if !bytes.Equal(h.stateJSON(), before) {
			t.Fatalf("%s: the refused command changed the state", what)
		}
	}
}
