package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// yamlLeaves returns, for every setting reachable from YAML, its path and
// the address of its field in b, by reflection over the yaml tags. Structs
// are sections; every other type (including Duration, ByteSize, lists and
// maps) is one setting.
func yamlLeaves(t *testing.T, v reflect.Value, prefix string, out map[string]uintptr) {
	t.Helper()
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		tag, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if tag == "" || tag == "-" {
			t.Errorf("field %s%s has no yaml tag", prefix, sf.Name)
			continue
		}
		path := prefix + tag
		fv := v.Field(i)
		if fv.Kind() == reflect.Struct {
			yamlLeaves(t, fv, path+".", out)
			continue
		}
		out[path] = fv.Addr().Pointer()
	}
}

// TestFieldTableMatchesStruct: every setting YAML can reach is in the
// table, every table row is a real setting, and each row's accessor points
// at the field its path names (a copy-paste slip in the table would make
// --raft-listen set listen).
func TestFieldTableMatchesStruct(t *testing.T) {
	var b Broker
	want := map[string]uintptr{}
	yamlLeaves(t, reflect.ValueOf(&b).Elem(), "", want)
	fields := brokerFields()
	got := map[string]bool{}
	for _, f := range fields {
		if got[f.path] {
			t.Errorf("table lists %s twice", f.path)
		}
		got[f.path] = true
		addr, ok := want[f.path]
		if !ok {
			t.Errorf("table row %s is not a YAML path of Broker", f.path)
			continue
		}
		if p := reflect.ValueOf(f.ptr(&b)).Pointer(); p != addr {
			t.Errorf("table row %s points at another field", f.path)
		}
	}
	for path := range want {
		if !got[path] {
			t.Errorf("Broker field %s is missing from the table: no env variable, flag or docs", path)
		}
	}
}

func TestFieldNames(t *testing.T) {
	envs, flags := EnvNames(), FlagNames()
	fields := BrokerFields()
	if len(envs) != len(fields) || len(flags) != len(fields) {
		t.Fatalf("%d env names, %d flag names, %d fields", len(envs), len(flags), len(fields))
	}
	for i, f := range fields {
		wantEnv := "STRATA_" + strings.ToUpper(strings.NewReplacer(".", "_").Replace(f.Path))
		wantFlag := strings.NewReplacer(".", "-", "_", "-").Replace(f.Path)
		if f.Env != wantEnv || envs[i] != wantEnv {
			t.Errorf("%s: env %s, want %s", f.Path, f.Env, wantEnv)
		}
		if f.Flag != "--"+wantFlag || flags[i] != wantFlag {
			t.Errorf("%s: flag %s, want --%s", f.Path, f.Flag, wantFlag)
		}
		if f.Help == "" || f.Type == "" {
			t.Errorf("%s: missing help or type", f.Path)
		}
		if slices.Contains(envs[:i], envs[i]) || slices.Contains(flags[:i], flags[i]) {
			t.Errorf("%s: env or flag name collides with an earlier setting", f.Path)
		}
	}
	for _, spot := range []string{"STRATA_NODE_ID", "STRATA_OBJECT_STORE_TYPE", "STRATA_GOSSIP_JOIN", "STRATA_TOPIC_DEFAULTS"} {
		if !slices.Contains(envs, spot) {
			t.Errorf("EnvNames lacks %s", spot)
		}
	}
	for _, spot := range []string{"node-id", "data-dir", "listen", "object-store-type", "gossip-join"} {
		if !slices.Contains(flags, spot) {
			t.Errorf("FlagNames lacks %s", spot)
		}
	}
}

// TestFieldSetGetRoundTrip: what get writes, set reads back, for a broker
// with every setting changed from its default (the example file), so env,
// flags and docs agree on each value's string form.
func TestFieldSetGetRoundTrip(t *testing.T) {
	sample := sampleBroker()
	def := DefaultBroker()
	for _, f := range brokerFields() {
		s := f.get(&sample)
		if s == f.get(&def) {
			t.Errorf("sampleBroker does not change %s", f.path)
		}
		into := def
		if err := f.set(&into, s); err != nil {
			t.Errorf("%s: set(get()) = %v", f.path, err)
			continue
		}
		if !reflect.DeepEqual(reflect.ValueOf(f.ptr(&into)).Elem().Interface(), reflect.ValueOf(f.ptr(&sample)).Elem().Interface()) {
			t.Errorf("%s: %q does not read back", f.path, s)
		}
	}
	if err := sample.Validate(); err != nil {
		t.Fatalf("sampleBroker is invalid: %v", err)
	}
}

// sampleBroker differs from DefaultBroker in every setting.
func sampleBroker() Broker {
	return Broker{
		NodeID:             7,
		DataDir:            "/var/lib/strata",
		Listen:             "0.0.0.0:9400",
		Advertise:          "broker7:9400",
		ReadReplica:        true,
		ReadReplicaRefresh: Duration(10e9),
		Raft:               Raft{Listen: "0.0.0.0:9401", Advertise: "broker7:9401"},
		Gossip: Gossip{
			Listen:          "0.0.0.0:9402",
			Advertise:       "broker7:9402",
			Join:            []string{"broker1:9402", "broker2:9402"},
			SecretKey:       "AAAAAAAAAAAAAAAAAAAAAA==",
			BootstrapExpect: 3,
			Profile:         "local",
			Rack:            "eu-west-1a",
		},
		Admin: Admin{Listen: "0.0.0.0:9403", Pprof: true},
		Kafka: Kafka{Listen: "0.0.0.0:9092", Advertise: "broker9:9092", SASLMechanisms: []string{"SCRAM-SHA-512", "PLAIN"}},
		Security: Security{
			TLS:            TLSFiles{CAFile: "/etc/strata/ca.pem", CertFile: "/etc/strata/broker-7.pem", KeyFile: "/etc/strata/broker-7-key.pem"},
			ClusterName:    "prod",
			TokensFile:     "/etc/strata/tokens",
			Superusers:     []string{"User:admin"},
			AllowPlaintext: true,
		},
		ObjectStore: ObjectStore{
			Type:         ObjectStoreS3,
			Path:         "/srv/objects",
			Bucket:       "strata-prod",
			Endpoint:     "https://s3.example.com",
			Region:       "eu-west-1",
			PathStyle:    false,
			AccessKey:    "AKIA",
			SecretKey:    "shh",
			Prefix:       "prod/strata",
			CreateBucket: true,
		},
		Storage: Storage{MinFreeBytes: 1 << 30},
		Tiering: Tiering{
			ChunkBytes:          8 << 20,
			CacheBytes:          1 << 30,
			UploadParallelism:   8,
			MaxUnuploadedBytes:  10 << 30,
			OrphanGrace:         Duration(36e11),
			RetiredGrace:        Duration(6e11),
			ColdReadMaxGets:     32,
			ColdReadBytesPerSec: 100 << 20,
			ColdReadGetsPerSec:  500,
		},
		Replica:        Replica{LagTimeMax: Duration(10e9)},
		Cleaner:        Cleaner{IOMaxBytesPerSecond: 10 << 20, DedupeBufferSize: 16 << 20, Backoff: Duration(5e9)},
		Controller:     Controller{DeadBrokerTimeout: Duration(36e11)},
		Limits:         Limits{MaxPartitionsPerBroker: 2000, MaxFetchBytes: 4 << 20, MaxGroups: 500},
		Quotas:         Quotas{ProduceBytesPerSec: 10 << 20, FetchBytesPerSec: 20 << 20},
		TopicOverrides: map[string]string{"retention.ms": "30d", "segment.bytes": "64MiB"},
		Log:            Logging{Level: "debug", Format: "json"},
	}
}

func TestParseListAndMap(t *testing.T) {
	lists := []struct {
		in   string
		want []string
	}{
		{"a:1,b:2", []string{"a:1", "b:2"}},
		{" a:1 , b:2 ,", []string{"a:1", "b:2"}},
		{"", nil},
		{" , ", nil},
	}
	for _, tc := range lists {
		if got, err := parseList(tc.in); err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseList(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	maps := []struct {
		in   string
		want map[string]string
	}{
		{"retention.ms=30d,segment.bytes=64MiB", map[string]string{"retention.ms": "30d", "segment.bytes": "64MiB"}},
		{" retention.ms = 30d , ", map[string]string{"retention.ms": "30d"}},
		{"a=b=c", map[string]string{"a": "b=c"}},
		{"", map[string]string{}},
	}
	for _, tc := range maps {
		got, err := parseMap(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseMap(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if back, _ := parseMap(formatMap(got)); !reflect.DeepEqual(back, got) {
			t.Errorf("formatMap(%q) = %q does not read back", got, formatMap(got))
		}
	}
	for _, in := range []string{"retention.ms", "=1d", "a=1,a=2", "a=1,b"} {
		_, err := parseMap(in)
		checkParseError(t, err, in, "")
	}
}

func TestChanged(t *testing.T) {
	a := DefaultBroker()
	if got := Changed(a, a); got != nil {
		t.Fatalf("Changed of equal settings: %v", got)
	}
	b := a
	b.Tiering.ColdReadBytesPerSec = 50 << 20
	b.Gossip.Join = []string{"b:1"}
	b.ObjectStore.SecretKey = "s"
	want := []string{"gossip.join", "object_store.secret_key", "tiering.cold_read_bytes_per_sec"}
	if got := Changed(a, b); !slices.Equal(got, want) {
		t.Fatalf("Changed = %v, want %v", got, want)
	}
}
