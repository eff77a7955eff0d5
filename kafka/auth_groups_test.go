package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/security"
)

// TestKafkaGroupACLs: the group APIs ask for what the gRPC group calls ask
// for: read on the group (and on each topic named) to commit, fetch
// offsets, describe or heartbeat; admin on the group to delete it or its
// offsets. Without them each answers GROUP_AUTHORIZATION_FAILED, and
// ListGroups leaves the group out.
func TestKafkaGroupACLs(t *testing.T) {
	sb := startSecureBroker(t)
	open := sb.createTopic(t, "open", 1)
	sb.grant(t, "User:bob", "open", security.OpRead)
	ctx := testCtx(t)
	admin := sb.tlsClient(t, "admin", kgo.DisableIdempotentWrite())
	bob := sb.tlsClient(t, "bob", kgo.DisableIdempotentWrite())

	// The superuser makes a group with a committed offset.
	commit := func(cl *kgo.Client) int16 {
		t.Helper()
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = "billing", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = "open", topicID(open.ID) // kgo sends the newest version, by id
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := commit(admin); code != 0 {
		t.Fatalf("superuser's commit: code %d", code)
	}
	if code := commit(bob); code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("bob's commit without read on the group: code %d, want GROUP_AUTHORIZATION_FAILED", code)
	}

	fetch := kmsg.NewPtrOffsetFetchRequest()
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = "billing"
	fetch.Groups = append(fetch.Groups, g)
	if resp, err := fetch.RequestWith(ctx, bob); err != nil || resp.Groups[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("bob's offset fetch: %+v %v", resp, err)
	}
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Groups = []string{"billing"}
	if resp, err := describe.RequestWith(ctx, bob); err != nil || resp.Groups[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("bob's describe: %+v %v", resp, err)
	}
	list := kmsg.NewPtrListGroupsRequest()
	if resp, err := list.RequestWith(ctx, bob); err != nil || len(resp.Groups) != 0 {
		t.Fatalf("bob's group list: %+v %v, want no group", resp, err)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis = "billing", "m1", 5000
	hb.SubscribedTopicNames = []string{"open"}
	if resp, err := hb.RequestWith(ctx, bob); err != nil || resp.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("bob's heartbeat: %+v %v", resp, err)
	}

	// Read on the group: commit, fetch, describe and list now; delete
	// still needs admin.
	if err := sb.AddACLs(ctx, []security.ACL{{Principal: "User:bob", Resource: security.ResourceGroup, Name: "billing", Op: security.OpRead}}); err != nil {
		t.Fatal(err)
	}
	if code := commit(bob); code != 0 {
		t.Fatalf("bob's commit with read on the group: code %d", code)
	}
	if resp, err := fetch.RequestWith(ctx, bob); err != nil || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("bob's offset fetch with read: %+v %v", resp, err)
	}
	if resp, err := list.RequestWith(ctx, bob); err != nil || len(resp.Groups) != 1 {
		t.Fatalf("bob's group list with read: %+v %v, want billing", resp, err)
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"billing"}
	if resp, err := del.RequestWith(ctx, bob); err != nil || resp.Groups[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("bob's delete without admin: %+v %v", resp, err)
	}
	if resp, err := del.RequestWith(ctx, admin); err != nil || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("superuser's delete: %+v %v", resp, err)
	}
}
