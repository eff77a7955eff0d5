package config

import (
	"slices"
	"sort"
	"strings"
)

// Topic holds the settings of one topic, under the names Kafka users know
// (see TopicKeys). Times are milliseconds and sizes bytes, as the keys say;
// Unbounded (-1) switches a limit off where the key allows it.
//
// A Topic is a value: code that reads settings which may change while it
// runs (retention, segment size, flush policy) holds the current Topic as an
// immutable snapshot behind an atomic.Pointer[config.Topic] and swaps in a
// whole new validated Topic on "alter config", so a reader never sees half
// an update. Never modify a Topic that others may be reading; copy it, call
// Set or With on the copy, and publish the copy. Topic has no reference
// fields, so a copy shares nothing with the original.
type Topic struct {
	// RetentionMs: records older than this are deleted from both tiers.
	RetentionMs int64
	// RetentionBytes: the oldest segments are deleted once a partition's
	// total size (both tiers) exceeds this.
	RetentionBytes int64
	// LocalRetentionMs: uploaded segments older than this leave the local
	// disk. Unbounded means as long as RetentionMs.
	LocalRetentionMs int64
	// LocalRetentionBytes: uploaded segments leave the local disk once the
	// partition's local size exceeds this. Unbounded means as long as
	// RetentionBytes.
	LocalRetentionBytes int64
	// RemoteStorageEnable: sealed segments are uploaded to the object store.
	// When false the local.retention.* settings have no effect, as in Kafka.
	RemoteStorageEnable bool
	// RemoteMaxLagMs: the longest an acknowledged record (below the high
	// watermark) may stay out of the object store. The leader seals the
	// active segment early, so it can be uploaded, once its oldest
	// acknowledged record has waited long enough; without it a quiet
	// partition's tail would stay on local disk alone until segment.ms
	// rolled it. Unbounded leaves the tail to segment.ms and segment.bytes.
	RemoteMaxLagMs int64
	// RemoteReadBytesPerSec and RemoteReadGetsPerSec bound what cold reads
	// of the topic fetch from the object store on each broker, on top of
	// the broker's own bounds. Unbounded leaves them to the broker's.
	RemoteReadBytesPerSec int64
	RemoteReadGetsPerSec  int64
	// SegmentBytes: the active segment rolls before it would grow past this.
	SegmentBytes int64
	// SegmentMs: the active segment rolls once it is this old.
	SegmentMs int64
	// ReplicationFactor: replicas per partition, fixed at creation.
	ReplicationFactor int
	// MinInsyncReplicas: an acks=all produce needs this many in-sync replicas.
	MinInsyncReplicas int
	// MaxMessageBytes: the largest batch the leader accepts.
	MaxMessageBytes int64
	// CompressionType: the codec the leader stores batches in; producer
	// keeps each batch's own.
	CompressionType CompressionType
	// MessageTimestampType: whose clock the record timestamps are.
	MessageTimestampType TimestampType
	// MessageTimestampBeforeMaxMs and MessageTimestampAfterMaxMs bound
	// how far a produced record's timestamp may lie behind and ahead of
	// the leader's clock under CreateTime (Kafka's KIP-937); Unbounded
	// switches a bound off. A far-future timestamp would hold its segment
	// past time retention and answer lookups by time; old ones are allowed
	// by default, since backfills of history carry them.
	MessageTimestampBeforeMaxMs int64
	MessageTimestampAfterMaxMs  int64
	// FlushPolicy: when appended bytes are fsynced.
	FlushPolicy FlushPolicy
	// FlushMs: the fsync interval under FlushInterval.
	FlushMs int64
	// UncleanLeaderElectionEnable: a replica outside the ISR may become
	// leader when no ISR member is left, trading acknowledged records for
	// availability.
	UncleanLeaderElectionEnable bool
	// CleanupPolicy: how old records leave the log. delete (the default)
	// removes whole segments by retention.ms and retention.bytes; compact
	// keeps the last record of each key forever (retention.* then delete
	// nothing); compact,delete does both. See Compacted and Deletes.
	CleanupPolicy CleanupPolicy
	// MinCleanableDirtyRatio: the cleaner takes a compacted partition once
	// this share of its log (bytes not yet cleaned over all bytes) is
	// dirty, from 0 to 1.
	MinCleanableDirtyRatio float64
	// MinCompactionLagMs: a record stays uncleaned, whatever keys follow
	// it, for at least this long after it was appended.
	MinCompactionLagMs int64
	// MaxCompactionLagMs: a record becomes eligible for cleaning no later
	// than this after it was appended, whatever the dirty ratio says.
	// Unbounded leaves it to the dirty ratio alone.
	MaxCompactionLagMs int64
	// DeleteRetentionMs: how long a tombstone (a record with a key and a
	// null value) stays readable in a compacted log after the cleaner has
	// passed it, so that consumers reading behind still see the delete.
	// Unbounded keeps tombstones forever.
	DeleteRetentionMs int64
}

// Compacted reports whether the topic's log is compacted (cleanup.policy
// compact or compact,delete): records need keys, and the cleaner keeps the
// last record of each key.
func (t Topic) Compacted() bool {
	return t.CleanupPolicy == CleanupCompact || t.CleanupPolicy == CleanupCompactDelete
}

// Deletes reports whether retention.ms and retention.bytes delete old
// segments (cleanup.policy delete or compact,delete). A compact-only topic
// keeps every key's last record however old, as in Kafka.
func (t Topic) Deletes() bool {
	return t.CleanupPolicy == CleanupDelete || t.CleanupPolicy == CleanupCompactDelete
}

// CleanupPolicy is the value of cleanup.policy. Kafka's setting is a list;
// its three meaningful values are spelled here in one canonical form each.
type CleanupPolicy string

// The cleanup policies.
const (
	// CleanupDelete removes whole segments by retention.
	CleanupDelete CleanupPolicy = "delete"
	// CleanupCompact keeps the last record of every key and deletes
	// nothing by age or size.
	CleanupCompact CleanupPolicy = "compact"
	// CleanupCompactDelete compacts and applies retention too.
	CleanupCompactDelete CleanupPolicy = "compact,delete"
)

// TimestampType is the value of message.timestamp.type.
type TimestampType string

// The timestamp types, spelled as Kafka spells them.
const (
	// CreateTime keeps the producer's timestamps.
	CreateTime TimestampType = "CreateTime"
	// LogAppendTime stamps each batch with the leader's clock on append.
	LogAppendTime TimestampType = "LogAppendTime"
)

// CompressionType is the value of compression.type, spelled as Kafka
// spells it.
type CompressionType string

// The compression types.
const (
	// CompressionProducer keeps the codec each batch was produced with.
	CompressionProducer CompressionType = "producer"
	// The others make the leader store every batch in that codec,
	// recompressing what producers send in another.
	CompressionUncompressed CompressionType = "uncompressed"
	CompressionGzip         CompressionType = "gzip"
	CompressionSnappy       CompressionType = "snappy"
	CompressionLZ4          CompressionType = "lz4"
	CompressionZstd         CompressionType = "zstd"
)

// FlushPolicy is the value of flush.policy.
type FlushPolicy string

// The flush policies.
const (
	// FlushAlways acknowledges an append only after it is fsynced (group
	// commit shares one fsync among concurrent appends).
	FlushAlways FlushPolicy = "always"
	// FlushInterval fsyncs in the background every flush.ms.
	FlushInterval FlushPolicy = "interval"
	// FlushNever leaves writeback to the operating system; segments are
	// still fsynced when sealed. Durability then rests on replication.
	FlushNever FlushPolicy = "never"
)

// DefaultTopic returns the built-in topic defaults. A broker may override
// them with topic_defaults (see Broker.TopicDefaults).
func DefaultTopic() Topic {
	return Topic{
		RetentionMs:                 7 * 24 * 3600 * 1000,
		RetentionBytes:              Unbounded,
		LocalRetentionMs:            24 * 3600 * 1000,
		LocalRetentionBytes:         Unbounded,
		RemoteStorageEnable:         true,
		RemoteMaxLagMs:              10 * 60 * 1000,
		RemoteReadBytesPerSec:       Unbounded,
		RemoteReadGetsPerSec:        Unbounded,
		SegmentBytes:                128 << 20,
		SegmentMs:                   3600 * 1000,
		ReplicationFactor:           1,
		MinInsyncReplicas:           1,
		MaxMessageBytes:             1048588, // Kafka's default: 1 MiB plus a batch's log overhead
		CompressionType:             CompressionProducer,
		MessageTimestampType:        CreateTime,
		MessageTimestampBeforeMaxMs: Unbounded,
		MessageTimestampAfterMaxMs:  3600 * 1000, // Kafka's default since 4.0 (KIP-1030)
		FlushPolicy:                 FlushAlways,
		FlushMs:                     100,
		UncleanLeaderElectionEnable: false,
		CleanupPolicy:               CleanupDelete,
		MinCleanableDirtyRatio:      0.5,
		MinCompactionLagMs:          0,
		MaxCompactionLagMs:          Unbounded, // Kafka's Long.MAX_VALUE
		DeleteRetentionMs:           24 * 3600 * 1000,
	}
}

// KeyInfo describes one topic key for help text and `strata topic describe`.
type KeyInfo struct {
	// Name is the key, e.g. "retention.ms".
	Name string
	// Type is ms, bytes, int, bool or enum.
	Type string
	// Default is the built-in default in canonical form (as Topic.Map
	// writes it), so a value differing from it is an override.
	Default string
	// Allowed describes the accepted values, as errors quote it.
	Allowed string
	// Doc says what the key does.
	Doc string
}

// Display renders a canonical value of this key for people: times and
// sizes in units ("7d", "128MiB"), -1 left as is. Values that do not parse
// are returned unchanged.
func (k KeyInfo) Display(value string) string {
	switch k.Type {
	case "ms":
		if ms, err := ParseMillis(value); err == nil {
			return FormatMillis(ms)
		}
	case "bytes":
		if n, err := ParseBytes(value); err == nil {
			return FormatBytes(n)
		}
	}
	return value
}

// TopicKeys describes every topic key, in a stable order: retention first,
// then segments, replication, messages and flushing.
func TopicKeys() []KeyInfo {
	def := DefaultTopic()
	keys := topicKeys()
	out := make([]KeyInfo, len(keys))
	for i, k := range keys {
		out[i] = k.info
		out[i].Default = k.get(&def)
	}
	return out
}

// Validate checks every key's range and the rules between keys. The first
// violation is returned as an *Error naming the key that breaks the rule.
func (t Topic) Validate() error {
	for _, k := range topicKeys() {
		if reason := k.check(&t); reason != "" {
			return &Error{Key: k.info.Name, Value: k.info.Display(k.get(&t)), Allowed: k.info.Allowed, Reason: reason}
		}
	}
	// Local retention is a subset of total retention: keeping data on disk
	// longer than it exists at all would be meaningless.
	if t.RetentionMs != Unbounded && t.LocalRetentionMs != Unbounded && t.LocalRetentionMs > t.RetentionMs {
		return &Error{Key: "local.retention.ms", Value: FormatMillis(t.LocalRetentionMs),
			Reason:  "must not exceed retention.ms (" + FormatMillis(t.RetentionMs) + ")",
			Allowed: "-1 or a duration up to retention.ms"}
	}
	if t.RetentionBytes != Unbounded && t.LocalRetentionBytes != Unbounded && t.LocalRetentionBytes > t.RetentionBytes {
		return &Error{Key: "local.retention.bytes", Value: FormatBytes(t.LocalRetentionBytes),
			Reason:  "must not exceed retention.bytes (" + FormatBytes(t.RetentionBytes) + ")",
			Allowed: "-1 or a size up to retention.bytes"}
	}
	if err := t.validateCompaction(); err != nil {
		return err
	}
	if t.MinInsyncReplicas > t.ReplicationFactor {
		return &Error{Key: "min.insync.replicas", Value: itoa(t.MinInsyncReplicas),
			Reason:  "must not exceed replication.factor (" + itoa(t.ReplicationFactor) + ")",
			Allowed: "an integer from 1 to replication.factor"}
	}
	return nil
}

// validateCompaction checks the rules between the compaction keys and the
// rest.
func (t Topic) validateCompaction() error {
	if t.MaxCompactionLagMs != Unbounded && t.MinCompactionLagMs > t.MaxCompactionLagMs {
		return &Error{Key: "min.compaction.lag.ms", Value: FormatMillis(t.MinCompactionLagMs),
			Reason:  "must not exceed max.compaction.lag.ms (" + FormatMillis(t.MaxCompactionLagMs) + ")",
			Allowed: "a duration from 0 to max.compaction.lag.ms"}
	}
	// A compacted topic may be tiered (unlike Kafka's, KIP-405): its
	// leader's cold cleaner compacts the objects in the bucket, and the
	// hot cleaner rewrites only segments the cold tier holds already.
	return nil
}

// Set parses value and checks it against the key's own range, then stores
// it. Rules between keys are left to Validate, so keys can be set in any
// order; call Validate (or use With) before publishing the result. On error
// t is unchanged. An unknown key is an *Error listing the known ones.
func (t *Topic) Set(key, value string) error {
	k, ok := lookupTopicKey(key)
	if !ok {
		return unknownKey(key, topicKeyNames())
	}
	c := *t
	if err := k.set(&c, value); err != nil {
		e := &Error{Key: key, Value: value, Allowed: k.info.Allowed}
		if pe, ok := err.(*Error); ok && pe.Reason != "" {
			e.Reason = pe.Reason
		}
		return e
	}
	if reason := k.check(&c); reason != "" {
		return &Error{Key: key, Value: value, Allowed: k.info.Allowed, Reason: reason}
	}
	*t = c
	return nil
}

// Get returns the canonical string form of one key: plain milliseconds and
// bytes as Kafka writes them, true/false, the canonical enum spelling.
func (t Topic) Get(key string) (string, error) {
	k, ok := lookupTopicKey(key)
	if !ok {
		return "", unknownKey(key, topicKeyNames())
	}
	return k.get(&t), nil
}

// Map returns every key in canonical form (see Get). ParseTopic(t.Map())
// gives t back.
func (t Topic) Map() map[string]string {
	keys := topicKeys()
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		m[k.info.Name] = k.get(&t)
	}
	return m
}

// With returns t with overrides applied and validated: how a topic's
// effective config is built from the broker's defaults and its own
// overrides, and how "alter config" builds the next snapshot. Unknown keys
// are reported first, then keys are applied in TopicKeys order, so the
// error for a given input is always the same one.
func (t Topic) With(overrides map[string]string) (Topic, error) {
	names := make([]string, 0, len(overrides))
	for name := range overrides {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := lookupTopicKey(name); !ok {
			return Topic{}, unknownKey(name, topicKeyNames())
		}
	}
	for _, k := range topicKeys() {
		if v, ok := overrides[k.info.Name]; ok {
			if err := t.Set(k.info.Name, v); err != nil {
				return Topic{}, err
			}
		}
	}
	if err := t.Validate(); err != nil {
		return Topic{}, err
	}
	return t, nil
}

// ParseTopic returns the built-in defaults with overrides applied, validated.
func ParseTopic(overrides map[string]string) (Topic, error) {
	return DefaultTopic().With(overrides)
}

// lookupTopicKey finds a key by its exact name; Kafka's names are
// lower-case and so are ours.
func lookupTopicKey(name string) (topicKey, bool) {
	keys := topicKeys()
	i := slices.IndexFunc(keys, func(k topicKey) bool { return k.info.Name == name })
	if i < 0 {
		return topicKey{}, false
	}
	return keys[i], true
}

// topicKeyNames lists the keys for unknown-key errors.
func topicKeyNames() []string {
	keys := topicKeys()
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.info.Name
	}
	return names
}

// canonicalEnum returns the allowed spelling matching s case-insensitively.
func canonicalEnum[T ~string](s string, values []T) (T, bool) {
	in := strings.TrimSpace(s)
	for _, v := range values {
		if strings.EqualFold(in, string(v)) {
			return v, true
		}
	}
	return "", false
}
