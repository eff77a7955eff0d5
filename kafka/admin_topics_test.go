package kafka

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func adminOf(t *testing.T, tb *testBroker) *kadm.Client {
	return kadm.NewClient(tb.client(t))
}

// TestCreateTopics: kadm creates topics with the broker's defaults (-1),
// with settings, and gets the topic id Metadata gives; validate-only
// creates nothing; a setting Strata lacks, cleanup.policy=compact with
// remote storage on, a bad name, an existing topic, a manual assignment
// and bad counts are refused with Kafka's codes and change nothing.
func TestCreateTopics(t *testing.T) {
	tb := startBroker(t)
	adm := adminOf(t, tb)
	ctx := testCtx(t)

	res, err := adm.CreateTopic(ctx, -1, -1, map[string]*string{"retention.ms": strp("172800000"), "cleanup.policy": strp("delete")}, "plain")
	if err != nil || res.Err != nil {
		t.Fatalf("create: %v %+v", err, res)
	}
	d, err := tb.DescribeTopic("plain")
	if err != nil || len(d.Partitions) != 1 || d.Overrides["retention.ms"] != "172800000" {
		t.Fatalf("the broker has %+v, %v; want 1 partition and retention.ms 172800000", d, err)
	}
	if res.ID != kadm.TopicID(topicID(d.ID)) || res.NumPartitions != 1 || res.ReplicationFactor != 1 || res.Configs["retention.ms"].Value == nil || *res.Configs["retention.ms"].Value != "172800000" {
		t.Fatalf("create answered %+v; want the topic's id %x, 1 partition, RF 1, retention.ms", res, topicID(d.ID))
	}
	md, err := adm.Metadata(ctx, "plain")
	if err != nil || md.Topics["plain"].ID != res.ID {
		t.Fatalf("metadata id %v, create id %v (%v)", md.Topics["plain"].ID, res.ID, err)
	}

	// validate-only: answered as a create, nothing made.
	vres, err := adm.ValidateCreateTopics(ctx, 3, 1, nil, "checked")
	if err != nil || vres["checked"].Err != nil {
		t.Fatalf("validate-only: %v %+v", err, vres)
	}
	if _, err := tb.DescribeTopic("checked"); err == nil {
		t.Fatal("validate-only created the topic")
	}
	vres, _ = adm.ValidateCreateTopics(ctx, 1, 1, nil, "plain")
	if !errors.Is(vres["plain"].Err, kerr.TopicAlreadyExists) {
		t.Fatalf("validate-only of an existing topic: %+v", vres["plain"])
	}
	vres, _ = adm.ValidateCreateTopics(ctx, 1, 1, map[string]*string{"segment.bytes": strp("1")}, "tiny")
	if !errors.Is(vres["tiny"].Err, kerr.InvalidConfig) {
		t.Fatalf("validate-only with a bad value: %+v", vres["tiny"])
	}

	refused := []struct {
		what       string
		partitions int32
		rf         int16
		configs    map[string]*string
		topic      string
		want       error
		mention    string
	}{
		{"unknown setting", 1, 1, map[string]*string{"index.interval.bytes": strp("4096")}, "indexed", kerr.InvalidConfig, "index.interval.bytes"},
		{"unknown codec", 1, 1, map[string]*string{"compression.type": strp("brotli")}, "squeezed", kerr.InvalidConfig, "compression.type"},
		{"bad value", 1, 1, map[string]*string{"retention.ms": strp("soon")}, "vague", kerr.InvalidConfig, "retention.ms"},
		{"null value", 1, 1, map[string]*string{"retention.ms": nil}, "nulled", kerr.InvalidConfig, "retention.ms"},
		{"bad name", 1, 1, nil, "no/slashes", kerr.InvalidTopicException, ""},
		{"exists", 1, 1, nil, "plain", kerr.TopicAlreadyExists, ""},
		{"zero partitions", 0, 1, nil, "empty", kerr.InvalidPartitions, ""},
		{"zero replicas", 1, 0, nil, "unreplicated", kerr.InvalidReplicationFactor, ""},
		{"too many replicas", 1, 3, nil, "wide", kerr.InvalidConfig, "replication factor 3 needs 3 brokers"},
	}
	for _, r := range refused {
		all, err := adm.CreateTopics(ctx, r.partitions, r.rf, r.configs, r.topic)
		if err != nil {
			t.Fatalf("%s: %v", r.what, err)
		}
		res := all[r.topic]
		if !errors.Is(res.Err, r.want) || !strings.Contains(res.ErrMessage, r.mention) {
			t.Errorf("%s: %v %q; want %v mentioning %q", r.what, res.Err, res.ErrMessage, r.want, r.mention)
		}
		if r.topic != "plain" {
			if _, err := tb.DescribeTopic(r.topic); err == nil {
				t.Errorf("%s: the topic was created", r.what)
			}
		}
	}
	if d2, _ := tb.DescribeTopic("plain"); d2.ID != d.ID || len(d2.Overrides) != len(d.Overrides) {
		t.Errorf("refused creates changed the existing topic: %+v", d2)
	}

	// A manual assignment, and a name twice in one request.
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	manual := kmsg.NewCreateTopicsRequestTopic()
	manual.Topic, manual.NumPartitions, manual.ReplicationFactor = "manual", -1, -1
	manual.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1}}}
	twice := kmsg.NewCreateTopicsRequestTopic()
	twice.Topic, twice.NumPartitions, twice.ReplicationFactor = "twice", 1, 1
	req.Topics = []kmsg.CreateTopicsRequestTopic{manual, twice, twice}
	resp, err := req.RequestWith(ctx, tb.client(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []int16{kerr.InvalidReplicaAssignment.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code}
	for i, rt := range resp.Topics {
		if rt.ErrorCode != want[i] {
			t.Errorf("topic %d (%s): code %d, want %d", i, rt.Topic, rt.ErrorCode, want[i])
		}
	}
	for _, name := range []string{"manual", "twice"} {
		if _, err := tb.DescribeTopic(name); err == nil {
			t.Errorf("%s was created", name)
		}
	}
}

// TestDeleteTopics: kadm deletes a topic by name, and a raw v6 request by
// id; the broker no longer has them and Metadata says so; unknown names
// and ids are refused.
func TestDeleteTopics(t *testing.T) {
	tb := startBroker(t)
	adm := adminOf(t, tb)
	ctx := testCtx(t)
	tb.createTopic(t, "byname", 2)
	byID := tb.createTopic(t, "byid", 1)

	// By name, as v1 to v5 name topics.
	v5 := kversion.Stable()
	v5.SetMaxKeyVersion(20, 5)
	res, err := kadm.NewClient(tb.client(t, kgo.MaxVersions(v5))).DeleteTopics(ctx, "byname", "nosuch")
	if err != nil || res["byname"].Err != nil || !errors.Is(res["nosuch"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete: %v %+v", err, res)
	}
	if _, err := tb.DescribeTopic("byname"); err == nil {
		t.Fatal("the broker still has the deleted topic")
	}

	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version, req.TimeoutMillis = 6, 10000
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: topicID(byID.ID)}, {TopicID: [16]byte{1}}}
	resp, err := req.RequestWith(ctx, tb.client(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != "byid" ||
		resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("delete by id: %+v", resp.Topics)
	}
	md, err := adm.Metadata(ctx)
	if err != nil || len(md.Topics) != 0 {
		t.Fatalf("metadata after deletes: %v %v", md.Topics.Names(), err)
	}
}
