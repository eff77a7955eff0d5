package kafka

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClassicVersions: the classic group APIs are advertised at Kafka
// 4.1's ranges, from v0: librdkafka 2.0 and older turn groups off without
// JoinGroup v0 (KAFKA-19444 put v0 and v1 back), and segmentio/kafka-go
// sends JoinGroup v1-v2 and SyncGroup, Heartbeat and LeaveGroup v0.
func TestClassicVersions(t *testing.T) {
	for key, want := range map[int16][2]int16{11: {0, 9}, 12: {0, 4}, 13: {0, 5}, 14: {0, 5}} {
		if a := apis[key]; a.min != want[0] || a.max != want[1] {
			t.Errorf("%s: v%d-v%d, want v%d-v%d", kmsg.NameForKey(key), a.min, a.max, want[0], want[1])
		}
	}
}

func consumerMeta(version int16, topics []string, owned map[string][]int32) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version, m.Topics = version, topics
	for t, ps := range owned {
		o := kmsg.NewConsumerMemberMetadataOwnedPartition()
		o.Topic, o.Partitions = t, ps
		m.OwnedPartitions = append(m.OwnedPartitions, o)
	}
	return m.AppendTo(nil)
}

func joinRequest(group, member string, meta []byte, protocols ...string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.ProtocolType = group, member, consumerProtocolType
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 6000, 10000
	for _, name := range protocols {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = name, meta
		req.Protocols = append(req.Protocols, p)
	}
	return req
}

// roundTrip sends req at version on c and decodes the answer into resp.
func roundTrip(t *testing.T, c *rawConn, req kmsg.Request, version int16, resp kmsg.Response) {
	t.Helper()
	c.send(frameOf(req, version, 9))
	corr, body := c.recv()
	resp.SetVersion(version)
	if resp.IsFlexible() {
		body = body[1:] // the response header's tagged fields: none
	}
	if err := resp.ReadFrom(body); err != nil || corr != 9 {
		t.Fatalf("%s v%d: correlation %d, %v", kmsg.NameForKey(req.Key()), version, corr, err)
	}
}

// TestClassicOldVersions: the versions older clients send work end to
// end: a JoinGroup v1 (segmentio/kafka-go) gets its member id at once, a
// SyncGroup v0 its assignment, Heartbeat and LeaveGroup v0 their answers;
// a JoinGroup v4 without an id gets MEMBER_ID_REQUIRED and one to join
// with (KIP-394), and joins with it.
func TestClassicOldVersions(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic(t, "old", 3)
	c := dialRaw(t, tb.addr)

	join := kmsg.NewPtrJoinGroupResponse()
	roundTrip(t, c, joinRequest("og", "", consumerMeta(0, []string{"old"}, nil), "range"), 1, join)
	if join.ErrorCode != 0 || join.MemberID == "" || join.Generation < 1 || join.LeaderID == join.MemberID {
		t.Fatalf("join v1: %+v", join)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "og", join.MemberID, join.Generation
	sresp := kmsg.NewPtrSyncGroupResponse()
	roundTrip(t, c, sync, 0, sresp)
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(sresp.MemberAssignment); err != nil || sresp.ErrorCode != 0 {
		t.Fatalf("sync v0: code %d, %v", sresp.ErrorCode, err)
	}
	if len(a.Topics) != 1 || a.Topics[0].Topic != "old" || !slices.Equal(a.Topics[0].Partitions, []int32{0, 1, 2}) {
		t.Fatalf("sync v0 assignment: %+v", a)
	}

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "og", join.MemberID, join.Generation
	hresp := kmsg.NewPtrHeartbeatResponse()
	roundTrip(t, c, hb, 0, hresp)
	if hresp.ErrorCode != 0 {
		t.Fatalf("heartbeat v0: %v", kerr.ErrorForCode(hresp.ErrorCode))
	}
	hb.Generation++
	roundTrip(t, c, hb, 0, hresp)
	if hresp.ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("heartbeat v0 at another generation: %v, want ILLEGAL_GENERATION", kerr.ErrorForCode(hresp.ErrorCode))
	}
	hb.Generation--

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = "og", join.MemberID
	lresp := kmsg.NewPtrLeaveGroupResponse()
	roundTrip(t, c, leave, 0, lresp)
	if lresp.ErrorCode != 0 {
		t.Fatalf("leave v0: %v", kerr.ErrorForCode(lresp.ErrorCode))
	}
	roundTrip(t, c, hb, 0, hresp)
	if hresp.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat after leaving: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(hresp.ErrorCode))
	}

	roundTrip(t, c, joinRequest("og", "", consumerMeta(1, []string{"old"}, nil), "range"), 4, join)
	if join.ErrorCode != kerr.MemberIDRequired.Code || join.MemberID == "" {
		t.Fatalf("join v4 without an id: %v, member %q", kerr.ErrorForCode(join.ErrorCode), join.MemberID)
	}
	if _, err := tb.DescribeGroup(testCtx(t), "og"); err == nil {
		t.Fatalf("MEMBER_ID_REQUIRED added a member")
	}
	id := join.MemberID
	roundTrip(t, c, joinRequest("og", id, consumerMeta(1, []string{"old"}, nil), "range"), 4, join)
	if join.ErrorCode != 0 || join.MemberID != id {
		t.Fatalf("join v4 with the given id: %v, member %q want %q", kerr.ErrorForCode(join.ErrorCode), join.MemberID, id)
	}
}

// TestClassicBadJoins: a join that cannot be served gets a clear code
// and adds no member.
func TestClassicBadJoins(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic(t, "bad", 1)
	c := dialRaw(t, tb.addr)
	instance := "static-1"
	for _, tc := range []struct {
		name string
		req  *kmsg.JoinGroupRequest
		want *kerr.Error
	}{
		{"metadata that does not decode", joinRequest("bg", "", []byte{0, 1, 0xff}, "range"), kerr.InvalidRequest},
		{"no protocols", joinRequest("bg", "", nil), kerr.InconsistentGroupProtocol},
		{"no topics", joinRequest("bg", "", consumerMeta(1, nil, nil), "range"), kerr.InvalidRequest},
		{"a topic name that is not one", joinRequest("bg", "", consumerMeta(1, []string{"a/b"}, nil), "range"), kerr.InvalidTopicException},
		{"session timeout too short", func() *kmsg.JoinGroupRequest {
			r := joinRequest("bg", "", consumerMeta(1, []string{"bad"}, nil), "range")
			r.SessionTimeoutMillis = 10
			return r
		}(), kerr.InvalidRequest},
		{"static membership", func() *kmsg.JoinGroupRequest {
			r := joinRequest("bg", "", consumerMeta(1, []string{"bad"}, nil), "range")
			r.InstanceID = &instance
			return r
		}(), kerr.InvalidRequest},
		{"an invalid group name", joinRequest("", "", consumerMeta(1, []string{"bad"}, nil), "range"), kerr.InvalidRequest},
	} {
		resp := kmsg.NewPtrJoinGroupResponse()
		roundTrip(t, c, tc.req, 9, resp)
		if resp.ErrorCode != tc.want.Code || resp.Generation != -1 {
			t.Errorf("%s: %v, generation %d; want %s", tc.name, kerr.ErrorForCode(resp.ErrorCode), resp.Generation, tc.want.Message)
		}
	}
	if _, err := tb.DescribeGroup(testCtx(t), "bg"); err == nil {
		t.Errorf("a refused join added a member")
	}
}

// FuzzConsumerJoin: reading a JoinGroup's consumer subscription never
// panics, and one it accepts carries every protocol name and every owned
// partition the metadata lists.
func FuzzConsumerJoin(f *testing.F) {
	f.Add(consumerMeta(0, []string{"a"}, nil), int16(9))
	f.Add(consumerMeta(1, []string{"a", "b"}, map[string][]int32{"a": {0, 2}}), int16(4))
	f.Add(consumerMeta(3, []string{"a"}, map[string][]int32{"a": {1}}), int16(0))
	f.Add([]byte{0, 9, 0, 0, 0, 1}, int16(6))
	f.Fuzz(func(t *testing.T, meta []byte, version int16) {
		req := joinRequest("g", "", meta, "first", "second")
		req.Version = version
		j, code := consumerJoin(req, "c", "h")
		if code != 0 {
			return
		}
		var m kmsg.ConsumerMemberMetadata
		if err := m.ReadFrom(meta); err != nil {
			t.Fatalf("accepted metadata that does not decode: %v", err)
		}
		n := 0
		for _, o := range m.OwnedPartitions {
			n += len(o.Partitions)
		}
		if len(j.Owned) != n || !slices.Equal(j.Protocols, []string{"first", "second"}) || !slices.Equal(j.Topics, m.Topics) {
			t.Fatalf("join %+v from metadata %+v", j, m)
		}
	})
}
