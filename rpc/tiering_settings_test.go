package rpc

import (
	"path/filepath"
	"testing"

	"github.com/strata-log/strata/config"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/tiering"
	"github.com/strata-log/strata/tiering/objstore"
)

// An alter of a topic with a cold tier answers once every partition's
// manifest in the bucket (here a directory) records the new settings; a
// restore of the live topic is TOPIC_ALREADY_EXISTS; describe gives every
// tiered partition's recovery point.
func TestAlterAnswersOnceTheManifestsHaveIt(t *testing.T) {
	dir := t.TempDir()
	cfg := brokerConfig(t, 1, filepath.Join(dir, "b1"))
	cfg.ObjectStore.Type = config.ObjectStoreFS
	cfg.ObjectStore.Path = filepath.Join(dir, "objects")
	tb := startBroker(t, cfg)
	ctx := testCtx(t)
	desc := tb.createTopic(t, "altered", 4, map[string]string{"retention.ms": "90d"})
	resp, err := tb.admin.AlterTopicConfig(ctx, &stratav1.AlterTopicConfigRequest{Name: "altered", Set: map[string]string{"retention.ms": "100d"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Topic.Config["retention.ms"] != "8640000000" {
		t.Fatalf("alter answered %v", resp.Topic.Config)
	}
	store, err := objstore.NewDir(cfg.ObjectStore.Path)
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(4) {
		h, _, err := tiering.LoadHead(ctx, store, tiering.PartitionRef{Topic: "altered", TopicID: desc.Id, Partition: p})
		if err != nil || h == nil || h.Config["retention.ms"] != "8640000000" || h.Partitions != 4 {
			t.Fatalf("partition %d: manifest after the alter: %+v, %v", p, h, err)
		}
	}
	_, err = tb.admin.RestoreTopic(ctx, &stratav1.RestoreTopicRequest{Name: "altered"})
	if reasonOf(err) != "TOPIC_ALREADY_EXISTS" {
		t.Fatalf("restore of a live topic: %v", err)
	}
	d, err := tb.admin.DescribeTopic(ctx, &stratav1.DescribeTopicRequest{Name: "altered"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Topic.Partitions {
		if p.ColdLoading || p.UploadLagMs != 0 || p.ColdEndOffset != -1 {
			t.Errorf("partition %d: loading %v, upload lag %d ms, cold end %d; want loaded, nothing waiting, empty", p.Metadata.Partition, p.ColdLoading, p.UploadLagMs, p.ColdEndOffset)
		}
	}
}
