package kafka

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCompactionConfigs: the compaction settings go through every Kafka
// admin path under Kafka's names: CreateTopics configs (Kafka's
// Long.MAX_VALUE read as unbounded), DescribeConfigs (values, list and
// double types, the broker synonyms), IncrementalAlterConfigs SET and
// DELETE, AlterConfigs; bad values, min above max, and compaction with
// remote storage on are INVALID_CONFIG and change nothing.
func TestCompactionConfigs(t *testing.T) {
	tb := startBroker(t)
	adm := adminOf(t, tb)
	ctx := testCtx(t)

	res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy":            strp("compact"),
		"remote.storage.enable":     strp("false"),
		"min.cleanable.dirty.ratio": strp("0.2"),
		"max.compaction.lag.ms":     strp("9223372036854775807"),
		"delete.retention.ms":       strp("3600000"),
	}, "changelog")
	if err != nil || res.Err != nil {
		t.Fatalf("create a compacted topic: %v %+v", err, res)
	}
	d, err := tb.DescribeTopic("changelog")
	if err != nil || d.Config["cleanup.policy"] != "compact" || d.Config["min.cleanable.dirty.ratio"] != "0.2" ||
		d.Config["max.compaction.lag.ms"] != "-1" || d.Config["delete.retention.ms"] != "3600000" {
		t.Fatalf("the broker has %v (%v)", d.Config, err)
	}

	// Described with Kafka's types and the broker synonyms asked for.
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dreq.IncludeSynonyms = true
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "changelog"
	r.ConfigNames = []string{"cleanup.policy", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "max.compaction.lag.ms", "delete.retention.ms"}
	dreq.Resources = append(dreq.Resources, r)
	dresp, err := dreq.RequestWith(ctx, tb.client(t))
	if err != nil || len(dresp.Resources) != 1 || len(dresp.Resources[0].Configs) != 5 {
		t.Fatalf("describe: %+v %v", dresp, err)
	}
	want := map[string]struct {
		value  string
		typ    kmsg.ConfigType
		source kmsg.ConfigSource
	}{
		"cleanup.policy":            {"compact", kmsg.ConfigTypeList, kmsg.ConfigSourceDynamicTopicConfig},
		"min.cleanable.dirty.ratio": {"0.2", kmsg.ConfigTypeDouble, kmsg.ConfigSourceDynamicTopicConfig},
		"min.compaction.lag.ms":     {"0", kmsg.ConfigTypeLong, kmsg.ConfigSourceDefaultConfig},
		"max.compaction.lag.ms":     {"-1", kmsg.ConfigTypeLong, kmsg.ConfigSourceDynamicTopicConfig},
		"delete.retention.ms":       {"3600000", kmsg.ConfigTypeLong, kmsg.ConfigSourceDynamicTopicConfig},
	}
	for _, c := range dresp.Resources[0].Configs {
		w := want[c.Name]
		if c.Value == nil || *c.Value != w.value || c.ConfigType != w.typ || c.Source != w.source || c.ReadOnly {
			t.Errorf("%s: value %v type %v source %v read-only %v; want %+v", c.Name, c.Value, c.ConfigType, c.Source, c.ReadOnly, w)
		}
	}

	// Incremental: compact,delete with a lag bound; DELETE puts a default back.
	alters, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "cleanup.policy", Value: strp("delete,compact")},
		{Op: kadm.SetConfig, Name: "min.compaction.lag.ms", Value: strp("60000")},
		{Op: kadm.DeleteConfig, Name: "min.cleanable.dirty.ratio"},
	}, "changelog")
	if err != nil || alters[0].Err != nil {
		t.Fatalf("incremental alter: %v %+v", err, alters)
	}
	d, _ = tb.DescribeTopic("changelog")
	if d.Config["cleanup.policy"] != "compact,delete" || d.Config["min.compaction.lag.ms"] != "60000" || d.Config["min.cleanable.dirty.ratio"] != "0.5" {
		t.Fatalf("after the incremental alter the broker has %v", d.Config)
	}

	refusals := []struct {
		what   string
		alter  []kadm.AlterConfig
		naming string
	}{
		{"unknown policy", []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: strp("retain")}}, "cleanup.policy"},
		{"ratio above 1", []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "min.cleanable.dirty.ratio", Value: strp("1.5")}}, "min.cleanable.dirty.ratio"},
		{"min above max", []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "max.compaction.lag.ms", Value: strp("1000")}}, "max.compaction.lag.ms"},
		{"append to a setting that is no list", []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "retention.ms", Value: strp("1")}}, "only a list setting"},
		{"subtract every policy", []kadm.AlterConfig{{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: strp("delete,compact")}}, "leaves it empty"},
	}
	for _, r := range refusals {
		alters, err := adm.AlterTopicConfigs(ctx, r.alter, "changelog")
		if err != nil || !errors.Is(alters[0].Err, kerr.InvalidConfig) || !strings.Contains(alters[0].ErrMessage, r.naming) {
			t.Errorf("%s: %v %+v; want INVALID_CONFIG naming %s", r.what, err, alters, r.naming)
		}
	}
	if d2, _ := tb.DescribeTopic("changelog"); len(d2.Overrides) != len(d.Overrides) || d2.Config["cleanup.policy"] != "compact,delete" {
		t.Fatalf("refused alters changed the topic: %v, was %v", d2.Overrides, d.Overrides)
	}

	// SUBTRACT and APPEND edit the list in force, as in Kafka.
	for _, step := range []struct {
		op   kadm.IncrementalOp
		item string
		want string
	}{{kadm.SubtractConfig, "delete", "compact"}, {kadm.AppendConfig, "delete", "compact,delete"}, {kadm.AppendConfig, "compact", "compact,delete"}} {
		alters, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: step.op, Name: "cleanup.policy", Value: strp(step.item)}}, "changelog")
		if err != nil || alters[0].Err != nil {
			t.Fatalf("%v %s: %v %+v", step.op, step.item, err, alters)
		}
		if d, _ := tb.DescribeTopic("changelog"); d.Config["cleanup.policy"] != step.want {
			t.Fatalf("after %v %s: cleanup.policy %s, want %s", step.op, step.item, d.Config["cleanup.policy"], step.want)
		}
	}

	// AlterConfigs replaces the set: back to delete, on a topic that may
	// upload again.
	alters, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "cleanup.policy", Value: strp("delete")}}, "changelog")
	if err != nil || alters[0].Err != nil {
		t.Fatalf("alter (replace): %v %+v", err, alters)
	}
	d, _ = tb.DescribeTopic("changelog")
	if d.Config["cleanup.policy"] != "delete" || d.Config["remote.storage.enable"] != "true" || d.Config["min.compaction.lag.ms"] != "0" {
		t.Fatalf("after the replacing alter the broker has %v", d.Config)
	}
}
