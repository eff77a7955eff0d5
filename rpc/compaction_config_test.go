package rpc

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// TestCompactionSettingsOverGRPC: the compaction settings are created,
// altered live and described over the admin service, kept in the cluster
// metadata across a restart, and refused as INVALID_ARGUMENT
// (INVALID_CONFIG naming the key) when wrong, changing nothing.
func TestCompactionSettingsOverGRPC(t *testing.T) {
	dir := t.TempDir()
	cfg := brokerConfig(t, 1, dir)
	tb := startBroker(t, cfg)
	ctx := testCtx(t)
	d := tb.createTopic(t, "state", 1, map[string]string{
		"cleanup.policy": "compact", "remote.storage.enable": "false", "delete.retention.ms": "2h",
	})
	if d.Config["cleanup.policy"] != "compact" || d.Config["delete.retention.ms"] != "7200000" ||
		d.Config["min.cleanable.dirty.ratio"] != "0.5" || d.Config["max.compaction.lag.ms"] != "-1" || d.Config["min.compaction.lag.ms"] != "0" {
		t.Fatalf("created with %v", d.Config)
	}
	resp, err := tb.admin.AlterTopicConfig(ctx, &stratav1.AlterTopicConfigRequest{Name: "state",
		Set: map[string]string{"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.1", "min.compaction.lag.ms": "5m", "max.compaction.lag.ms": "1d"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.1",
		"min.compaction.lag.ms": "300000", "max.compaction.lag.ms": "86400000", "delete.retention.ms": "7200000"}
	for k, v := range want {
		if resp.Topic.Config[k] != v || resp.Topic.Overrides[k] != v {
			t.Errorf("after alter %s = %q (override %q), want %q", k, resp.Topic.Config[k], resp.Topic.Overrides[k], v)
		}
	}

	for _, bad := range []struct {
		set    map[string]string
		naming string
	}{
		{map[string]string{"cleanup.policy": "compact;delete"}, "cleanup.policy"},
		{map[string]string{"min.cleanable.dirty.ratio": "2"}, "min.cleanable.dirty.ratio"},
		{map[string]string{"min.compaction.lag.ms": "2d"}, "max.compaction.lag.ms (1d)"},
	} {
		_, err := tb.admin.AlterTopicConfig(ctx, &stratav1.AlterTopicConfigRequest{Name: "state", Set: bad.set})
		code, info, _ := errorInfo(err)
		if code != codes.InvalidArgument || info == nil || info.Reason != "INVALID_CONFIG" || !strings.Contains(err.Error(), bad.naming) {
			t.Errorf("alter %v: %v; want INVALID_ARGUMENT, INVALID_CONFIG naming %s", bad.set, err, bad.naming)
		}
	}
	// A tiered topic can be compacted: the cold tier compacts too.
	if _, err = tb.admin.CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "tiered", Config: map[string]string{"cleanup.policy": "compact"}}); err != nil {
		t.Errorf("create compact with remote storage: %v", err)
	}

	tb.stop(t)
	tb = startBroker(t, cfg)
	got, err := tb.admin.DescribeTopic(ctx, &stratav1.DescribeTopicRequest{Name: "state"})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if got.Topic.Config[k] != v {
			t.Errorf("after restart %s = %q, want %q", k, got.Topic.Config[k], v)
		}
	}
}
