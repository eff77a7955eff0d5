package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// envMap is an env lookup function over a map, standing in for os.LookupEnv.
func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// writeFile writes a temporary config file and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "strata.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantError asserts err is an *Error about key from source whose message
// says so, and returns it.
func wantError(t *testing.T, err error, key, source string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v (%T); want an *Error on %s", err, err, key)
	}
	if e.Key != key || e.Source != source {
		t.Fatalf("error %q has key %q source %q; want key %q source %q", err, e.Key, e.Source, key, source)
	}
	if source != "" && !strings.Contains(err.Error(), "(from "+source+")") {
		t.Errorf("message %q does not name the source", err)
	}
	return e
}

func TestLoadDefaults(t *testing.T) {
	b, err := Load("", nil, nil)
	if err != nil || !reflect.DeepEqual(b, DefaultBroker()) {
		t.Fatalf("Load with no sources = %+v, %v; want the defaults", b, err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), nil, nil)
	if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "config: ") {
		t.Fatalf("Load of a missing file = %v; want a config: error matching fs.ErrNotExist", err)
	}
}

// TestExampleFile: the documented example loads, names every setting (so
// the docs cannot fall behind the code) and mentions every topic key.
func TestExampleFile(t *testing.T) {
	const path = "strata.example.yaml"
	b, err := Load(path, nil, nil)
	if err != nil {
		t.Fatalf("Load(%s) = %v", path, err)
	}
	top, err := b.TopicDefaults()
	if err != nil || top != DefaultTopic() {
		t.Errorf("the example's topic_defaults should restate the defaults: %+v, %v", top, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b2 := DefaultBroker()
	src := sources{}
	if err := decodeFile(data, path, &b2, src); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for _, f := range brokerFields() {
		source, ok := src[f.path]
		if !ok {
			t.Errorf("%s: the example does not set %s", path, f.path)
			continue
		}
		// The line above a setting is a comment, or the line of the
		// setting before it in a commented group.
		_, after, _ := strings.Cut(source, " line ")
		n, err := strconv.Atoi(after)
		if err != nil {
			t.Fatalf("source %q: %v", source, err)
		}
		if prev := strings.TrimSpace(lines[n-2]); !strings.HasPrefix(prev, "#") && !strings.Contains(prev, ":") {
			t.Errorf("%s line %d: %s has no comment above it", path, n, f.path)
		}
	}
	for _, k := range TopicKeys() {
		if !strings.Contains(string(data), k.Name) {
			t.Errorf("%s does not mention topic key %s", path, k.Name)
		}
	}
	// Every value is the default, so that a copy changes only what its
	// owner edits (topic_defaults restates the topic defaults, checked
	// above).
	def := DefaultBroker()
	for _, f := range brokerFields() {
		if f.path == "topic_defaults" {
			continue
		}
		if got, want := f.get(&b), f.get(&def); got != want {
			t.Errorf("%s sets %s to %q; the default is %q", path, f.path, got, want)
		}
	}
}

func TestLoadPrecedence(t *testing.T) {
	path := writeFile(t, `
node_id: 2
data_dir: /from/file
listen: 127.0.0.1:8400
gossip:
  join: [file1:7402]
  rack: file-rack
log:
  level: warn
`)
	env := envMap(map[string]string{
		"STRATA_NODE_ID":      "3",
		"STRATA_LISTEN":       "127.0.0.1:9400",
		"STRATA_GOSSIP_JOIN":  "env1:7402, env2:7402",
		"STRATA_LOG_FORMAT":   "json",
		"STRATA_KAFKA_LISTEN": "127.0.0.1:9092",
	})
	flags := newFlags(t, "--node-id=4", "--gossip-rack", "flag-rack", "--kafka-advertise", "localhost:9092")
	b, err := Load(path, env, flags)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultBroker()
	want.NodeID = 4                                       // file < env < flag
	want.DataDir = "/from/file"                           // file only
	want.Listen = "127.0.0.1:9400"                        // file < env
	want.Gossip.Join = []string{"env1:7402", "env2:7402"} // env replaces the file's list
	want.Gossip.Rack = "flag-rack"                        // file < flag
	want.Log.Level = "warn"                               // file only
	want.Log.Format = "json"                              // env only
	want.Kafka.Listen = "127.0.0.1:9092"                  // env only
	want.Kafka.Advertise = "localhost:9092"               // flag only
	if !reflect.DeepEqual(b, want) {
		t.Errorf("Load =\n%+v\nwant\n%+v", b, want)
	}
}

func TestLoadEnvListsAndMaps(t *testing.T) {
	path := writeFile(t, "gossip:\n  join: [a:7402]\ntopic_defaults:\n  retention.ms: 30d\n")
	b, err := Load(path, envMap(map[string]string{
		"STRATA_GOSSIP_JOIN":    "",
		"STRATA_TOPIC_DEFAULTS": "segment.bytes=64MiB, flush.policy=interval",
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Gossip.Join) != 0 {
		t.Errorf("an empty STRATA_GOSSIP_JOIN should clear the list, got %q", b.Gossip.Join)
	}
	want := map[string]string{"segment.bytes": "64MiB", "flush.policy": "interval"}
	if !reflect.DeepEqual(b.TopicOverrides, want) {
		t.Errorf("topic_defaults = %v, want %v (env replaces the file's map)", b.TopicOverrides, want)
	}
	top, err := b.TopicDefaults()
	if err != nil || top.SegmentBytes != 64<<20 || top.FlushPolicy != FlushInterval || top.RetentionMs != DefaultTopic().RetentionMs {
		t.Errorf("TopicDefaults() = %+v, %v", top, err)
	}

	_, err = Load("", envMap(map[string]string{"STRATA_TOPIC_DEFAULTS": "retention.ms"}), nil)
	wantError(t, err, "topic_defaults", "STRATA_TOPIC_DEFAULTS")
	_, err = Load("", envMap(map[string]string{"STRATA_TOPIC_DEFAULTS": "retention.ms=1d,retention.ms=2d"}), nil)
	wantError(t, err, "topic_defaults", "STRATA_TOPIC_DEFAULTS")
	_, err = Load("", envMap(map[string]string{"STRATA_TOPIC_DEFAULTS": "retention.ms=eternal"}), nil)
	wantError(t, err, "topic_defaults.retention.ms", "STRATA_TOPIC_DEFAULTS")
}

func TestLoadErrorSources(t *testing.T) {
	// A parse error names the variable or flag.
	_, err := Load("", envMap(map[string]string{"STRATA_NODE_ID": "abc"}), nil)
	e := wantError(t, err, "node_id", "STRATA_NODE_ID")
	if e.Value != "abc" || !strings.Contains(err.Error(), `invalid value "abc" for node_id`) {
		t.Errorf("message %q", err)
	}
	_, err = Load("", envMap(map[string]string{"STRATA_TIERING_CHUNK_BYTES": "4 megs"}), nil)
	wantError(t, err, "tiering.chunk_bytes", "STRATA_TIERING_CHUNK_BYTES")
	_, err = Load("", envMap(map[string]string{"STRATA_OBJECT_STORE_PATH_STYLE": "yes"}), nil)
	wantError(t, err, "object_store.path_style", "STRATA_OBJECT_STORE_PATH_STYLE")

	// A rule checked after merging still names where the value came from.
	_, err = Load("", envMap(map[string]string{"STRATA_NODE_ID": "-1"}), nil)
	wantError(t, err, "node_id", "STRATA_NODE_ID")
	_, err = Load("", nil, newFlags(t, "--node-id", "-1"))
	wantError(t, err, "node_id", "--node-id")

	path := writeFile(t, "# comment\ndata_dir: /x\nnode_id: -1\n")
	_, err = Load(path, nil, nil)
	wantError(t, err, "node_id", "file "+path+" line 3")

	// A topic default names its own line in the file.
	path = writeFile(t, "topic_defaults:\n  segment.bytes: 64MiB\n  retention.ms: 1h\n")
	_, err = Load(path, nil, nil)
	wantError(t, err, "topic_defaults.local.retention.ms", "file "+path+" line 1")
	path = writeFile(t, "topic_defaults:\n  segment.bytes: 64MiB\n  retention.ms: soon\n")
	_, err = Load(path, nil, nil)
	wantError(t, err, "topic_defaults.retention.ms", "file "+path+" line 3")

	// A rule between settings names the source of the one it reports.
	_, err = Load("", envMap(map[string]string{"STRATA_OBJECT_STORE_TYPE": "s3", "STRATA_OBJECT_STORE_BUCKET": "Bad_Bucket"}), nil)
	wantError(t, err, "object_store.bucket", "STRATA_OBJECT_STORE_BUCKET")
	// ... and none when it is the default that breaks it.
	_, err = Load("", envMap(map[string]string{"STRATA_OBJECT_STORE_TYPE": "s3"}), nil)
	wantError(t, err, "object_store.bucket", "")
}

func TestLoadAllOrNothing(t *testing.T) {
	b, err := Load("", envMap(map[string]string{"STRATA_DATA_DIR": "/ok", "STRATA_NODE_ID": "x"}), nil)
	if err == nil || !reflect.DeepEqual(b, Broker{}) {
		t.Fatalf("Load = %+v, %v; want a zero Broker and an error", b, err)
	}
}

func TestLoadUnknownEnv(t *testing.T) {
	// An unknown STRATA_ variable changes nothing and is no error...
	b, err := Load("", envMap(map[string]string{"STRATA_NODEID": "5", "STRATA_OBJECT_STORE": "s3"}), nil)
	if err != nil || !reflect.DeepEqual(b, DefaultBroker()) {
		t.Fatalf("Load = %+v, %v; want the defaults", b, err)
	}
	// ... but UnknownEnv lets the caller warn about it.
	got := UnknownEnv([]string{"STRATA_NODEID=5", "STRATA_NODE_ID=1", "PATH=/bin", "STRATA_OBJECT_STORE=s3", "STRATA_NODEID=6", "STRATAX=1"})
	if want := []string{"STRATA_NODEID", "STRATA_OBJECT_STORE"}; !reflect.DeepEqual(got, want) {
		t.Errorf("UnknownEnv = %q, want %q", got, want)
	}
}

func TestLoadStrictYAML(t *testing.T) {
	cases := []struct {
		name, yaml   string
		key          string
		line         int
		unknown      bool
		allowedHints []string
	}{
		{"unknown top-level key", "node_id: 1\nnodeid: 2\n", "nodeid", 2, true, []string{"node_id", "object_store"}},
		{"unknown nested key", "object_store:\n  type: s3\n  buckt: x\n", "object_store.buckt", 3, true, []string{"object_store.bucket"}},
		{"kafka name in broker file", "log.level: info\n", "log.level", 1, true, nil},
		{"section as scalar", "raft: 127.0.0.1:7401\n", "raft", 1, false, []string{"mapping"}},
		{"setting as mapping", "listen: {host: x}\n", "listen", 1, false, []string{"string"}},
		{"bad int", "node_id: abc\n", "node_id", 1, false, []string{"integer"}},
		{"quoted int", "node_id: \"3\"\n", "node_id", 1, false, []string{"integer"}},
		{"null value", "node_id:\n", "node_id", 1, false, []string{"integer"}},
		{"yaml 1.1 bool", "object_store:\n  path_style: yes\n", "object_store.path_style", 2, false, []string{"true or false"}},
		{"bad size", "tiering:\n  chunk_bytes: 4 megs\n", "tiering.chunk_bytes", 2, false, []string{"512MiB"}},
		{"bad duration", "replica:\n  lag_time_max: 30 seconds\n", "replica.lag_time_max", 2, false, []string{"30m"}},
		{"list as scalar", "gossip:\n  join: a:7402\n", "gossip.join", 2, false, []string{"list"}},
		{"nested map in topic defaults", "topic_defaults:\n  retention: {ms: 1}\n", "topic_defaults", 2, false, []string{"mapping of topic keys"}},
		{"duplicate key", "node_id: 1\nnode_id: 2\n", "node_id", 2, false, []string{"once"}},
		{"top level list", "- node_id: 1\n", "(top level)", 1, false, []string{"mapping"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.yaml)
			b, err := Load(path, nil, nil)
			if err == nil {
				t.Fatalf("Load accepted %q: %+v", tc.yaml, b)
			}
			e := wantError(t, err, tc.key, "file "+path+" line "+itoa(tc.line))
			if errors.Is(err, ErrUnknownKey) != tc.unknown {
				t.Errorf("errors.Is(%v, ErrUnknownKey) = %v, want %v", err, !tc.unknown, tc.unknown)
			}
			for _, hint := range tc.allowedHints {
				if !strings.Contains(e.Allowed, hint) {
					t.Errorf("Allowed %q should mention %q", e.Allowed, hint)
				}
			}
		})
	}
}

func TestLoadYAMLForms(t *testing.T) {
	path := writeFile(t, `
node_id: 0
listen: "[::1]:7400"
gossip: {join: [a:1, "b:2"], secret_key: "AAAAAAAAAAAAAAAAAAAAAA=="}
tiering:
  chunk_bytes: 1048576        # plain bytes
  cache_bytes: 1 GiB
replica:
  lag_time_max: 45000         # plain milliseconds, as Kafka writes them
controller:
  dead_broker_timeout: 1h30m
topic_defaults:
  retention.ms: 604800000
  remote.storage.enable: false
  replication.factor: 3
  min.insync.replicas: 2
defaults: &fs
  type: fs
`)
	// The anchor above is an unknown key; check anchors through a valid file.
	if _, err := Load(path, nil, nil); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Load = %v; want unknown key defaults", err)
	}
	data, _ := os.ReadFile(path)
	path = writeFile(t, strings.Split(string(data), "defaults: &fs")[0]+"object_store: &store\n  type: none\n")
	b, err := Load(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.NodeID != 0 || b.Listen != "[::1]:7400" || len(b.Gossip.Join) != 2 ||
		b.Tiering.ChunkBytes != 1<<20 || b.Tiering.CacheBytes != 1<<30 ||
		b.Replica.LagTimeMax.String() != "45s" || b.Controller.DeadBrokerTimeout.String() != "1h30m" ||
		b.ObjectStore.Type != ObjectStoreNone {
		t.Errorf("Load = %+v", b)
	}
	top, err := b.TopicDefaults()
	if err != nil || top.RemoteStorageEnable || top.ReplicationFactor != 3 || top.MinInsyncReplicas != 2 {
		t.Errorf("TopicDefaults() = %+v, %v", top, err)
	}
}

func TestLoadOddFiles(t *testing.T) {
	for _, content := range []string{"", "# only a comment\n", "---\n"} {
		b, err := Load(writeFile(t, content), nil, nil)
		if err != nil || !reflect.DeepEqual(b, DefaultBroker()) {
			t.Errorf("Load(%q) = %+v, %v; want the defaults", content, b, err)
		}
	}
	for _, content := range []string{"node_id: [1\n", "node_id: 1\n---\nnode_id: 2\n", "\tnode_id: 1\n"} {
		_, err := Load(writeFile(t, content), nil, nil)
		if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "config: ") {
			t.Errorf("Load(%q) = %v; want a config error matching ErrInvalid", content, err)
		}
	}
}

// TestDumpAndReload: a Broker written out as YAML (durations and sizes in
// their human forms) loads back to the same Broker.
func TestDumpAndReload(t *testing.T) {
	sample := sampleBroker()
	data, err := yaml.Marshal(sample)
	if err != nil {
		t.Fatal(err)
	}
	for _, human := range []string{"chunk_bytes: 8MiB", "lag_time_max: 10s", "dead_broker_timeout: 1h"} {
		if !strings.Contains(string(data), human) {
			t.Errorf("dump lacks %q:\n%s", human, data)
		}
	}
	b, err := Load(writeFile(t, string(data)), nil, nil)
	if err != nil || !reflect.DeepEqual(b, sample) {
		t.Fatalf("reload = %+v, %v; want %+v", b, err, sample)
	}
}

func TestLoadAliases(t *testing.T) {
	path := writeFile(t, "gossip:\n  join: &seeds [a:7402, b:7402]\n  rack: &r eu-1a\nobject_store: {prefix: *r}\n")
	b, err := Load(path, nil, nil)
	if err != nil || b.ObjectStore.Prefix != "eu-1a" || len(b.Gossip.Join) != 2 {
		t.Fatalf("Load = %+v, %v", b, err)
	}
}
