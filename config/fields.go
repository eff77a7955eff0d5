package config

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// field is one broker setting. The table of them (brokerFields) is the
// single list that YAML decoding diagnostics, environment variables, flags
// and documentation all come from, so none of them can miss a setting or
// spell it differently; a test checks it against the Broker struct.
type field struct {
	path string // YAML path: "object_store.type"
	env  string // environment variable: "STRATA_OBJECT_STORE_TYPE"
	flag string // flag name without dashes: "object-store-type"
	kind string // value type for help text: string, int, bool, duration, bytes, strings, key=value
	help string
	// ptr returns a pointer to the struct field, for YAML decoding.
	ptr func(b *Broker) any
	// set parses the string form (environment variables, flags) into b.
	// Errors are *Error values with Key set to path.
	set func(b *Broker, s string) error
	// get returns the string form that set reads back.
	get func(b *Broker) string
}

// brokerFields returns the table in documentation order. It is rebuilt per
// call instead of living in a package variable: no shared mutable state,
// and it is only used at start-up.
func brokerFields() []field {
	return []field{
		int32Field("node_id", "broker id, unique in the cluster and stable across restarts", func(b *Broker) *int32 { return &b.NodeID }),
		stringField("data_dir", "directory for partition logs and Raft state", func(b *Broker) *string { return &b.DataDir }),
		stringField("listen", "gRPC listen address (host:port)", func(b *Broker) *string { return &b.Listen }),
		stringField("advertise", "gRPC address given to clients and brokers; empty means the listen address", func(b *Broker) *string { return &b.Advertise }),
		boolField("read_replica", "serve read-only from a bucket another cluster writes: no gossip or Raft (their settings are unused), nothing written to the object store, writes refused with READ_REPLICA; false means a normal broker", func(b *Broker) *bool { return &b.ReadReplica }),
		durationField("read_replica_refresh", "how often a read-only replica re-reads the bucket's manifest heads to follow new uploads and topics", func(b *Broker) *Duration { return &b.ReadReplicaRefresh }),
		stringField("raft.listen", "Raft transport listen address", func(b *Broker) *string { return &b.Raft.Listen }),
		stringField("raft.advertise", "Raft address given to peers; empty means raft.listen", func(b *Broker) *string { return &b.Raft.Advertise }),
		stringField("gossip.listen", "gossip (memberlist) listen address, TCP and UDP", func(b *Broker) *string { return &b.Gossip.Listen }),
		stringField("gossip.advertise", "gossip address given to peers; empty means gossip.listen, or one memberlist picks for 0.0.0.0", func(b *Broker) *string { return &b.Gossip.Advertise }),
		listField("gossip.join", "seed gossip addresses to join, comma-separated; empty starts a new cluster", func(b *Broker) *[]string { return &b.Gossip.Join }),
		secretField("gossip.secret_key", "base64 of a 16, 24 or 32-byte key encrypting gossip; empty means unencrypted", func(b *Broker) *Secret { return &b.Gossip.SecretKey }),
		intField("gossip.bootstrap_expect", "brokers to wait for before bootstrapping the controller group", func(b *Broker) *int { return &b.Gossip.BootstrapExpect }),
		stringField("gossip.profile", "failure detection timing: lan, or local for brokers on one host (faster)", func(b *Broker) *string { return &b.Gossip.Profile }),
		stringField("gossip.rack", "failure domain label for replica placement; empty means none", func(b *Broker) *string { return &b.Gossip.Rack }),
		stringField("admin.listen", "HTTP address for health and metrics; empty disables it", func(b *Broker) *string { return &b.Admin.Listen }),
		stringField("kafka.listen", "Kafka protocol listen address (host:port); empty opens no Kafka listener", func(b *Broker) *string { return &b.Kafka.Listen }),
		listField("kafka.sasl_mechanisms", "SASL mechanisms the Kafka listener offers with TLS, comma-separated: PLAIN (the password is a token of security.tokens_file), SCRAM-SHA-256, SCRAM-SHA-512 (strata user); empty means clients authenticate with a client certificate only", func(b *Broker) *[]string { return &b.Kafka.SASLMechanisms }),
		stringField("kafka.advertise", "Kafka address given to Kafka clients in metadata; empty means kafka.listen", func(b *Broker) *string { return &b.Kafka.Advertise }),
		intField("kafka.max_connections", "Kafka connections open at once on this broker; one more is closed at once; 0 means no bound", func(b *Broker) *int { return &b.Kafka.MaxConnections }),
		intField("kafka.max_connections_per_ip", "Kafka connections open at once from one client address; one more is closed at once; 0 means no bound", func(b *Broker) *int { return &b.Kafka.MaxConnectionsPerIP }),
		boolField("admin.pprof", "serve Go's profiler under /debug/pprof/ on the admin address", func(b *Broker) *bool { return &b.Admin.Pprof }),
		stringField("security.tls.ca_file", "PEM file of the CA that vouches for brokers and clients; with cert_file and key_file it turns on TLS and authentication; empty means plaintext", func(b *Broker) *string { return &b.Security.TLS.CAFile }),
		stringField("security.tls.cert_file", "PEM file of this broker's certificate (DNS name broker-<id>.<cluster_name>), re-read when it changes; empty means plaintext", func(b *Broker) *string { return &b.Security.TLS.CertFile }),
		stringField("security.tls.key_file", "PEM file of this broker's private key, re-read when it changes; empty means plaintext", func(b *Broker) *string { return &b.Security.TLS.KeyFile }),
		stringField("security.cluster_name", "cluster name in brokers' certificates (broker-<id>.<cluster_name>)", func(b *Broker) *string { return &b.Security.ClusterName }),
		stringField("security.tokens_file", "file of client token hashes (User:<name> sha256:<hex> per line, see strata dev token); empty means certificates only", func(b *Broker) *string { return &b.Security.TokensFile }),
		listField("security.superusers", "principals every ACL lets pass, comma-separated, e.g. User:admin; empty means none", func(b *Broker) *[]string { return &b.Security.Superusers }),
		boolField("security.allow_plaintext", "let a broker without TLS listen beyond loopback (anyone who reaches it may do anything)", func(b *Broker) *bool { return &b.Security.AllowPlaintext }),
		stringField("object_store.type", "cold tier store: fs, s3 or none", func(b *Broker) *string { return &b.ObjectStore.Type }),
		stringField("object_store.path", "directory of the fs store; empty means <data_dir>/objects", func(b *Broker) *string { return &b.ObjectStore.Path }),
		stringField("object_store.bucket", "S3 bucket (required for s3); empty by default", func(b *Broker) *string { return &b.ObjectStore.Bucket }),
		stringField("object_store.endpoint", "S3 endpoint URL such as http://127.0.0.1:9000; empty means AWS", func(b *Broker) *string { return &b.ObjectStore.Endpoint }),
		stringField("object_store.region", "S3 region", func(b *Broker) *string { return &b.ObjectStore.Region }),
		boolField("object_store.path_style", "address buckets as endpoint/bucket (MinIO needs it)", func(b *Broker) *bool { return &b.ObjectStore.PathStyle }),
		stringField("object_store.access_key", "S3 access key; empty (with secret_key) means the standard AWS credential chain", func(b *Broker) *string { return &b.ObjectStore.AccessKey }),
		secretField("object_store.secret_key", "S3 secret key; empty (with access_key) means the standard AWS credential chain", func(b *Broker) *Secret { return &b.ObjectStore.SecretKey }),
		stringField("object_store.prefix", "prefix of every object key, to share a bucket; empty means none", func(b *Broker) *string { return &b.ObjectStore.Prefix }),
		boolField("object_store.create_bucket", "create the s3 bucket at start if it does not exist (for development)", func(b *Broker) *bool { return &b.ObjectStore.CreateBucket }),
		bytesField("storage.min_free_bytes", "free space on the data_dir file system below which produce is refused with STORAGE_FULL (reads and metadata go on); 0 disables the check", func(b *Broker) *ByteSize { return &b.Storage.MinFreeBytes }),
		intField("storage.shared_sync_after", "partitions' fsyncs running at once past which more share one sync of the data_dir file system (syncfs) instead of one fsync each (default 32); 0 turns sharing off", func(b *Broker) *int { return &b.Storage.SharedSyncAfter }),
		bytesField("tiering.chunk_bytes", "size of a cold read (ranged GET) and of a cache entry", func(b *Broker) *ByteSize { return &b.Tiering.ChunkBytes }),
		bytesField("tiering.cache_bytes", "size of the cold chunk cache", func(b *Broker) *ByteSize { return &b.Tiering.CacheBytes }),
		intField("tiering.upload_parallelism", "concurrent segment uploads", func(b *Broker) *int { return &b.Tiering.UploadParallelism }),
		bytesField("tiering.max_unuploaded_bytes", "sealed bytes awaiting upload beyond which produce is throttled", func(b *Broker) *ByteSize { return &b.Tiering.MaxUnuploadedBytes }),
		durationField("tiering.retired_grace", "objects a cleaning of a compacted topic's cold tier replaced are deleted this long after, so readers in flight finish", func(b *Broker) *Duration { return &b.Tiering.RetiredGrace }),
		bytesField("tiering.cold_cleaner_io_max_bytes_per_second", "bytes per second the cold cleaner of compacted topics may read from and write to the object store, across all partitions, so that uploads and cold reads keep the bucket's bandwidth; a pass maps at most 10 seconds' worth of dirty bytes; 0 means unlimited", func(b *Broker) *ByteSize { return &b.Tiering.ColdCleanerIOMaxBytesPerSecond }),
		durationField("tiering.orphan_grace", "objects no manifest names are deleted once this old", func(b *Broker) *Duration { return &b.Tiering.OrphanGrace }),
		intField("tiering.cold_read_max_gets", "GETs from the object store that cold reads (and their read-ahead) have in flight at once", func(b *Broker) *int { return &b.Tiering.ColdReadMaxGets }),
		bytesField("tiering.cold_read_bytes_per_sec", "bytes per second this broker's cold reads may fetch from the object store, across all topics; 0 means unlimited", func(b *Broker) *ByteSize { return &b.Tiering.ColdReadBytesPerSec }),
		intField("tiering.cold_read_gets_per_sec", "GETs per second this broker's cold reads may send to the object store, across all topics; 0 means unlimited", func(b *Broker) *int { return &b.Tiering.ColdReadGetsPerSec }),
		boolField("tiering.cold_read_yield", "cold reads yield to writes: while produce latency is above the writers' own, they fetch less (at least 1 MiB/s); false lets them take all the cold_read limits allow", func(b *Broker) *bool { return &b.Tiering.ColdReadYield }),
		bytesField("cleaner.io_max_bytes_per_second", "bytes per second the log cleaner of compacted topics may read and write, across all partitions (Kafka's log.cleaner.io.max.bytes.per.second); 0 means unlimited", func(b *Broker) *ByteSize { return &b.Cleaner.IOMaxBytesPerSecond }),
		bytesField("cleaner.dedupe_buffer_size", "memory of the log cleaner's key map; a log with more keys than fit is cleaned in several passes (Kafka's log.cleaner.dedupe.buffer.size); at least 1MiB", func(b *Broker) *ByteSize { return &b.Cleaner.DedupeBufferSize }),
		durationField("cleaner.backoff", "how long the log cleaner waits when no compacted log needs cleaning (Kafka's log.cleaner.backoff.ms)", func(b *Broker) *Duration { return &b.Cleaner.Backoff }),
		durationField("replica.lag_time_max", "a follower behind for this long leaves the ISR", func(b *Broker) *Duration { return &b.Replica.LagTimeMax }),
		durationField("controller.dead_broker_timeout", "a broker gone this long is removed and its replicas reassigned", func(b *Broker) *Duration { return &b.Controller.DeadBrokerTimeout }),
		intField("limits.max_partitions_per_broker", "partition replicas a broker may hold (default 20000); creating a topic that would put more on any broker is refused; idle replicas hold no open files, and the segment file cache is sized from the open-file limit (ulimit -n)", func(b *Broker) *int { return &b.Limits.MaxPartitionsPerBroker }),
		bytesField("limits.max_fetch_bytes", "most batch bytes in one fetch response; larger requests are served this much (at least one whole batch)", func(b *Broker) *ByteSize { return &b.Limits.MaxFetchBytes }),
		intField("limits.max_groups", "consumer groups the cluster keeps offsets for; a commit creating one more is refused; 0 means no bound", func(b *Broker) *int { return &b.Limits.MaxGroups }),
		bytesField("quotas.produce_bytes_per_sec", "produce bytes per second each principal may send to this broker, beyond which produce is refused with THROTTLED; 0 means unlimited", func(b *Broker) *ByteSize { return &b.Quotas.ProduceBytesPerSec }),
		bytesField("quotas.fetch_bytes_per_sec", "fetch bytes per second each principal may read from this broker, beyond which fetches are delayed or refused with THROTTLED; 0 means unlimited", func(b *Broker) *ByteSize { return &b.Quotas.FetchBytesPerSec }),
		mapField("topic_defaults", "topic config defaults for this broker as key=value pairs, e.g. retention.ms=30d; empty keeps the built-in ones", func(b *Broker) *map[string]string { return &b.TopicOverrides }),
		stringField("log.level", "log level: debug, info, warn or error", func(b *Broker) *string { return &b.Log.Level }),
		stringField("log.format", "log format: text or json", func(b *Broker) *string { return &b.Log.Format }),
	}
}

// envName maps a YAML path to its environment variable:
// object_store.type -> STRATA_OBJECT_STORE_TYPE.
func envName(path string) string {
	return "STRATA_" + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// flagName maps a YAML path to its flag: object_store.type -> object-store-type.
func flagName(path string) string {
	return strings.NewReplacer(".", "-", "_", "-").Replace(path)
}

// newField builds a table row from a field accessor and the type's parser
// and formatter.
func newField[T any](path, kind, help string, p func(*Broker) *T, parse func(string) (T, error), format func(T) string) field {
	return field{
		path: path, env: envName(path), flag: flagName(path), kind: kind, help: help,
		ptr: func(b *Broker) any { return p(b) },
		set: func(b *Broker, s string) error {
			v, err := parse(s)
			if err != nil {
				return withKey(err, path)
			}
			*p(b) = v
			return nil
		},
		get: func(b *Broker) string { return format(*p(b)) },
	}
}

func stringField(path, help string, p func(*Broker) *string) field {
	return newField(path, "string", help, p,
		func(s string) (string, error) { return s, nil },
		func(s string) string { return s })
}

func secretField(path, help string, p func(*Broker) *Secret) field {
	return newField(path, "string", help, p,
		func(s string) (Secret, error) { return Secret(s), nil },
		func(s Secret) string { return string(s) })
}

func int32Field(path, help string, p func(*Broker) *int32) field {
	return newField(path, "int", help, p,
		func(s string) (int32, error) { n, err := parseInt(s, 32); return int32(n), err },
		func(n int32) string { return strconv.Itoa(int(n)) })
}

func intField(path, help string, p func(*Broker) *int) field {
	return newField(path, "int", help, p,
		func(s string) (int, error) { n, err := parseInt(s, 32); return int(n), err },
		strconv.Itoa)
}

func boolField(path, help string, p func(*Broker) *bool) field {
	return newField(path, "bool", help, p, parseBool, strconv.FormatBool)
}

func durationField(path, help string, p func(*Broker) *Duration) field {
	return newField(path, "duration", help, p,
		func(s string) (Duration, error) { d, err := ParseDuration(s); return Duration(d), err },
		Duration.String)
}

func bytesField(path, help string, p func(*Broker) *ByteSize) field {
	return newField(path, "bytes", help, p,
		func(s string) (ByteSize, error) { n, err := ParseBytes(s); return ByteSize(n), err },
		ByteSize.String)
}

func listField(path, help string, p func(*Broker) *[]string) field {
	return newField(path, "strings", help, p, parseList, func(l []string) string { return strings.Join(l, ",") })
}

func mapField(path, help string, p func(*Broker) *map[string]string) field {
	return newField(path, "key=value", help, p, parseMap, formatMap)
}

// parseList splits a comma-separated list, trimming spaces and dropping
// empty items, so "a, b," is [a b] and "" is the empty list.
func parseList(s string) ([]string, error) {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out, nil
}

// parseMap reads "k=v,k=v" (spaces around items and keys are trimmed; a
// value runs to the next comma). A repeated key is an error rather than
// "last one wins", since one of the two was surely not meant.
func parseMap(s string) (map[string]string, error) {
	const allowed = "comma-separated key=value pairs such as retention.ms=30d,segment.bytes=64MiB"
	out := map[string]string{}
	for item := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, &Error{Value: s, Allowed: allowed, Reason: strconv.Quote(strings.TrimSpace(item)) + " is not key=value"}
		}
		if _, dup := out[k]; dup {
			return nil, &Error{Value: s, Allowed: allowed, Reason: "key " + strconv.Quote(k) + " appears twice"}
		}
		out[k] = strings.TrimSpace(v)
	}
	return out, nil
}

// formatMap writes a map the way parseMap reads it, keys sorted.
func formatMap(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + m[k])
	}
	return b.String()
}

// BrokerField documents one broker setting: its YAML path, environment
// variable and flag, value type, default and help text.
type BrokerField struct {
	Path    string // "object_store.type"
	Env     string // "STRATA_OBJECT_STORE_TYPE"
	Flag    string // "--object-store-type"
	Type    string // string, int, bool, duration, bytes, strings or key=value
	Default string // as a flag or variable would write it; secrets have no default
	Help    string // what it does; empty defaults say what empty means
}

// BrokerFields documents every broker setting in a stable order, for help
// text and generated docs.
func BrokerFields() []BrokerField {
	def := DefaultBroker()
	fields := brokerFields()
	out := make([]BrokerField, len(fields))
	for i, f := range fields {
		out[i] = BrokerField{Path: f.path, Env: f.env, Flag: "--" + f.flag, Type: f.kind, Default: f.get(&def), Help: f.help}
	}
	return out
}

// Changed lists the settings (by YAML path, in table order) whose values
// differ between a and b.
func Changed(a, b Broker) []string {
	var out []string
	for _, f := range brokerFields() {
		if f.get(&a) != f.get(&b) {
			out = append(out, f.path)
		}
	}
	return out
}

// EnvNames lists every environment variable Load reads, in table order.
func EnvNames() []string {
	fields := brokerFields()
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.env
	}
	return out
}

// FlagNames lists every flag BindFlags registers, without dashes, in table
// order.
func FlagNames() []string {
	fields := brokerFields()
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.flag
	}
	return out
}
