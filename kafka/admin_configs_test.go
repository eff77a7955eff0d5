package kafka

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/internal/testutil/inproc"
)

// configOf finds key among a described resource's settings.
func configOf(t *testing.T, rc kadm.ResourceConfig, key string) *kadm.Config {
	t.Helper()
	for i := range rc.Configs {
		if rc.Configs[i].Key == key {
			return &rc.Configs[i]
		}
	}
	t.Fatalf("%s has no setting %s", rc.Name, key)
	return nil
}

// TestTopicConfigs: DescribeConfigs shows a topic's settings under their
// Kafka names with their sources and synonyms; IncrementalAlterConfigs
// (SET, DELETE) and AlterConfigs (the whole set) change the broker's
// topic, and the change takes effect (max.message.bytes refuses a larger
// batch); refusals (APPEND, a bad value, an unknown key, a duplicate, a
// fixed setting's other value) change nothing; validate-only changes
// nothing.
func TestTopicConfigs(t *testing.T) {
	tb := startBroker(t)
	adm := adminOf(t, tb)
	ctx := testCtx(t)
	if _, err := tb.CreateTopic(ctx, "cfg", 1, 1, map[string]string{"retention.ms": "172800000"}); err != nil {
		t.Fatal(err)
	}

	described, err := adm.DescribeTopicConfigs(ctx, "cfg")
	if err != nil || len(described) != 1 || described[0].Err != nil {
		t.Fatalf("describe: %v %+v", err, described)
	}
	rc := described[0]
	ret := configOf(t, rc, "retention.ms")
	if ret.MaybeValue() != "172800000" || ret.Source != kmsg.ConfigSourceDynamicTopicConfig ||
		len(ret.Synonyms) != 2 || ret.Synonyms[1].Source != kmsg.ConfigSourceDefaultConfig || *ret.Synonyms[1].Value != "604800000" {
		t.Errorf("retention.ms: %+v", ret)
	}
	if seg := configOf(t, rc, "segment.bytes"); seg.Source != kmsg.ConfigSourceDefaultConfig || seg.MaybeValue() == "" {
		t.Errorf("segment.bytes: %+v", seg)
	}
	for _, key := range []string{"local.retention.ms", "local.retention.bytes", "remote.storage.enable", "max.message.bytes",
		"min.insync.replicas", "message.timestamp.type", "message.timestamp.before.max.ms", "message.timestamp.after.max.ms"} {
		configOf(t, rc, key)
	}
	if cp := configOf(t, rc, "cleanup.policy"); cp.MaybeValue() != "delete" {
		t.Errorf("cleanup.policy: %+v", cp)
	}

	// Read-only flags and types, from a raw request.
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dreq.IncludeDocumentation = true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeTopic, "cfg", []string{"replication.factor", "retention.ms"}
	dreq.Resources = append(dreq.Resources, res)
	dresp, err := dreq.RequestWith(ctx, tb.client(t))
	if err != nil || len(dresp.Resources) != 1 || len(dresp.Resources[0].Configs) != 2 {
		t.Fatalf("describe two settings: %+v %v", dresp, err)
	}
	for _, c := range dresp.Resources[0].Configs {
		wantRO := c.Name == "replication.factor"
		if c.ReadOnly != wantRO || c.Documentation == nil || *c.Documentation == "" || c.ConfigType == kmsg.ConfigTypeUnknown {
			t.Errorf("%s: read-only %v, doc %v, type %v", c.Name, c.ReadOnly, c.Documentation, c.ConfigType)
		}
	}

	// Incremental: set one, delete another.
	alters, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "max.message.bytes", Value: strp("1024")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
	}, "cfg")
	if err != nil || alters[0].Err != nil {
		t.Fatalf("incremental alter: %v %+v", err, alters)
	}
	d, _ := tb.DescribeTopic("cfg")
	if d.Overrides["max.message.bytes"] != "1024" || d.Overrides["retention.ms"] != "" {
		t.Fatalf("after the incremental alter the broker has %v", d.Overrides)
	}
	cl := tb.client(t, kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	big := &kgo.Record{Topic: "cfg", Value: bytes.Repeat([]byte{'x'}, 4096)}
	if err := cl.ProduceSync(ctx, big).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
		t.Fatalf("a 4 KiB record under max.message.bytes 1024: %v", err)
	}

	// Refusals change nothing.
	refusals := []struct {
		what   string
		alter  []kadm.AlterConfig
		want   error
		naming string
	}{
		{"append", []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "retention.ms", Value: strp("1")}}, kerr.InvalidConfig, "retention.ms"},
		{"bad value", []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.ms", Value: strp("sometimes")}}, kerr.InvalidConfig, "segment.ms"},
		{"unknown key", []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "index.interval.bytes", Value: strp("4096")}}, kerr.InvalidConfig, "index.interval.bytes"},
		{"unknown codec", []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "compression.type", Value: strp("brotli")}}, kerr.InvalidConfig, "compression.type"},
		{"replication factor", []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "replication.factor", Value: strp("3")}}, kerr.InvalidConfig, "replication.factor"},
		{"replication factor deleted", []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "replication.factor"}}, kerr.InvalidConfig, "replication.factor"},
		{"twice", []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.ms", Value: strp("60000")}, {Op: kadm.SetConfig, Name: "segment.ms", Value: strp("70000")}}, kerr.InvalidRequest, "segment.ms"},
	}
	for _, r := range refusals {
		alters, err := adm.AlterTopicConfigs(ctx, r.alter, "cfg")
		if err != nil || !errors.Is(alters[0].Err, r.want) || !strings.Contains(alters[0].ErrMessage, r.naming) {
			t.Errorf("%s: %v %+v; want %v naming %s", r.what, err, alters, r.want, r.naming)
		}
	}
	if d2, _ := tb.DescribeTopic("cfg"); len(d2.Overrides) != len(d.Overrides) || d2.Overrides["max.message.bytes"] != "1024" {
		t.Fatalf("refused alters changed the topic: %v, was %v", d2.Overrides, d.Overrides)
	}
	if alters, err := adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.ms", Value: strp("60000")}}, "cfg"); err != nil || alters[0].Err != nil {
		t.Fatalf("validate-only: %v %+v", err, alters)
	}
	if d2, _ := tb.DescribeTopic("cfg"); d2.Overrides["segment.ms"] != "" {
		t.Fatalf("validate-only changed the topic: %v", d2.Overrides)
	}

	// AlterConfigs replaces the whole set: max.message.bytes goes back to
	// the default, and the record fits again.
	alters, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "segment.ms", Value: strp("60000")}}, "cfg")
	if err != nil || alters[0].Err != nil {
		t.Fatalf("alter (replace): %v %+v", err, alters)
	}
	d, _ = tb.DescribeTopic("cfg")
	if d.Overrides["segment.ms"] != "60000" || d.Overrides["max.message.bytes"] != "" {
		t.Fatalf("after the replacing alter the broker has %v", d.Overrides)
	}
	if err := cl.ProduceSync(ctx, big).FirstErr(); err != nil {
		t.Fatalf("a 4 KiB record under the default max.message.bytes: %v", err)
	}

	// An unknown topic.
	if alters, _ := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.ms", Value: strp("60000")}}, "nosuch"); !errors.Is(alters[0].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("alter an unknown topic: %+v", alters)
	}
}

// TestBrokerConfigs: a broker's settings with Kafka names are described,
// read-only, and cannot be altered.
func TestBrokerConfigs(t *testing.T) {
	tb := startBroker(t)
	adm := adminOf(t, tb)
	ctx := testCtx(t)
	described, err := adm.DescribeBrokerConfigs(ctx, tb.ID())
	if err != nil || len(described) != 1 || described[0].Err != nil {
		t.Fatalf("describe: %v %+v", err, described)
	}
	rc := described[0]
	if v := configOf(t, rc, "log.dirs").MaybeValue(); v != tb.DataDir() {
		t.Errorf("log.dirs = %q, want %q", v, tb.DataDir())
	}
	if v := configOf(t, rc, "node.id").MaybeValue(); v != strconv.Itoa(int(tb.ID())) {
		t.Errorf("node.id = %q", v)
	}
	if v := configOf(t, rc, "log.retention.ms").MaybeValue(); v != tb.TopicDefaults().Map()["retention.ms"] {
		t.Errorf("log.retention.ms = %q", v)
	}
	alters, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "log.retention.ms", Value: strp("1")}}, tb.ID())
	if err != nil || !errors.Is(alters[0].Err, kerr.InvalidConfig) || !strings.Contains(alters[0].ErrMessage, "read-only") {
		t.Fatalf("alter a broker setting: %v %+v", err, alters)
	}
	// Another broker's settings are that broker's to describe.
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, "7"
	req.Resources = append(req.Resources, res)
	raw, err := tb.client(t).Broker(int(tb.ID())).Request(ctx, req)
	resp, _ := raw.(*kmsg.DescribeConfigsResponse)
	if err != nil || resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("describe broker 7 at broker 1: %+v %v", resp, err)
	}
}

// startTieredBroker is startBroker with a directory object store, so
// topics tier.
func startTieredBroker(t *testing.T) *testBroker {
	t.Helper()
	dir := t.TempDir()
	cfg := inproc.Config(t, 1, filepath.Join(dir, "data"))
	cfg.ObjectStore.Type = config.ObjectStoreFS
	cfg.ObjectStore.Path = filepath.Join(dir, "objects")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := broker.Start(testCtx(t), cfg, logger, noPeers{})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	srv, err := NewServer(b, Config{Advertise: lis.Addr().String(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(func() {
		srv.Close()
		b.Close()
	})
	return &testBroker{Broker: b, srv: srv, addr: lis.Addr().String()}
}

// TestRemoteStorageRefusalThroughKafka: switching remote.storage.enable
// off on a topic whose history is in the bucket is refused by the broker;
// through IncrementalAlterConfigs and AlterConfigs, validate-only or not,
// the refusal is INVALID_CONFIG with the broker's message, and the topic
// keeps remote storage.
func TestRemoteStorageRefusalThroughKafka(t *testing.T) {
	tb := startTieredBroker(t)
	ctx := testCtx(t)
	if _, err := tb.CreateTopic(ctx, "cold", 1, 1, map[string]string{"segment.bytes": "16KiB", "local.retention.bytes": "16KiB", "retention.ms": "-1"}); err != nil {
		t.Fatal(err)
	}
	cl := tb.client(t, kgo.DefaultProduceTopic("cold"), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := range 200 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: bytes.Repeat([]byte{byte(i)}, 500)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 20*time.Second, "history in the cold tier and gone from local disk", func() bool {
		d, err := tb.DescribeTopic("cold")
		return err == nil && d.Partitions[0].LocalStartOffset > 50 && d.Partitions[0].ColdSegments > 2
	})
	adm := kadm.NewClient(cl)
	off := []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "remote.storage.enable", Value: strp("false")}}
	for what, alter := range map[string]func() (kadm.AlterConfigsResponses, error){
		"incremental":               func() (kadm.AlterConfigsResponses, error) { return adm.AlterTopicConfigs(ctx, off, "cold") },
		"incremental validate-only": func() (kadm.AlterConfigsResponses, error) { return adm.ValidateAlterTopicConfigs(ctx, off, "cold") },
		"replacing": func() (kadm.AlterConfigsResponses, error) {
			all := append([]kadm.AlterConfig{{Name: "segment.bytes", Value: strp("16384")}, {Name: "local.retention.bytes", Value: strp("16384")},
				{Name: "retention.ms", Value: strp("-1")}}, off...)
			return adm.AlterTopicConfigsState(ctx, all, "cold")
		},
	} {
		res, err := alter()
		if err != nil || !errors.Is(res[0].Err, kerr.InvalidConfig) || !strings.Contains(res[0].ErrMessage, "remote.storage.enable") ||
			!strings.Contains(res[0].ErrMessage, "partition 0") {
			t.Errorf("%s: %v %+v; want INVALID_CONFIG with the broker's message", what, err, res)
		}
	}
	if d, _ := tb.DescribeTopic("cold"); d.Config["remote.storage.enable"] != "true" {
		t.Fatalf("after the refusals remote.storage.enable = %q", d.Config["remote.storage.enable"])
	}
}
