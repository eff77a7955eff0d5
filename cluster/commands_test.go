package cluster

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestCommandRoundTrip encodes every command type and decodes it back.
func TestCommandRoundTrip(t *testing.T) {
	m := emptyMetadata()
	m.Brokers[1] = broker(1)
	m.Brokers[2] = broker(2)
	for _, c := range []command{
		&registerBrokerCmd{Broker: broker(7)},
		createCmd(m, "orders", 3, 2, map[string]string{"retention.ms": "-1"}),
		&deleteTopicCmd{Name: "orders", ID: newTopicID()},
		&alterTopicConfigCmd{Name: "orders", Set: map[string]string{"a": "1"}, Delete: []string{"b"}},
		&commitOffsetsCmd{Group: "g", CommittedAtMs: 42, Commits: []offsetCommitEntry{{Topic: "orders", Partition: 1, Offset: 9, Metadata: "m"}}},
		&changeLeaderCmd{Topic: "orders", Partition: 2, NewLeader: NoLeader, ExpectedEpoch: 4},
		&changeISRCmd{Topic: "orders", Partition: 2, ISR: []int32{2, 1}, LeaderEpoch: 4, PartitionEpoch: 9},
		&allocateProducerIDCmd{},
		&reserveProducerIDsCmd{Above: 70000},
		addACLs(aclAliceReads, aclBobWrites, aclOpsAdmin),
		removeACLs(aclAnyGroups),
	} {
		data, err := encodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		var envelope map[string]any
		if err := json.Unmarshal(data, &envelope); err != nil {
			t.Fatal(err)
		}
		if envelope["type"] != c.typ() || envelope["v"] != float64(versionOf(c.typ())) {
			t.Fatalf("%s: envelope %v", data, envelope)
		}
		got, err := decodeCommand(data)
		if err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got, c)
		}
	}
}

func TestDecodeCommandErrors(t *testing.T) {
	for raw, want := range map[string]string{
		`{"type":"nope","v":1}`:                           `unknown command type "nope" version 1`,
		`{"type":"deleteTopic","v":9}`:                    `unknown command type "deleteTopic" version 9`,
		`{"type":"deleteTopic","v":1,"nmae":"x"}`:         `unknown field "nmae"`,
		`{"type":"deleteTopic","v":1,"name":"x"}{}`:       `after top-level value`,
		`{"type":"changeISR","v":1,"isr":"all"}`:          `cannot unmarshal`,
		`{"type":"changeLeader","v":1,"partition":1e100}`: `cannot unmarshal`,
		`{"type":"allocateProducerId","v":1,"count":5}`:   `unknown field "count"`,
		`{"type":"addACLs","v":2,"acls":[]}`:              `unknown command type "addACLs" version 2`,
		`{"type":"removeACLs","v":1,"acls":[{"op":1}]}`:   `cannot unmarshal`,
	} {
		_, err := decodeCommand([]byte(raw))
		mustIs(t, err, ErrInvalidCommand)
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %q does not say %q", raw, err, want)
		}
	}
}

// TestACLCommandEncoding pins the log format of the ACL commands: the
// cluster's own field names, not those of security.ACL, so a rename there
// cannot change what is in the Raft log.
func TestACLCommandEncoding(t *testing.T) {
	for c, want := range map[command]string{
		addACLs(aclBobWrites, aclOpsAdmin): `{"type":"addACLs","v":1,"acls":[` +
			`{"principal":"User:bob","resource":"topic","name":"logs.","prefix":true,"op":"write"},` +
			`{"principal":"User:ops","resource":"cluster","op":"admin"}]}`,
		removeACLs(aclAliceReads): `{"type":"removeACLs","v":1,"acls":[{"principal":"User:alice","resource":"topic","name":"orders","op":"read"}]}`,
	} {
		data, err := encodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != want {
			t.Errorf("encoded\n %s\nwant\n %s", data, want)
		}
	}
}
