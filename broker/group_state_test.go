package broker

import (
	"reflect"
	"testing"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/group"
)

// TestGroupStateRoundTrip: a group's state, classic members included,
// comes back from its Raft form as it went in, so a new controller
// resumes classic members with their protocol.
func TestGroupStateRoundTrip(t *testing.T) {
	tp := func(p int32) group.TopicPartition { return group.TopicPartition{Topic: "t", Partition: p} }
	s := group.State{Assignor: "sticky", Epoch: 5, Counts: map[string]int32{"t": 3}, Members: []group.MemberState{
		{ID: "a", ClientID: "kgo", Host: "/127.0.0.1", Topics: []string{"t"}, SessionTimeout: 3 * time.Second,
			RebalanceTimeout: 20 * time.Second, Epoch: 2, Target: []group.TopicPartition{tp(0), tp(1)},
			Granted: map[group.TopicPartition]int32{tp(0): 1, tp(1): 2}, Sent: []group.TopicPartition{tp(0), tp(1)},
			Classic: &group.Classic{Protocols: []string{"cooperative-sticky"}, Protocol: "cooperative-sticky", Version: 3}},
		{ID: "b", Topics: []string{"t"}, SessionTimeout: 10 * time.Second, RebalanceTimeout: time.Minute, Epoch: 1,
			Target: []group.TopicPartition{tp(2)}, Granted: map[group.TopicPartition]int32{tp(2): 1}, Sent: []group.TopicPartition{tp(2)}},
	}}
	back := groupStates(map[string]*cluster.GroupMembership{"g": membershipOf(&s)})["g"]
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, s)
	}
}
