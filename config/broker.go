package config

import (
	"encoding/base64"
	"path/filepath"
	"time"
)

// Broker is the configuration of one broker process. It is read once at
// start (see Load): YAML file, then STRATA_* environment variables, then
// flags. Field tags give the YAML path, which also names the environment
// variable and the flag (object_store.type is STRATA_OBJECT_STORE_TYPE and
// --object-store-type).
type Broker struct {
	// NodeID is the broker's id in the cluster, unique and stable across
	// restarts.
	NodeID int32 `yaml:"node_id"`
	// DataDir holds the partition logs, Raft state and, for the fs object
	// store by default, the objects.
	DataDir string `yaml:"data_dir"`
	// Listen is the gRPC address clients and other brokers connect to.
	Listen string `yaml:"listen"`
	// Advertise is the gRPC address given to others; empty means Listen.
	Advertise string `yaml:"advertise"`
	// ReadReplica makes the broker a read-only replica of a bucket (and
	// prefix) another cluster writes: it joins no cluster (no gossip, no
	// Raft, so those settings are unused), never writes to the object
	// store, and serves fetches, offsets, metadata and topic descriptions
	// of every topic it finds there; writes are refused (READ_REPLICA).
	ReadReplica bool `yaml:"read_replica"`
	// ReadReplicaRefresh is how often a read-only replica re-reads the
	// bucket's manifest heads to follow new uploads (and finds new topics).
	ReadReplicaRefresh Duration `yaml:"read_replica_refresh"`
	// Raft is the controller group's transport.
	Raft Raft `yaml:"raft"`
	// Gossip is cluster membership.
	Gossip Gossip `yaml:"gossip"`
	// Admin is the HTTP endpoint for health and metrics.
	Admin Admin `yaml:"admin"`
	// Kafka is the Kafka-protocol listener.
	Kafka Kafka `yaml:"kafka"`
	// Security is who may reach the broker and what they may do.
	Security Security `yaml:"security"`
	// ObjectStore is where the cold tier lives.
	ObjectStore ObjectStore `yaml:"object_store"`
	// Storage guards the local disk.
	Storage Storage `yaml:"storage"`
	// Tiering tunes uploads and cold reads.
	Tiering Tiering `yaml:"tiering"`
	// Replica tunes replication.
	Replica Replica `yaml:"replica"`
	// Cleaner tunes the log cleaner of compacted topics.
	Cleaner Cleaner `yaml:"cleaner"`
	// Controller tunes the metadata controller.
	Controller Controller `yaml:"controller"`
	// Limits bound what one request or client may make the cluster hold.
	Limits Limits `yaml:"limits"`
	// Quotas bound the bytes each principal moves through this broker.
	Quotas Quotas `yaml:"quotas"`
	// TopicOverrides holds broker-wide overrides of the built-in topic
	// defaults, by topic key ("retention.ms": "30d"). See TopicDefaults.
	TopicOverrides map[string]string `yaml:"topic_defaults"`
	// Log is the broker's own logging (not the commit log).
	Log Logging `yaml:"log"`
}

// Raft configures the controller's Raft transport.
type Raft struct {
	// Listen is the address the Raft transport binds.
	Listen string `yaml:"listen"`
	// Advertise is the Raft address given to peers; empty means Listen.
	Advertise string `yaml:"advertise"`
}

// Gossip configures cluster membership (memberlist).
type Gossip struct {
	// Listen is the address gossip binds, TCP and UDP.
	Listen string `yaml:"listen"`
	// Advertise is the gossip address given to peers; empty means Listen,
	// or an address memberlist picks when Listen is 0.0.0.0.
	Advertise string `yaml:"advertise"`
	// Join lists seed addresses of brokers to join at start.
	Join []string `yaml:"join"`
	// SecretKey encrypts gossip: base64 of a 16, 24 or 32-byte AES key.
	// Empty leaves gossip unencrypted.
	SecretKey Secret `yaml:"secret_key"`
	// BootstrapExpect is how many brokers gossip must see before the lowest
	// id bootstraps the controller group with them.
	BootstrapExpect int `yaml:"bootstrap_expect"`
	// Rack labels the broker's failure domain for replica placement.
	Rack string `yaml:"rack"`
	// Profile tunes failure detection: "lan" (memberlist's LAN defaults, a
	// failed broker is noticed in a few seconds) or "local" (brokers on one
	// host or a fast, quiet network: about a second).
	Profile string `yaml:"profile"`
}

// Admin configures the HTTP admin endpoint.
type Admin struct {
	// Listen is the address of the health and metrics endpoint.
	Listen string `yaml:"listen"`
	// Pprof serves Go's profiler under /debug/pprof/. Off by default: a
	// profile shows memory contents and costs CPU. With TLS it is behind
	// the admin endpoint's authentication like /metrics.
	Pprof bool `yaml:"pprof"`
}

// Kafka configures the Kafka-protocol front end (package kafka).
type Kafka struct {
	// Listen is the Kafka listener's address; empty opens none.
	Listen string `yaml:"listen"`
	// Advertise is the address Kafka clients are told in metadata; empty
	// means Listen.
	Advertise string `yaml:"advertise"`
	// MaxConnections bounds the Kafka connections open at once (Kafka's
	// max.connections); one more is closed as soon as it is accepted. 0
	// means no bound.
	MaxConnections int `yaml:"max_connections"`
	// MaxConnectionsPerIP bounds the Kafka connections open at once from
	// one client address (Kafka's max.connections.per.ip). 0 means no
	// bound.
	MaxConnectionsPerIP int `yaml:"max_connections_per_ip"`
	// SASLMechanisms are the SASL mechanisms the Kafka listener offers
	// (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), TLS only. Empty: clients
	// authenticate with a client certificate, which the TLS handshake then
	// requires (kafka_validate.go).
	SASLMechanisms []string `yaml:"sasl_mechanisms"`
}

// Security says who may reach the broker and what they may do. Without TLS
// every caller may do everything, which only a broker whose listeners are
// all on loopback may do unless AllowPlaintext says otherwise: a developer
// machine, not a shared network.
type Security struct {
	// TLS is this broker's certificate and key and the CA that vouches for
	// brokers and clients. Set, every listener speaks TLS (gossip is
	// encrypted with gossip.secret_key), brokers prove their ids to each
	// other with their certificates, and clients authenticate with a
	// certificate or a token and are held to the ACLs.
	TLS TLSFiles `yaml:"tls"`
	// ClusterName is the name in brokers' certificates: broker <id>'s
	// carries the DNS name broker-<id>.<cluster_name>.
	ClusterName string `yaml:"cluster_name"`
	// TokensFile holds the SHA-256 hashes of bearer tokens clients may
	// show instead of a certificate, one "User:<name> sha256:<hex>" per
	// line; re-read when it changes. Empty: certificates only.
	TokensFile string `yaml:"tokens_file"`
	// Superusers are principals (User:<name>) every ACL check lets pass.
	Superusers []string `yaml:"superusers"`
	// AllowPlaintext lets a broker without TLS listen beyond loopback.
	AllowPlaintext bool `yaml:"allow_plaintext"`
}

// TLSFiles names PEM files; all three or none.
type TLSFiles struct {
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Enabled reports whether the broker runs with TLS and authentication.
func (s Security) Enabled() bool { return s.TLS.CertFile != "" }

// The object store types.
const (
	// ObjectStoreFS keeps objects in a local directory: development, tests
	// and single-machine setups.
	ObjectStoreFS = "fs"
	// ObjectStoreS3 uses an S3-compatible store (AWS S3, MinIO, ...).
	ObjectStoreS3 = "s3"
	// ObjectStoreNone runs without a cold tier: nothing is uploaded.
	ObjectStoreNone = "none"
)

// ObjectStore says where the cold tier lives.
type ObjectStore struct {
	// Type is ObjectStoreFS, ObjectStoreS3 or ObjectStoreNone.
	Type string `yaml:"type"`
	// Path is the directory of the fs store; empty means <data_dir>/objects
	// (see Broker.ObjectStorePath).
	Path string `yaml:"path"`
	// Bucket is the S3 bucket; required for s3.
	Bucket string `yaml:"bucket"`
	// Endpoint is the S3 endpoint URL, e.g. http://127.0.0.1:9000 for
	// MinIO; empty means AWS.
	Endpoint string `yaml:"endpoint"`
	// Region is the S3 region.
	Region string `yaml:"region"`
	// PathStyle addresses buckets as endpoint/bucket rather than
	// bucket.endpoint, which MinIO needs.
	PathStyle bool `yaml:"path_style"`
	// AccessKey is the static S3 access key id; with SecretKey empty too,
	// the standard AWS chain is used (environment, shared files, instance
	// role).
	AccessKey string `yaml:"access_key"`
	// SecretKey goes with AccessKey: both set or both empty.
	SecretKey Secret `yaml:"secret_key"`
	// Prefix is prepended to every object key, so several clusters can
	// share a bucket.
	Prefix string `yaml:"prefix"`
	// CreateBucket makes the broker create the s3 bucket when it does not
	// exist. Off by default: in production a missing bucket is more likely a
	// typo than a wish.
	CreateBucket bool `yaml:"create_bucket"`
}

// Tiering tunes the uploader and the cold read path.
type Tiering struct {
	// ChunkBytes is the size of a ranged GET and of a cache entry.
	ChunkBytes ByteSize `yaml:"chunk_bytes"`
	// CacheBytes bounds the chunk cache.
	CacheBytes ByteSize `yaml:"cache_bytes"`
	// UploadParallelism bounds concurrent segment uploads.
	UploadParallelism int `yaml:"upload_parallelism"`
	// MaxUnuploadedBytes: beyond this many sealed but not yet uploaded
	// bytes, produce is throttled with a retriable error rather than letting
	// the disk fill while the object store is unreachable.
	MaxUnuploadedBytes ByteSize `yaml:"max_unuploaded_bytes"`
	// OrphanGrace: objects in the bucket that no manifest names are deleted
	// once they are this old. The grace spares uploads still in flight.
	OrphanGrace Duration `yaml:"orphan_grace"`
	// RetiredGrace: objects a cleaning of the cold tier replaced stay in the
	// bucket this long after the manifest stops naming them, so that
	// readers (cold reads, read replicas) that loaded an older manifest
	// finish.
	RetiredGrace Duration `yaml:"retired_grace"`
	// ColdCleanerIOMaxBytesPerSecond bounds the bytes the cold cleaner of
	// compacted topics reads from and writes to the bucket per second,
	// across all partitions; 0 is unlimited. Its own budget, not the hot
	// cleaner's: it spends the bucket's bandwidth, which uploads and cold
	// reads share, not the local disk.
	ColdCleanerIOMaxBytesPerSecond ByteSize `yaml:"cold_cleaner_io_max_bytes_per_second"`
	// ColdReadMaxGets bounds the GETs from the bucket this broker's cold
	// reads have in flight at once, reads and read-ahead together.
	ColdReadMaxGets int `yaml:"cold_read_max_gets"`
	// ColdReadBytesPerSec and ColdReadGetsPerSec bound what this broker's
	// cold reads take from the bucket, across all topics; 0 is unlimited.
	// Each topic may have its own, smaller bounds too
	// (remote.read.bytes.per.sec, remote.read.gets.per.sec).
	ColdReadBytesPerSec ByteSize `yaml:"cold_read_bytes_per_sec"`
	ColdReadGetsPerSec  int      `yaml:"cold_read_gets_per_sec"`
	// ColdReadYield makes cold reads yield to writes: while produce
	// latency on this broker is above what the writers see without cold
	// reads, cold reads fetch less (never less than 1 MiB/s); false lets
	// them take all the limits above allow.
	ColdReadYield bool `yaml:"cold_read_yield"`
}

// Storage guards the local disk.
type Storage struct {
	// MinFreeBytes: when the file system holding data_dir has less free
	// space than this, produce is refused with STORAGE_FULL (retriable)
	// instead of filling the disk. Reads and metadata go on, and a broker
	// started with less still starts: its Raft store keeps room of its own
	// (cluster/room.go). 0 disables the check.
	MinFreeBytes ByteSize `yaml:"min_free_bytes"`
	// SharedSyncAfter: once this many partitions' fsyncs run at once, more
	// of them share one sync of the data_dir file system (syncfs) instead
	// of one fsync each, which costs about as much as a whole file-system
	// sync when a file holds only a few KiB of new records. Below it each
	// partition waits for its own fsync only. 0 turns sharing off.
	SharedSyncAfter int `yaml:"shared_sync_after"`
}

// Cleaner tunes the log cleaner, which compacts the local logs of topics
// with cleanup.policy compact. Kafka's broker settings of the same job are
// named after each field.
type Cleaner struct {
	// IOMaxBytesPerSecond bounds the bytes the cleaner reads and writes per
	// second, across every partition, so cleaning never starves writers
	// (Kafka's log.cleaner.io.max.bytes.per.second). 0 means unlimited.
	IOMaxBytesPerSecond ByteSize `yaml:"io_max_bytes_per_second"`
	// DedupeBufferSize bounds the memory of one cleaning's key map: a log
	// with more keys than fit is cleaned in passes (Kafka's
	// log.cleaner.dedupe.buffer.size).
	DedupeBufferSize ByteSize `yaml:"dedupe_buffer_size"`
	// Backoff is how long the cleaner waits when no log needs cleaning
	// (Kafka's log.cleaner.backoff.ms).
	Backoff Duration `yaml:"backoff"`
}

// Replica tunes replication.
type Replica struct {
	// LagTimeMax: a follower that has not caught up for this long is
	// proposed for removal from the ISR.
	LagTimeMax Duration `yaml:"lag_time_max"`
}

// Controller tunes the metadata controller.
type Controller struct {
	// DeadBrokerTimeout: a broker gossip has reported gone for this long is
	// removed from the Raft group and its replicas are reassigned. Long
	// enough to ride out a restart or a rolling upgrade.
	DeadBrokerTimeout Duration `yaml:"dead_broker_timeout"`
}

// Limits bound what one request or client may make the cluster hold, so
// that one of them cannot exhaust what every other needs: file descriptors,
// memory, the metadata every broker keeps.
type Limits struct {
	// MaxPartitionsPerBroker bounds the partition replicas one broker may
	// hold: a CreateTopic (or RestoreTopic) that would place more replicas
	// than this on any broker is refused. The broker handling the call
	// applies its own setting to every broker's count, so set it alike on
	// all of them. An idle replica holds no file descriptors (its segment
	// files are opened on demand through one broker-wide cache, sized from
	// the open-file limit) and a few KiB of memory, so the bound is about
	// metadata, memory and start time, not descriptors: the default,
	// DefaultMaxPartitionsPerBroker, starts in well under a minute. A
	// replica being written holds its active segment file until its writes
	// are fsynced (all the time under flush.policy never), so the open-file
	// limit must cover the replicas written at once.
	MaxPartitionsPerBroker int `yaml:"max_partitions_per_broker"`
	// MaxFetchBytes caps the batches of one fetch response. A request asking
	// for more is served this much, not refused (a response still holds at
	// least one whole batch, however large). It bounds the memory a slow or
	// stalled consumer stream can hold.
	MaxFetchBytes ByteSize `yaml:"max_fetch_bytes"`
	// MaxGroups bounds the consumer groups whose offsets the cluster keeps
	// (every broker holds them all, and every metadata snapshot carries
	// them): an offset commit that would create one more group is refused,
	// and so is a member joining a group beyond this many with members (the
	// controller keeps their membership in memory). The controller applies
	// its setting, so set it alike on all brokers. 0 means no bound.
	MaxGroups int `yaml:"max_groups"`
}

// Quotas bound the bytes each principal (a client's User:<name>; all
// callers share one quota without TLS) moves through this broker per
// second, with a token bucket holding one second's worth. Over quota,
// produce is refused with THROTTLED and a retry delay, and fetch responses
// are delayed (by up to a second; beyond that the fetch is refused with
// THROTTLED and a retry delay too). 0 means unlimited.
type Quotas struct {
	// ProduceBytesPerSec bounds the batch bytes a principal produces.
	ProduceBytesPerSec ByteSize `yaml:"produce_bytes_per_sec"`
	// FetchBytesPerSec bounds the batch bytes a principal fetches.
	FetchBytesPerSec ByteSize `yaml:"fetch_bytes_per_sec"`
}

// Logging configures the broker's own log output.
type Logging struct {
	// Level is debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is text or json.
	Format string `yaml:"format"`
}

// DefaultBroker returns a configuration that runs a single broker on
// loopback with a filesystem object store under ./data.
func DefaultBroker() Broker {
	return Broker{
		NodeID:  1,
		DataDir: "./data",
		Listen:  "127.0.0.1:7400",
		// A few seconds: a replica is at most this much behind the bucket,
		// which itself trails the writers by up to remote.max.lag.ms.
		ReadReplicaRefresh: Duration(3 * time.Second),
		Raft:               Raft{Listen: "127.0.0.1:7401"},
		Gossip: Gossip{
			Listen:          "127.0.0.1:7402",
			BootstrapExpect: 1,
			Profile:         "lan",
		},
		Admin:    Admin{Listen: "127.0.0.1:7403"},
		Kafka:    Kafka{MaxConnections: 10000, MaxConnectionsPerIP: 1000},
		Security: Security{ClusterName: "strata"},
		ObjectStore: ObjectStore{
			Type:      ObjectStoreFS,
			Region:    "us-east-1",
			PathStyle: true,
		},
		Storage: Storage{MinFreeBytes: 64 << 20, SharedSyncAfter: 32},
		Tiering: Tiering{
			ChunkBytes:                     4 << 20,
			CacheBytes:                     256 << 20,
			UploadParallelism:              4,
			MaxUnuploadedBytes:             1 << 30,
			OrphanGrace:                    Duration(10 * time.Minute),
			RetiredGrace:                   Duration(5 * time.Minute),
			ColdCleanerIOMaxBytesPerSecond: 25 << 20,
			ColdReadMaxGets:                16,
			ColdReadYield:                  true,
		},
		Replica:    Replica{LagTimeMax: Duration(30 * time.Second)},
		Cleaner:    Cleaner{IOMaxBytesPerSecond: 50 << 20, DedupeBufferSize: 128 << 20, Backoff: Duration(15 * time.Second)},
		Controller: Controller{DeadBrokerTimeout: Duration(5 * time.Minute)},
		Limits:     Limits{MaxPartitionsPerBroker: DefaultMaxPartitionsPerBroker, MaxFetchBytes: 8 << 20, MaxGroups: 10000},
		Log:        Logging{Level: "info", Format: "text"},
	}
}

// TopicDefaults returns the defaults a new topic starts from on this broker:
// the built-in ones with topic_defaults applied. Errors name the key as
// topic_defaults.<key>.
func (b Broker) TopicDefaults() (Topic, error) {
	t, err := ParseTopic(b.TopicOverrides)
	if err != nil {
		if e, ok := err.(*Error); ok {
			c := *e
			c.Key = "topic_defaults." + c.Key
			return Topic{}, &c
		}
		return Topic{}, err
	}
	return t, nil
}

// AdvertiseAddr is the gRPC address to give others: Advertise, else Listen.
func (b Broker) AdvertiseAddr() string { return orDefault(b.Advertise, b.Listen) }

// AdvertiseAddr is the Raft address to give peers: Advertise, else Listen.
func (r Raft) AdvertiseAddr() string { return orDefault(r.Advertise, r.Listen) }

// ObjectStorePath is the fs object store's directory: object_store.path,
// else <data_dir>/objects.
func (b Broker) ObjectStorePath() string {
	return orDefault(b.ObjectStore.Path, filepath.Join(b.DataDir, "objects"))
}

// SecretKeyBytes decodes SecretKey; nil when gossip is not encrypted.
// Validate has checked it, so an error here means Validate was skipped.
func (g Gossip) SecretKeyBytes() ([]byte, error) {
	if g.SecretKey == "" {
		return nil, nil
	}
	return base64.StdEncoding.DecodeString(string(g.SecretKey))
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// AdvertiseAddr is the Kafka address to give Kafka clients: Advertise,
// else Listen ("" when no Kafka listener is open).
func (k Kafka) AdvertiseAddr() string { return orDefault(k.Advertise, k.Listen) }
