package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDefaultTopic(t *testing.T) {
	def := DefaultTopic()
	if err := def.Validate(); err != nil {
		t.Fatalf("DefaultTopic().Validate() = %v", err)
	}
	got, err := ParseTopic(nil)
	if err != nil || got != def {
		t.Fatalf("ParseTopic(nil) = %+v, %v; want the defaults", got, err)
	}
	// The documented defaults, in canonical form and in documented order.
	want := []struct{ key, typ, def string }{
		{"retention.ms", "ms", "604800000"},
		{"retention.bytes", "bytes", "-1"},
		{"cleanup.policy", "list", "delete"},
		{"delete.retention.ms", "ms", "86400000"},
		{"min.compaction.lag.ms", "ms", "0"},
		{"max.compaction.lag.ms", "ms", "-1"},
		{"min.cleanable.dirty.ratio", "double", "0.5"},
		{"local.retention.ms", "ms", "86400000"},
		{"local.retention.bytes", "bytes", "-1"},
		{"remote.storage.enable", "bool", "true"},
		{"remote.max.lag.ms", "ms", "600000"},
		{"remote.read.bytes.per.sec", "bytes", "-1"},
		{"remote.read.gets.per.sec", "int", "-1"},
		{"segment.bytes", "bytes", "134217728"},
		{"segment.ms", "ms", "3600000"},
		{"replication.factor", "int", "1"},
		{"min.insync.replicas", "int", "1"},
		{"max.message.bytes", "bytes", "1048588"},
		{"compression.type", "enum", "producer"},
		{"message.timestamp.type", "enum", "CreateTime"},
		{"message.timestamp.before.max.ms", "ms", "-1"},
		{"message.timestamp.after.max.ms", "ms", "3600000"},
		{"flush.policy", "enum", "always"},
		{"flush.ms", "ms", "100"},
		{"unclean.leader.election.enable", "bool", "false"},
	}
	keys := TopicKeys()
	if len(keys) != len(want) {
		t.Fatalf("TopicKeys() has %d keys, want %d", len(keys), len(want))
	}
	for i, w := range want {
		k := keys[i]
		if k.Name != w.key || k.Type != w.typ || k.Default != w.def {
			t.Errorf("TopicKeys()[%d] = %s %s %s, want %s %s %s", i, k.Name, k.Type, k.Default, w.key, w.typ, w.def)
		}
		if k.Allowed == "" || k.Doc == "" {
			t.Errorf("%s: Allowed and Doc must be set", k.Name)
		}
		if got, _ := def.Get(k.Name); got != k.Default {
			t.Errorf("Get(%s) = %q, KeyInfo.Default %q", k.Name, got, k.Default)
		}
	}
}

func TestTopicSetValid(t *testing.T) {
	cases := []struct{ key, value, want string }{
		{"retention.ms", "90d", "7776000000"},
		{"retention.ms", "-1", "-1"},
		{"retention.ms", "3600000", "3600000"},
		{"retention.ms", "1ms", "1"},
		{"retention.bytes", "500GiB", "536870912000"},
		{"retention.bytes", "-1", "-1"},
		{"local.retention.ms", "-1", "-1"},
		{"local.retention.ms", "6h", "21600000"},
		{"local.retention.bytes", "10 GB", "10000000000"},
		{"remote.storage.enable", "FALSE", "false"},
		{"remote.max.lag.ms", "2s", "2000"},
		{"remote.max.lag.ms", "-1", "-1"},
		{"segment.bytes", "16KiB", "16384"},
		{"segment.bytes", "1GiB", "1073741824"},
		{"segment.ms", "1s", "1000"},
		{"segment.ms", "1d", "86400000"},
		{"replication.factor", "7", "7"},
		{"min.insync.replicas", "1", "1"},
		{"max.message.bytes", "64", "64"},
		{"max.message.bytes", "64MiB", "67108864"},
		{"message.timestamp.type", "logappendtime", "LogAppendTime"},
		{"message.timestamp.type", "CREATETIME", "CreateTime"},
		{"message.timestamp.before.max.ms", "30d", "2592000000"},
		{"message.timestamp.before.max.ms", "0", "0"},
		{"message.timestamp.before.max.ms", "-1", "-1"},
		// Kafka's spelling of unbounded is ours.
		{"message.timestamp.before.max.ms", "9223372036854775807", "-1"},
		{"message.timestamp.after.max.ms", "1d", "86400000"},
		{"message.timestamp.after.max.ms", "0", "0"},
		{"message.timestamp.after.max.ms", "-1", "-1"},
		{"message.timestamp.after.max.ms", "9223372036854775807", "-1"},
		{"flush.policy", "Interval", "interval"},
		{"compression.type", "ZSTD", "zstd"},
		{"compression.type", "uncompressed", "uncompressed"},
		{"flush.policy", "never", "never"},
		{"flush.ms", "1", "1"},
		{"flush.ms", "2s", "2000"},
		{"unclean.leader.election.enable", "True", "true"},
		{"cleanup.policy", "compact", "compact"},
		{"cleanup.policy", "COMPACT", "compact"},
		{"cleanup.policy", "Delete", "delete"},
		{"cleanup.policy", "compact,delete", "compact,delete"},
		{"cleanup.policy", "delete, compact", "compact,delete"},
		{"cleanup.policy", "compact,compact", "compact"},
		{"delete.retention.ms", "0", "0"},
		{"delete.retention.ms", "7d", "604800000"},
		{"delete.retention.ms", "-1", "-1"},
		{"delete.retention.ms", "9223372036854775807", "-1"},
		{"min.compaction.lag.ms", "1h", "3600000"},
		{"min.compaction.lag.ms", "0", "0"},
		{"max.compaction.lag.ms", "7d", "604800000"},
		{"max.compaction.lag.ms", "1", "1"},
		// Kafka's default, Long.MAX_VALUE, is unbounded.
		{"max.compaction.lag.ms", "9223372036854775807", "-1"},
		{"min.cleanable.dirty.ratio", "0", "0"},
		{"min.cleanable.dirty.ratio", "1", "1"},
		{"min.cleanable.dirty.ratio", "0.25", "0.25"},
		{"min.cleanable.dirty.ratio", " .9 ", "0.9"},
	}
	for _, tc := range cases {
		top := DefaultTopic()
		if err := top.Set(tc.key, tc.value); err != nil {
			t.Errorf("Set(%s, %q) = %v", tc.key, tc.value, err)
			continue
		}
		if got, err := top.Get(tc.key); err != nil || got != tc.want {
			t.Errorf("after Set(%s, %q): Get = %q, %v; want %q", tc.key, tc.value, got, err, tc.want)
		}
	}
}

func TestTopicSetInvalid(t *testing.T) {
	cases := []struct{ key, value, reason string }{
		{"retention.ms", "abc", ""},
		{"retention.ms", "0", "at least 1ms"},
		{"retention.ms", "-2", "negative"},
		{"retention.ms", "1500us", "finer than a millisecond"},
		{"retention.bytes", "0", "at least 1"},
		{"retention.bytes", "lots", ""},
		{"local.retention.ms", "0s", "at least"},
		{"local.retention.bytes", "-5", "negative"},
		{"remote.storage.enable", "yes", ""},
		{"remote.storage.enable", "1", ""},
		{"remote.max.lag.ms", "999", "at least 1s"},
		{"remote.max.lag.ms", "0", "at least 1s"},
		{"remote.max.lag.ms", "-2", "negative"},
		{"segment.bytes", "16383", "at least 16KiB"},
		{"segment.bytes", "2GiB", "at most 1GiB"},
		{"segment.bytes", "-1", "not allowed"},
		{"segment.ms", "999", "at least 1s"},
		{"segment.ms", "-1", "not allowed"},
		{"replication.factor", "0", "from 1 to 7"},
		{"replication.factor", "8", "from 1 to 7"},
		{"replication.factor", "three", ""},
		{"min.insync.replicas", "0", "from 1 to 7"},
		{"max.message.bytes", "63", "at least 64"},
		{"max.message.bytes", "65MiB", "at most 64MiB"},
		{"message.timestamp.type", "BrokerTime", ""},
		{"message.timestamp.before.max.ms", "-2", "negative"},
		{"message.timestamp.before.max.ms", "soon", ""},
		{"message.timestamp.after.max.ms", "-3600000", "negative"},
		{"message.timestamp.after.max.ms", "1500us", "finer than a millisecond"},
		{"flush.policy", "sometimes", ""},
		{"flush.ms", "0", "at least 1ms"},
		{"unclean.leader.election.enable", "", ""},
		{"cleanup.policy", "", "empty policy"},
		{"cleanup.policy", "compact,", "empty policy"},
		{"cleanup.policy", "retain", "unknown policy \"retain\""},
		{"cleanup.policy", "compact,forever", "unknown policy \"forever\""},
		{"delete.retention.ms", "-2", "negative"},
		{"delete.retention.ms", "never", ""},
		{"min.compaction.lag.ms", "-1", "not allowed"},
		{"max.compaction.lag.ms", "0", "at least 1ms"},
		{"min.cleanable.dirty.ratio", "1.5", "from 0 to 1"},
		{"min.cleanable.dirty.ratio", "-0.1", "from 0 to 1"},
		{"min.cleanable.dirty.ratio", "NaN", "from 0 to 1"},
		{"min.cleanable.dirty.ratio", "half", ""},
	}
	for _, tc := range cases {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			top := DefaultTopic()
			err := top.Set(tc.key, tc.value)
			checkParseError(t, err, tc.value, tc.reason)
			var e *Error
			errors.As(err, &e)
			if e.Key != tc.key || !strings.Contains(err.Error(), " for "+tc.key) {
				t.Errorf("error %q must name key %s", err, tc.key)
			}
			if info := keyInfo(t, tc.key); e.Allowed != info.Allowed {
				t.Errorf("Allowed = %q, want the key's %q", e.Allowed, info.Allowed)
			}
			if top != DefaultTopic() {
				t.Errorf("a failed Set changed the topic: %+v", top)
			}
		})
	}
}

func keyInfo(t *testing.T, key string) KeyInfo {
	t.Helper()
	for _, k := range TopicKeys() {
		if k.Name == key {
			return k
		}
	}
	t.Fatalf("no key %s", key)
	return KeyInfo{}
}

func TestTopicErrorMessage(t *testing.T) {
	top := DefaultTopic()
	err := top.Set("retention.ms", "abc")
	want := `config: invalid value "abc" for retention.ms: want a duration such as 90d, 6h, 30m or -1 for unbounded`
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

func TestTopicUnknownKey(t *testing.T) {
	top := DefaultTopic()
	for _, op := range []func() error{
		func() error { return top.Set("retention.msx", "1d") },
		func() error { _, err := top.Get("retention.msx"); return err },
		func() error { _, err := ParseTopic(map[string]string{"retention.msx": "1d"}); return err },
		func() error {
			_, err := top.With(map[string]string{"segment.bytes": "1MiB", "retention.msx": "1d"})
			return err
		},
	} {
		err := op()
		if !errors.Is(err, ErrUnknownKey) || !errors.Is(err, ErrInvalid) {
			t.Fatalf("error %v should match ErrUnknownKey and ErrInvalid", err)
		}
		msg := err.Error()
		if !strings.Contains(msg, `"retention.msx"`) {
			t.Errorf("%q must name the unknown key", msg)
		}
		for _, k := range TopicKeys() {
			if !strings.Contains(msg, k.Name) {
				t.Errorf("%q must list known key %s", msg, k.Name)
			}
		}
	}
}

func TestTopicCrossKeyRules(t *testing.T) {
	cases := []struct {
		overrides map[string]string
		wantKey   string // "" means valid
		reason    string
	}{
		{map[string]string{"retention.ms": "1d", "local.retention.ms": "2d"}, "local.retention.ms", "must not exceed retention.ms (1d)"},
		{map[string]string{"retention.ms": "1d", "local.retention.ms": "1d"}, "", ""},
		{map[string]string{"retention.ms": "1h", "local.retention.ms": "-1"}, "", ""},
		{map[string]string{"retention.ms": "-1", "local.retention.ms": "365d"}, "", ""},
		{map[string]string{"retention.ms": "12h"}, "local.retention.ms", "must not exceed retention.ms (12h)"},
		{map[string]string{"retention.bytes": "1GiB", "local.retention.bytes": "2GiB"}, "local.retention.bytes", "must not exceed retention.bytes (1GiB)"},
		{map[string]string{"retention.bytes": "1GiB", "local.retention.bytes": "1GiB"}, "", ""},
		{map[string]string{"retention.bytes": "-1", "local.retention.bytes": "2GiB"}, "", ""},
		{map[string]string{"local.retention.bytes": "-1", "retention.bytes": "1MiB"}, "", ""},
		{map[string]string{"min.insync.replicas": "2"}, "min.insync.replicas", "must not exceed replication.factor (1)"},
		{map[string]string{"min.insync.replicas": "2", "replication.factor": "3"}, "", ""},
		{map[string]string{"min.insync.replicas": "3", "replication.factor": "3"}, "", ""},
		{map[string]string{"min.compaction.lag.ms": "2h", "max.compaction.lag.ms": "1h"}, "min.compaction.lag.ms", "must not exceed max.compaction.lag.ms (1h)"},
		{map[string]string{"min.compaction.lag.ms": "1h", "max.compaction.lag.ms": "1h"}, "", ""},
		{map[string]string{"min.compaction.lag.ms": "365d", "max.compaction.lag.ms": "-1"}, "", ""},
		// The cold tier compacts: a compacted topic may upload.
		{map[string]string{"cleanup.policy": "compact"}, "", ""},
		{map[string]string{"cleanup.policy": "compact,delete", "remote.storage.enable": "true"}, "", ""},
		{map[string]string{"cleanup.policy": "compact", "remote.storage.enable": "false"}, "", ""},
		{map[string]string{"cleanup.policy": "delete,compact", "remote.storage.enable": "false"}, "", ""},
		{map[string]string{"cleanup.policy": "delete"}, "", ""},
	}
	for _, tc := range cases {
		got, err := ParseTopic(tc.overrides)
		if tc.wantKey == "" {
			if err != nil {
				t.Errorf("ParseTopic(%v) = %v", tc.overrides, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Key != tc.wantKey || !strings.Contains(e.Reason, tc.reason) || !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseTopic(%v) = %+v, %v; want an error on %s: %s", tc.overrides, got, err, tc.wantKey, tc.reason)
			continue
		}
		if !strings.Contains(err.Error(), tc.wantKey) || e.Value == "" || e.Allowed == "" {
			t.Errorf("error %q must name the key, the value and what is allowed", err)
		}
	}
}

func TestTopicValidateRanges(t *testing.T) {
	// Validate catches a bad value set directly on the struct, not through Set.
	top := DefaultTopic()
	top.SegmentBytes = 2 << 30
	err := top.Validate()
	var e *Error
	if !errors.As(err, &e) || e.Key != "segment.bytes" || e.Value != "2GiB" {
		t.Fatalf("Validate() = %v; want segment.bytes error showing 2GiB", err)
	}
	top = DefaultTopic()
	top.FlushPolicy = "Always" // not the canonical spelling
	if err := top.Validate(); err == nil {
		t.Error("Validate accepted a non-canonical flush policy")
	}
}

// sampleTopic differs from the defaults in every key.
func sampleTopic() Topic {
	return Topic{
		RetentionMs:                 90 * 24 * 3600 * 1000,
		RetentionBytes:              1 << 40,
		LocalRetentionMs:            6 * 3600 * 1000,
		LocalRetentionBytes:         10 << 30,
		RemoteStorageEnable:         false,
		RemoteMaxLagMs:              60 * 1000,
		RemoteReadBytesPerSec:       50 << 20,
		RemoteReadGetsPerSec:        200,
		SegmentBytes:                64 << 20,
		SegmentMs:                   30 * 60 * 1000,
		ReplicationFactor:           3,
		MinInsyncReplicas:           2,
		MaxMessageBytes:             4 << 20,
		CompressionType:             CompressionZstd,
		MessageTimestampType:        LogAppendTime,
		MessageTimestampBeforeMaxMs: 30 * 24 * 3600 * 1000,
		MessageTimestampAfterMaxMs:  Unbounded,
		FlushPolicy:                 FlushInterval,
		FlushMs:                     250,
		UncleanLeaderElectionEnable: true,
		CleanupPolicy:               CleanupCompactDelete,
		MinCleanableDirtyRatio:      0.1,
		MinCompactionLagMs:          60 * 1000,
		MaxCompactionLagMs:          7 * 24 * 3600 * 1000,
		DeleteRetentionMs:           3600 * 1000,
	}
}

func TestTopicRoundTrip(t *testing.T) {
	sample := sampleTopic()
	if err := sample.Validate(); err != nil {
		t.Fatal(err)
	}
	def := DefaultTopic()
	m := sample.Map()
	if len(m) != len(TopicKeys()) {
		t.Fatalf("Map has %d keys, want %d", len(m), len(TopicKeys()))
	}
	// Every key differs from its default, so each key reaches its own field.
	for _, k := range TopicKeys() {
		if m[k.Name] == k.Default {
			t.Errorf("sampleTopic does not change %s", k.Name)
		}
		// Set(k, Get(k)) copies exactly one field.
		one := def
		v, _ := sample.Get(k.Name)
		if err := one.Set(k.Name, v); err != nil {
			t.Fatalf("Set(%s, %q) = %v", k.Name, v, err)
		}
		for _, other := range TopicKeys() {
			got, _ := one.Get(other.Name)
			want := other.Default
			if other.Name == k.Name {
				want = v
			}
			if got != want {
				t.Errorf("after Set(%s): %s = %q, want %q", k.Name, other.Name, got, want)
			}
		}
		// The display form parses back to the same canonical value.
		disp := one
		if err := disp.Set(k.Name, k.Display(v)); err != nil {
			t.Errorf("Set(%s, Display(%q) = %q) = %v", k.Name, v, k.Display(v), err)
		} else if got, _ := disp.Get(k.Name); got != v {
			t.Errorf("%s: display form %q parses to %q, want %q", k.Name, k.Display(v), got, v)
		}
	}
	back, err := ParseTopic(m)
	if err != nil || !reflect.DeepEqual(back, sample) {
		t.Fatalf("ParseTopic(Map()) = %+v, %v; want %+v", back, err, sample)
	}
}

func TestTopicWith(t *testing.T) {
	// Keys are applied before the rules between them are checked, so the
	// order of a map does not matter: lowering retention and local retention
	// together works.
	base := DefaultTopic()
	next, err := base.With(map[string]string{"local.retention.ms": "30m", "retention.ms": "1h"})
	if err != nil {
		t.Fatal(err)
	}
	if next.RetentionMs != 3600000 || next.LocalRetentionMs != 1800000 {
		t.Errorf("With gave %+v", next)
	}
	if base != DefaultTopic() {
		t.Error("With changed its receiver")
	}
	// Applying to a non-default base keeps its other settings.
	custom := sampleTopic()
	next, err = custom.With(map[string]string{"flush.policy": "always"})
	if err != nil || next.FlushPolicy != FlushAlways || next.ReplicationFactor != 3 {
		t.Errorf("With = %+v, %v", next, err)
	}
	// Errors are deterministic: the first key in TopicKeys order is reported.
	for range 20 {
		_, err := base.With(map[string]string{"segment.ms": "1", "retention.ms": "x", "flush.ms": "0"})
		var e *Error
		if !errors.As(err, &e) || e.Key != "retention.ms" {
			t.Fatalf("With = %v; want the retention.ms error", err)
		}
	}
}

func TestKeyInfoDisplay(t *testing.T) {
	cases := []struct{ key, value, want string }{
		{"retention.ms", "604800000", "7d"},
		{"retention.ms", "-1", "-1"},
		{"segment.bytes", "134217728", "128MiB"},
		{"max.message.bytes", "1048588", "1048588"},
		{"flush.policy", "always", "always"},
		{"replication.factor", "3", "3"},
		{"retention.ms", "garbage", "garbage"},
	}
	for _, tc := range cases {
		if got := keyInfo(t, tc.key).Display(tc.value); got != tc.want {
			t.Errorf("%s Display(%q) = %q, want %q", tc.key, tc.value, got, tc.want)
		}
	}
}

func TestTopicKeysStable(t *testing.T) {
	a, b := TopicKeys(), TopicKeys()
	if !reflect.DeepEqual(a, b) {
		t.Fatal("TopicKeys changes between calls")
	}
	a[0].Name = "mutated"
	if TopicKeys()[0].Name != "retention.ms" {
		t.Fatal("TopicKeys returns shared state")
	}
	seen := map[string]bool{}
	for _, k := range a[1:] {
		if seen[k.Name] {
			t.Errorf("duplicate key %s", k.Name)
		}
		seen[k.Name] = true
	}
	// Every Topic field is reached by exactly one key: the sample differs
	// from the defaults in every field and Map shows every difference.
	if n := reflect.TypeFor[Topic]().NumField(); n != len(TopicKeys()) {
		t.Errorf("Topic has %d fields but %d keys", n, len(TopicKeys()))
	}
}

func TestTopicCleanupPolicyHelpers(t *testing.T) {
	cases := []struct {
		policy            string
		compacted, delete bool
	}{
		{"delete", false, true},
		{"compact", true, false},
		{"compact,delete", true, true},
	}
	for _, tc := range cases {
		top, err := ParseTopic(map[string]string{"cleanup.policy": tc.policy, "remote.storage.enable": "false"})
		if err != nil {
			t.Fatal(err)
		}
		if top.Compacted() != tc.compacted || top.Deletes() != tc.delete {
			t.Errorf("%s: Compacted %v Deletes %v, want %v %v", tc.policy, top.Compacted(), top.Deletes(), tc.compacted, tc.delete)
		}
	}
	if d := DefaultTopic(); d.Compacted() || !d.Deletes() {
		t.Error("the default topic must delete by retention and not compact")
	}
	// A value set directly on the struct outside the three is caught.
	top := DefaultTopic()
	top.CleanupPolicy = "delete,compact"
	var e *Error
	if err := top.Validate(); !errors.As(err, &e) || e.Key != "cleanup.policy" {
		t.Errorf("Validate() = %v; want a cleanup.policy error", err)
	}
}
