package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultBroker(t *testing.T) {
	b := DefaultBroker()
	if err := b.Validate(); err != nil {
		t.Fatalf("DefaultBroker().Validate() = %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"node_id", b.NodeID, int32(1)},
		{"data_dir", b.DataDir, "./data"},
		{"listen", b.Listen, "127.0.0.1:7400"},
		{"raft.listen", b.Raft.Listen, "127.0.0.1:7401"},
		{"gossip.listen", b.Gossip.Listen, "127.0.0.1:7402"},
		{"gossip.bootstrap_expect", b.Gossip.BootstrapExpect, 1},
		{"admin.listen", b.Admin.Listen, "127.0.0.1:7403"},
		{"object_store.type", b.ObjectStore.Type, "fs"},
		{"object_store.region", b.ObjectStore.Region, "us-east-1"},
		{"object_store.path_style", b.ObjectStore.PathStyle, true},
		{"tiering.chunk_bytes", b.Tiering.ChunkBytes, ByteSize(4 << 20)},
		{"tiering.cache_bytes", b.Tiering.CacheBytes, ByteSize(256 << 20)},
		{"tiering.upload_parallelism", b.Tiering.UploadParallelism, 4},
		{"tiering.max_unuploaded_bytes", b.Tiering.MaxUnuploadedBytes, ByteSize(1 << 30)},
		{"replica.lag_time_max", b.Replica.LagTimeMax, Duration(30 * time.Second)},
		{"controller.dead_broker_timeout", b.Controller.DeadBrokerTimeout, Duration(5 * time.Minute)},
		{"limits.max_partitions_per_broker", b.Limits.MaxPartitionsPerBroker, 20000},
		{"storage.shared_sync_after", b.Storage.SharedSyncAfter, 32},
		{"limits.max_fetch_bytes", b.Limits.MaxFetchBytes, ByteSize(8 << 20)},
		{"limits.max_groups", b.Limits.MaxGroups, 10000},
		{"quotas.produce_bytes_per_sec", b.Quotas.ProduceBytesPerSec, ByteSize(0)},
		{"quotas.fetch_bytes_per_sec", b.Quotas.FetchBytesPerSec, ByteSize(0)},
		{"read_replica", b.ReadReplica, false},
		{"read_replica_refresh", b.ReadReplicaRefresh, Duration(3 * time.Second)},
		{"log.level", b.Log.Level, "info"},
		{"log.format", b.Log.Format, "text"},
		{"AdvertiseAddr", b.AdvertiseAddr(), "127.0.0.1:7400"},
		{"Raft.AdvertiseAddr", b.Raft.AdvertiseAddr(), "127.0.0.1:7401"},
		{"kafka.listen", b.Kafka.Listen, ""},
		{"Kafka.AdvertiseAddr", b.Kafka.AdvertiseAddr(), ""},
		{"ObjectStorePath", b.ObjectStorePath(), filepath.Join("data", "objects")},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	top, err := b.TopicDefaults()
	if err != nil || top != DefaultTopic() {
		t.Errorf("TopicDefaults() = %+v, %v; want DefaultTopic()", top, err)
	}
}

func TestBrokerValidate(t *testing.T) {
	key32 := base64.StdEncoding.EncodeToString(make([]byte, 32))
	s3 := func(b *Broker) {
		b.ObjectStore.Type = ObjectStoreS3
		b.ObjectStore.Bucket = "strata-dev"
		b.ObjectStore.Endpoint = "http://127.0.0.1:9000"
	}
	cases := []struct {
		name    string
		mutate  func(b *Broker)
		wantKey string // "" means valid
		reason  string
	}{
		{"node id zero", func(b *Broker) { b.NodeID = 0 }, "", ""},
		{"negative node id", func(b *Broker) { b.NodeID = -1 }, "node_id", ""},
		{"no data dir", func(b *Broker) { b.DataDir = " " }, "data_dir", "required"},
		{"listen not host:port", func(b *Broker) { b.Listen = "7400" }, "listen", "not host:port"},
		{"listen bad port", func(b *Broker) { b.Listen = "127.0.0.1:http" }, "listen", "port must be a number"},
		{"listen port too big", func(b *Broker) { b.Listen = "127.0.0.1:70000" }, "listen", "port must be a number"},
		{"wildcard listen without advertise", func(b *Broker) { b.Listen = "0.0.0.0:7400" }, "advertise", "set advertise"},
		{"empty host listen without advertise", func(b *Broker) { b.Listen = ":7400" }, "advertise", "set advertise"},
		{"wildcard listen with advertise", func(b *Broker) {
			b.Listen = "0.0.0.0:7400"
			b.Advertise = "broker1:7400"
			b.Security.AllowPlaintext = true
		}, "", ""},
		{"ipv6 wildcard listen with advertise", func(b *Broker) {
			b.Listen = "[::]:7400"
			b.Advertise = "[fd00::1]:7400"
			b.Security.AllowPlaintext = true
		}, "", ""},
		{"plaintext beyond loopback", func(b *Broker) { b.Listen = "0.0.0.0:7400"; b.Advertise = "broker1:7400" }, "listen", "set security.tls"},
		{"plaintext admin beyond loopback", func(b *Broker) { b.Admin.Listen = "10.0.0.1:7403" }, "admin.listen", "set security.tls"},
		{"one TLS file", func(b *Broker) { b.Security.TLS.CertFile = "b.pem" }, "security.tls.ca_file", "together"},
		{"TLS without a gossip key", func(b *Broker) {
			b.Security.TLS = TLSFiles{CAFile: "ca.pem", CertFile: "b.pem", KeyFile: "k.pem"}
		}, "gossip.secret_key", "encrypted too"},
		{"TLS beyond loopback", func(b *Broker) {
			b.Security.TLS = TLSFiles{CAFile: "ca.pem", CertFile: "b.pem", KeyFile: "k.pem"}
			b.Gossip.SecretKey = "AAAAAAAAAAAAAAAAAAAAAA=="
			b.Listen = "0.0.0.0:7400"
			b.Advertise = "broker1:7400"
		}, "", ""},
		{"tokens without TLS", func(b *Broker) { b.Security.TokensFile = "tokens" }, "security.tokens_file", "plaintext"},
		{"bad superuser", func(b *Broker) { b.Security.Superusers = []string{"admin"} }, "security.superusers", ""},
		{"wildcard advertise", func(b *Broker) { b.Advertise = "0.0.0.0:7400" }, "advertise", "wildcard"},
		{"advertise port 0", func(b *Broker) { b.Advertise = "broker1:0" }, "advertise", "not 0"},
		{"raft wildcard without advertise", func(b *Broker) { b.Raft.Listen = "0.0.0.0:7401" }, "raft.advertise", "set raft.advertise"},
		{"gossip wildcard is fine", func(b *Broker) { b.Gossip.Listen = "0.0.0.0:7402"; b.Security.AllowPlaintext = true }, "", ""},
		{"gossip advertise bad", func(b *Broker) { b.Gossip.Advertise = "broker1" }, "gossip.advertise", "not host:port"},
		{"port conflict", func(b *Broker) { b.Raft.Listen = "127.0.0.1:7400" }, "raft.listen", "conflicts with listen"},
		{"port conflict with wildcard", func(b *Broker) { b.Admin.Listen = "0.0.0.0:7402" }, "admin.listen", "conflicts with gossip.listen"},
		{"same port other host", func(b *Broker) { b.Admin.Listen = "127.0.0.2:7400" }, "", ""},
		{"ephemeral ports never conflict", func(b *Broker) {
			b.Listen, b.Raft.Listen, b.Gossip.Listen, b.Admin.Listen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
		}, "", ""},
		{"admin disabled", func(b *Broker) { b.Admin.Listen = "" }, "", ""},
		{"kafka on loopback", func(b *Broker) { b.Kafka.Listen = "127.0.0.1:9092" }, "", ""},
		{"kafka plaintext beyond loopback", func(b *Broker) {
			b.Kafka.Listen = "10.0.0.1:9092"
		}, "kafka.listen", "set security.tls"},
		{"kafka beyond loopback, plaintext allowed", func(b *Broker) {
			b.Kafka.Listen = "10.0.0.1:9092"
			b.Security.AllowPlaintext = true
		}, "", ""},
		{"kafka wildcard without advertise", func(b *Broker) {
			b.Kafka.Listen = "0.0.0.0:9092"
			b.Security.AllowPlaintext = true
		}, "kafka.advertise", "set kafka.advertise"},
		{"kafka advertise bad", func(b *Broker) {
			b.Kafka.Listen = "127.0.0.1:9092"
			b.Kafka.Advertise = "broker1"
		}, "kafka.advertise", "not host:port"},
		{"kafka port conflict", func(b *Broker) { b.Kafka.Listen = "127.0.0.1:7400" }, "kafka.listen", "conflicts with listen"},
		{"kafka listen bad", func(b *Broker) { b.Kafka.Listen = "9092" }, "kafka.listen", "not host:port"},
		{"raft listen required", func(b *Broker) { b.Raft.Listen = "" }, "raft.listen", "not host:port"},
		{"join ok", func(b *Broker) { b.Gossip.Join = []string{"broker1:7402", "10.0.0.2:7402"} }, "", ""},
		{"join without port", func(b *Broker) { b.Gossip.Join = []string{"broker1:7402", "broker2"} }, "gossip.join", "not host:port"},
		{"secret key ok", func(b *Broker) { b.Gossip.SecretKey = Secret(key32) }, "", ""},
		{"secret key not base64", func(b *Broker) { b.Gossip.SecretKey = "not base64!" }, "gossip.secret_key", ""},
		{"secret key wrong length", func(b *Broker) {
			b.Gossip.SecretKey = Secret(base64.StdEncoding.EncodeToString(make([]byte, 20)))
		}, "gossip.secret_key", ""},
		{"bootstrap expect 0", func(b *Broker) { b.Gossip.BootstrapExpect = 0 }, "gossip.bootstrap_expect", ""},
		{"object store type", func(b *Broker) { b.ObjectStore.Type = "S3" }, "object_store.type", ""},
		{"object store none", func(b *Broker) { b.ObjectStore.Type = ObjectStoreNone }, "", ""},
		{"s3 ok", s3, "", ""},
		{"s3 without bucket", func(b *Broker) { s3(b); b.ObjectStore.Bucket = "" }, "object_store.bucket", "required for s3"},
		{"s3 bucket as URL", func(b *Broker) { s3(b); b.ObjectStore.Bucket = "s3://strata" }, "object_store.bucket", "only a-z"},
		{"s3 bucket upper case", func(b *Broker) { s3(b); b.ObjectStore.Bucket = "Strata" }, "object_store.bucket", "only a-z"},
		{"s3 bucket short", func(b *Broker) { s3(b); b.ObjectStore.Bucket = "ab" }, "object_store.bucket", "3 to 63"},
		{"s3 bucket dash end", func(b *Broker) { s3(b); b.ObjectStore.Bucket = "strata-" }, "object_store.bucket", "start and end"},
		{"s3 no region", func(b *Broker) { s3(b); b.ObjectStore.Region = "" }, "object_store.region", "required for s3"},
		{"s3 endpoint without scheme", func(b *Broker) { s3(b); b.ObjectStore.Endpoint = "127.0.0.1:9000" }, "object_store.endpoint", ""},
		{"s3 endpoint ftp", func(b *Broker) { s3(b); b.ObjectStore.Endpoint = "ftp://x" }, "object_store.endpoint", ""},
		{"s3 on AWS", func(b *Broker) { s3(b); b.ObjectStore.Endpoint = "" }, "", ""},
		{"s3 static keys", func(b *Broker) { s3(b); b.ObjectStore.AccessKey = "minio"; b.ObjectStore.SecretKey = "minio123" }, "", ""},
		{"s3 access key alone", func(b *Broker) { s3(b); b.ObjectStore.AccessKey = "minio" }, "object_store.secret_key", "go together"},
		{"s3 secret key alone", func(b *Broker) { s3(b); b.ObjectStore.SecretKey = "minio123" }, "object_store.access_key", "go together"},
		{"fs ignores bucket", func(b *Broker) { b.ObjectStore.Bucket = "" }, "", ""},
		{"prefix ok", func(b *Broker) { b.ObjectStore.Prefix = "prod/strata" }, "", ""},
		{"prefix leading slash", func(b *Broker) { b.ObjectStore.Prefix = "/prod" }, "object_store.prefix", ""},
		{"prefix trailing slash", func(b *Broker) { b.ObjectStore.Prefix = "prod/" }, "object_store.prefix", "trailing slash"},
		// Every object key starts with the prefix: one that breaks the key
		// rule would start the broker and fail every upload and manifest read.
		{"prefix escapes", func(b *Broker) { b.ObjectStore.Prefix = "../../escaped" }, "object_store.prefix", `".." segment`},
		{"prefix dot segment", func(b *Broker) { b.ObjectStore.Prefix = "prod/./strata" }, "object_store.prefix", `"." segment`},
		{"prefix empty segment", func(b *Broker) { b.ObjectStore.Prefix = "prod//strata" }, "object_store.prefix", "empty path segment"},
		{"prefix NUL", func(b *Broker) { b.ObjectStore.Prefix = "prod\x00" }, "object_store.prefix", "NUL byte"},
		{"prefix with dots in a name", func(b *Broker) { b.ObjectStore.Prefix = "prod..1/strata.v2" }, "", ""},
		{"s3 bucket adjacent periods", func(b *Broker) { s3(b); b.ObjectStore.Bucket = "my..bucket" }, "object_store.bucket", "adjacent periods"},
		{"s3 bucket as IP", func(b *Broker) { s3(b); b.ObjectStore.Bucket = "192.168.5.4" }, "object_store.bucket", "IP address"},
		{"s3 bucket reserved prefix", func(b *Broker) { s3(b); b.ObjectStore.Bucket = "xn--strata" }, "object_store.bucket", "reserved"},
		{"s3 bucket reserved suffix", func(b *Broker) { s3(b); b.ObjectStore.Bucket = "strata-s3alias" }, "object_store.bucket", "reserved"},
		{"s3 endpoint no host", func(b *Broker) { s3(b); b.ObjectStore.Endpoint = "http://:9000" }, "object_store.endpoint", "no host"},
		{"s3 endpoint credentials", func(b *Broker) { s3(b); b.ObjectStore.Endpoint = "http://minio:secret@127.0.0.1:9000" }, "object_store.endpoint", "credentials"},
		{"s3 endpoint query", func(b *Broker) { s3(b); b.ObjectStore.Endpoint = "http://127.0.0.1:9000?x=1" }, "object_store.endpoint", "query"},
		{"s3 endpoint bad port", func(b *Broker) { s3(b); b.ObjectStore.Endpoint = "http://127.0.0.1:99999" }, "object_store.endpoint", "port"},
		{"s3 endpoint https with path", func(b *Broker) { s3(b); b.ObjectStore.Endpoint = "https://s3.example.com/store" }, "", ""},
		{"chunk too small", func(b *Broker) { b.Tiering.ChunkBytes = 32 << 10 }, "tiering.chunk_bytes", ""},
		{"chunk minimum", func(b *Broker) { b.Tiering.ChunkBytes = 64 << 10 }, "", ""},
		{"cache below chunk", func(b *Broker) { b.Tiering.CacheBytes = 1 << 20 }, "tiering.cache_bytes", "at least one chunk"},
		{"upload parallelism 0", func(b *Broker) { b.Tiering.UploadParallelism = 0 }, "tiering.upload_parallelism", ""},
		{"unuploaded below a segment", func(b *Broker) { b.Tiering.MaxUnuploadedBytes = 64 << 20 }, "tiering.max_unuploaded_bytes", "below segment.bytes (128MiB)"},
		{"unuploaded with small segments", func(b *Broker) {
			b.Tiering.MaxUnuploadedBytes = 64 << 20
			b.TopicOverrides = map[string]string{"segment.bytes": "16MiB"}
		}, "", ""},
		{"unuploaded unbounded", func(b *Broker) { b.Tiering.MaxUnuploadedBytes = Unbounded }, "tiering.max_unuploaded_bytes", ""},
		{"lag zero", func(b *Broker) { b.Replica.LagTimeMax = 0 }, "replica.lag_time_max", ""},
		{"lag below a second", func(b *Broker) { b.Replica.LagTimeMax = Duration(500 * time.Millisecond) }, "replica.lag_time_max", ""},
		{"dead broker zero", func(b *Broker) { b.Controller.DeadBrokerTimeout = 0 }, "controller.dead_broker_timeout", ""},
		{"partition limit zero", func(b *Broker) { b.Limits.MaxPartitionsPerBroker = 0 }, "limits.max_partitions_per_broker", ""},
		{"shared sync off", func(b *Broker) { b.Storage.SharedSyncAfter = 0 }, "", ""},
		{"shared sync negative", func(b *Broker) { b.Storage.SharedSyncAfter = -1 }, "storage.shared_sync_after", ""},
		{"partition limit set", func(b *Broker) { b.Limits.MaxPartitionsPerBroker = 4000 }, "", ""},
		{"partition limit negative", func(b *Broker) { b.Limits.MaxPartitionsPerBroker = -1 }, "limits.max_partitions_per_broker", ""},
		{"fetch cap minimum", func(b *Broker) { b.Limits.MaxFetchBytes = 64 << 10 }, "", ""},
		{"fetch cap too small", func(b *Broker) { b.Limits.MaxFetchBytes = 0 }, "limits.max_fetch_bytes", ""},
		{"fetch cap too large", func(b *Broker) { b.Limits.MaxFetchBytes = 2 << 30 }, "limits.max_fetch_bytes", ""},
		{"groups unbounded", func(b *Broker) { b.Limits.MaxGroups = 0 }, "", ""},
		{"groups negative", func(b *Broker) { b.Limits.MaxGroups = -5 }, "limits.max_groups", ""},
		{"produce quota", func(b *Broker) { b.Quotas.ProduceBytesPerSec = 1 << 20 }, "", ""},
		{"produce quota unbounded", func(b *Broker) { b.Quotas.ProduceBytesPerSec = Unbounded }, "quotas.produce_bytes_per_sec", ""},
		{"fetch quota negative", func(b *Broker) { b.Quotas.FetchBytesPerSec = -2 }, "quotas.fetch_bytes_per_sec", ""},
		{"log level", func(b *Broker) { b.Log.Level = "verbose" }, "log.level", ""},
		{"log level case", func(b *Broker) { b.Log.Level = "INFO" }, "log.level", ""},
		{"log format", func(b *Broker) { b.Log.Format = "xml" }, "log.format", ""},
		{"topic defaults ok", func(b *Broker) { b.TopicOverrides = map[string]string{"retention.ms": "30d"} }, "", ""},
		{"topic defaults bad value", func(b *Broker) { b.TopicOverrides = map[string]string{"retention.ms": "forever"} }, "topic_defaults.retention.ms", ""},
		{"topic defaults cross rule", func(b *Broker) { b.TopicOverrides = map[string]string{"retention.ms": "1h"} }, "topic_defaults.local.retention.ms", "must not exceed"},
		{"topic defaults unknown key", func(b *Broker) { b.TopicOverrides = map[string]string{"retention": "1h"} }, "topic_defaults.retention", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := DefaultBroker()
			tc.mutate(&b)
			err := b.Validate()
			if tc.wantKey == "" {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate() = %v; want an *Error on %s", err, tc.wantKey)
			}
			if e.Key != tc.wantKey || !strings.Contains(e.Reason, tc.reason) {
				t.Fatalf("Validate() = %v (key %q, reason %q); want key %s, reason with %q", err, e.Key, e.Reason, tc.wantKey, tc.reason)
			}
			if e.Allowed == "" || !strings.Contains(err.Error(), tc.wantKey) {
				t.Errorf("error %q must name the key and what is allowed", err)
			}
		})
	}
}

func TestBrokerTopicDefaults(t *testing.T) {
	b := DefaultBroker()
	b.TopicOverrides = map[string]string{"retention.ms": "30d", "segment.bytes": "64MiB", "flush.policy": "Interval"}
	top, err := b.TopicDefaults()
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultTopic()
	want.RetentionMs = 30 * 24 * 3600 * 1000
	want.SegmentBytes = 64 << 20
	want.FlushPolicy = FlushInterval
	if top != want {
		t.Errorf("TopicDefaults() = %+v, want %+v", top, want)
	}
	b.TopicOverrides = map[string]string{"retention.mss": "1d"}
	if _, err := b.TopicDefaults(); !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), "topic_defaults.retention.mss") {
		t.Errorf("TopicDefaults() = %v; want unknown key topic_defaults.retention.mss", err)
	}
}

func TestSecretsStayOutOfOutput(t *testing.T) {
	const secret = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0IQ=="
	b := DefaultBroker()
	b.Gossip.SecretKey = secret
	b.ObjectStore.AccessKey = "minio"
	b.ObjectStore.SecretKey = secret
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(format, b); strings.Contains(out, secret) {
			t.Errorf("%s of a Broker shows the secret: %s", format, out)
		}
	}
	b.Gossip.SecretKey = secret + "x" // invalid: Validate must not echo it
	if err := b.Validate(); err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("Validate() = %v; want an error without the secret", err)
	}
	if Secret("").String() != "" {
		t.Error("an empty Secret should print as empty, so unset is visible")
	}
}

func TestBrokerHelpers(t *testing.T) {
	b := DefaultBroker()
	b.Advertise = "broker1:7400"
	b.Raft.Advertise = "broker1:7401"
	b.ObjectStore.Path = "/srv/objects"
	if b.AdvertiseAddr() != "broker1:7400" || b.Raft.AdvertiseAddr() != "broker1:7401" || b.ObjectStorePath() != "/srv/objects" {
		t.Errorf("helpers = %s %s %s", b.AdvertiseAddr(), b.Raft.AdvertiseAddr(), b.ObjectStorePath())
	}
	key := make([]byte, 16)
	key[0] = 7
	b.Gossip.SecretKey = Secret(base64.StdEncoding.EncodeToString(key))
	got, err := b.Gossip.SecretKeyBytes()
	if err != nil || len(got) != 16 || got[0] != 7 {
		t.Errorf("SecretKeyBytes() = %v, %v", got, err)
	}
	b.Gossip.SecretKey = ""
	if got, err := b.Gossip.SecretKeyBytes(); got != nil || err != nil {
		t.Errorf("SecretKeyBytes() of no key = %v, %v", got, err)
	}
}

// TestReadReplicaValidate: a read-only replica opens no Raft or gossip
// listener, so their settings are not held against it (not even their
// ports, nor a gossip key with TLS); it needs an object store to read and
// a refresh interval.
func TestReadReplicaValidate(t *testing.T) {
	b := DefaultBroker()
	b.ReadReplica = true
	b.Raft.Listen, b.Gossip.Listen = "", "0.0.0.0:7400" // unused: no error, no port clash
	b.Gossip.BootstrapExpect = 0
	if err := b.Validate(); err != nil {
		t.Fatalf("a replica without raft and gossip settings: %v", err)
	}
	b.ObjectStore.Type = ObjectStoreNone
	var e *Error
	if err := b.Validate(); !errors.As(err, &e) || e.Key != "object_store.type" || !strings.Contains(err.Error(), "read_replica") {
		t.Fatalf("a replica without an object store: %v; want an object_store.type error naming read_replica", err)
	}
	b.ObjectStore.Type = ObjectStoreFS
	b.ReadReplicaRefresh = 0
	if err := b.Validate(); !errors.As(err, &e) || e.Key != "read_replica_refresh" {
		t.Fatalf("a replica refreshing every 0s: %v; want a read_replica_refresh error", err)
	}
	b.ReadReplica = false
	b.ReadReplicaRefresh = Duration(time.Second)
	if err := b.Validate(); err == nil {
		t.Fatal("a normal broker without raft.listen validated")
	}
}

// TestKafkaSASLMechanisms: kafka.sasl_mechanisms takes known mechanisms
// once each, only with TLS, and PLAIN only with a tokens file.
func TestKafkaSASLMechanisms(t *testing.T) {
	withTLS := func(b *Broker) {
		b.Security.TLS = TLSFiles{CAFile: "ca.pem", CertFile: "b.pem", KeyFile: "b-key.pem"}
		b.Gossip.SecretKey = "AAAAAAAAAAAAAAAAAAAAAA=="
	}
	for _, tc := range []struct {
		name  string
		mechs []string
		tls   bool
		token bool
		ok    bool
	}{
		{"none without TLS", nil, false, false, true},
		{"scram with TLS", []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}, true, false, true},
		{"plain with tokens", []string{"PLAIN"}, true, true, true},
		{"plain without tokens", []string{"PLAIN"}, true, false, false},
		{"scram without TLS", []string{"SCRAM-SHA-512"}, false, false, false},
		{"unknown", []string{"GSSAPI"}, true, false, false},
		{"twice", []string{"SCRAM-SHA-512", "SCRAM-SHA-512"}, true, false, false},
	} {
		b := DefaultBroker()
		if tc.tls {
			withTLS(&b)
		}
		if tc.token {
			b.Security.TokensFile = "tokens"
		}
		b.Kafka.SASLMechanisms = tc.mechs
		err := b.Validate()
		var ce *Error
		if tc.ok != (err == nil) || (err != nil && (!errors.As(err, &ce) || ce.Key != "kafka.sasl_mechanisms")) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
