package config

import (
	"math"
	"strconv"
	"strings"
)

// topicKey is one row of the topic key table, which drives Set, Get, Map,
// Validate and TopicKeys so they cannot disagree about a key.
type topicKey struct {
	info KeyInfo // Default is filled in by TopicKeys from DefaultTopic
	// set parses s into the key's field; errors are bare *Error values that
	// Set completes with the key.
	set func(t *Topic, s string) error
	// check returns why the key's current value is out of range, or "".
	check func(t *Topic) string
	// get returns the canonical string form of the field.
	get func(t *Topic) string
}

// topicKeys returns the table in its documented order. It is built on each
// call rather than kept in a package variable, so there is no shared state
// to mutate; it is small and the callers are not hot paths.
func topicKeys() []topicKey {
	return []topicKey{
		msKey("retention.ms",
			"How long records are kept, in both tiers. -1 keeps them forever.",
			"a duration such as 90d, 6h, 30m or -1 for unbounded",
			func(t *Topic) *int64 { return &t.RetentionMs }, 1, true),
		bytesKey("retention.bytes",
			"Largest size of a partition across both tiers before its oldest segments are deleted. -1 is unbounded.",
			"a size such as 500GiB or 2TB or -1 for unbounded",
			func(t *Topic) *int64 { return &t.RetentionBytes }, 1, 0, true),
		cleanupPolicyKey(),
		unboundedAtMax(msKey("delete.retention.ms",
			"How long a tombstone (a keyed record with a null value) stays readable in a compacted topic after the cleaner reaches it, so consumers reading behind see the delete. -1 keeps tombstones forever.",
			"a duration such as 1d or 0, or -1 to keep tombstones forever",
			func(t *Topic) *int64 { return &t.DeleteRetentionMs }, 0, true)),
		msKey("min.compaction.lag.ms",
			"Youngest a record may be and still be cleaned from a compacted topic: newer records stay whatever keys follow them.",
			"a duration such as 1h or 0, up to max.compaction.lag.ms",
			func(t *Topic) *int64 { return &t.MinCompactionLagMs }, 0, false),
		unboundedAtMax(msKey("max.compaction.lag.ms",
			"Longest a record of a compacted topic may wait before it can be cleaned, whatever min.cleanable.dirty.ratio says. -1 leaves cleaning to the ratio.",
			"a duration of at least 1ms, such as 7d, or -1 for no bound",
			func(t *Topic) *int64 { return &t.MaxCompactionLagMs }, 1, true)),
		ratioKey("min.cleanable.dirty.ratio",
			"Share of a compacted partition's log not yet cleaned at which the cleaner takes it: lower cleans more often, higher wastes more space.",
			func(t *Topic) *float64 { return &t.MinCleanableDirtyRatio }),
		msKey("local.retention.ms",
			"How long uploaded segments stay on local disk as well. -1 keeps them as long as retention.ms.",
			"a duration such as 1d, 6h, 30m or -1 for as long as retention.ms",
			func(t *Topic) *int64 { return &t.LocalRetentionMs }, 1, true),
		bytesKey("local.retention.bytes",
			"Largest size of a partition's uploaded segments kept on local disk as well. -1 keeps as much as retention.bytes.",
			"a size such as 50GiB or -1 for as much as retention.bytes",
			func(t *Topic) *int64 { return &t.LocalRetentionBytes }, 1, 0, true),
		boolKey("remote.storage.enable",
			"Upload sealed segments to the object store and serve old offsets from there.",
			func(t *Topic) *bool { return &t.RemoteStorageEnable }),
		msKey("remote.max.lag.ms",
			"Longest an acknowledged record may stay out of the object store: the leader seals the active segment early so it is uploaded in time. -1 leaves the tail to segment.ms and segment.bytes.",
			"a duration of at least 1s, such as 10m, or -1 to wait for the segment to roll",
			func(t *Topic) *int64 { return &t.RemoteMaxLagMs }, 1000, true),
		bytesKey("remote.read.bytes.per.sec",
			"Bytes per second that cold reads of the topic may fetch from the object store, on each broker. -1 leaves them to the broker's tiering.cold_read_bytes_per_sec.",
			"a size per second of at least 64KiB, such as 50MiB, or -1 for no bound of the topic's own",
			func(t *Topic) *int64 { return &t.RemoteReadBytesPerSec }, 64<<10, 0, true),
		countKey("remote.read.gets.per.sec",
			"GETs per second that cold reads of the topic may send to the object store, on each broker. -1 leaves them to the broker's tiering.cold_read_gets_per_sec.",
			"a count of at least 1, such as 100, or -1 for no bound of the topic's own",
			func(t *Topic) *int64 { return &t.RemoteReadGetsPerSec }),
		bytesKey("segment.bytes",
			"Size at which the active segment is rolled. At most 1GiB: positions in a segment file are 32-bit.",
			"a size from 16KiB to 1GiB",
			func(t *Topic) *int64 { return &t.SegmentBytes }, 16<<10, 1<<30, false),
		msKey("segment.ms",
			"Age at which the active segment is rolled even if not full, so it can be uploaded and expire.",
			"a duration of at least 1s, such as 1h or 30m",
			func(t *Topic) *int64 { return &t.SegmentMs }, 1000, false),
		intKey("replication.factor",
			"Number of replicas of each partition.",
			"an integer from 1 to 7",
			func(t *Topic) *int { return &t.ReplicationFactor }, 1, 7),
		intKey("min.insync.replicas",
			"In-sync replicas an acks=all produce needs; fewer gives NOT_ENOUGH_REPLICAS.",
			"an integer from 1 to replication.factor",
			func(t *Topic) *int { return &t.MinInsyncReplicas }, 1, 7),
		bytesKey("max.message.bytes",
			"Largest batch the leader accepts.",
			"a size from 64 bytes to 64MiB",
			func(t *Topic) *int64 { return &t.MaxMessageBytes }, 64, 64<<20, false),
		enumKey("compression.type",
			"The codec batches are stored in: producer keeps each batch's own; any other makes the leader recompress batches sent in another codec before they are written (offsets, producer ids, sequences and timestamps kept).",
			func(t *Topic) *CompressionType { return &t.CompressionType },
			CompressionProducer, CompressionUncompressed, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd),
		enumKey("message.timestamp.type",
			"CreateTime keeps the producer's timestamps; LogAppendTime stamps batches with the leader's clock.",
			func(t *Topic) *TimestampType { return &t.MessageTimestampType }, CreateTime, LogAppendTime),
		timestampBoundKey("message.timestamp.before.max.ms",
			"How far behind the leader's clock a produced record's timestamp may be under CreateTime; older ones are refused with INVALID_TIMESTAMP. -1 allows any past time, as backfills of history need.",
			"a duration such as 7d or 0, or -1 for unbounded",
			func(t *Topic) *int64 { return &t.MessageTimestampBeforeMaxMs }),
		timestampBoundKey("message.timestamp.after.max.ms",
			"How far ahead of the leader's clock a produced record's timestamp may be under CreateTime; later ones are refused with INVALID_TIMESTAMP, since they would hold their segment past retention.ms. -1 allows any future time.",
			"a duration such as 1h or 0, or -1 for unbounded",
			func(t *Topic) *int64 { return &t.MessageTimestampAfterMaxMs }),
		enumKey("flush.policy",
			"When appends are fsynced. always (the default): a write is acknowledged once every in-sync replica has fsynced it, so no crash loses it. "+
				"interval: once every in-sync replica has written it (page cache), with the fsync following within flush.ms; "+
				"an acknowledged write is lost if every in-sync replica loses power (or its OS crashes) within flush.ms of it. "+
				"never: as interval, with writeback left to the OS.",
			func(t *Topic) *FlushPolicy { return &t.FlushPolicy }, FlushAlways, FlushInterval, FlushNever),
		msKey("flush.ms",
			"How often appends are fsynced when flush.policy is interval: the window in which a power cut of every in-sync replica loses acknowledged writes.",
			"a duration of at least 1ms, such as 100ms",
			func(t *Topic) *int64 { return &t.FlushMs }, 1, false),
		boolKey("unclean.leader.election.enable",
			"Let a replica outside the ISR become leader when no ISR member is left, losing acknowledged records.",
			func(t *Topic) *bool { return &t.UncleanLeaderElectionEnable }),
	}
}

// msKey is a *.ms key: at least min milliseconds, or Unbounded if allowed.
func msKey(name, doc, allowed string, field func(*Topic) *int64, min int64, unbounded bool) topicKey {
	return topicKey{
		info: KeyInfo{Name: name, Type: "ms", Allowed: allowed, Doc: doc},
		set: func(t *Topic, s string) error {
			v, err := ParseMillis(s)
			if err != nil {
				return err
			}
			*field(t) = v
			return nil
		},
		check: func(t *Topic) string {
			v := *field(t)
			if v >= min || (unbounded && v == Unbounded) {
				return ""
			}
			if v == Unbounded {
				return "-1 (unbounded) is not allowed here"
			}
			return "must be at least " + FormatMillis(min)
		},
		get: func(t *Topic) string { return strconv.FormatInt(*field(t), 10) },
	}
}

// timestampBoundKey is a bound on produced timestamps (KIP-937): a
// duration of at least 0, or Unbounded (see unboundedAtMax).
func timestampBoundKey(name, doc, allowed string, field func(*Topic) *int64) topicKey {
	return unboundedAtMax(msKey(name, doc, allowed, field, 0, true))
}

// unboundedAtMax makes an unbounded-capable *.ms key read Long.MAX_VALUE,
// Kafka's spelling of unbounded (its default for
// message.timestamp.before.max.ms and max.compaction.lag.ms), as -1, so a
// setting copied from Kafka means the same here and shows as the default
// it is.
func unboundedAtMax(k topicKey) topicKey {
	set := k.set
	k.set = func(t *Topic, s string) error {
		if err := set(t, s); err != nil {
			return err
		}
		if v, err := ParseMillis(s); err == nil && v == math.MaxInt64 {
			return set(t, "-1")
		}
		return nil
	}
	return k
}

// cleanupPolicyKey is cleanup.policy: Kafka's list of delete and compact,
// in any order and case, with spaces allowed around the commas. It is
// stored in its canonical spelling (CleanupPolicy).
func cleanupPolicyKey() topicKey {
	const allowed = "delete, compact or compact,delete"
	return topicKey{
		info: KeyInfo{Name: "cleanup.policy", Type: "list", Allowed: allowed,
			Doc: "How old records leave the log. delete: whole segments go by retention.ms and retention.bytes. " +
				"compact: the cleaner keeps the last record of each key (records must have keys) and retention deletes nothing. " +
				"compact,delete: both. A tiered compacted topic is compacted in the object store too, by its leader."},
		set: func(t *Topic, s string) error {
			p, reason := parseCleanupPolicy(s)
			if reason != "" {
				return &Error{Value: s, Allowed: allowed, Reason: reason}
			}
			t.CleanupPolicy = p
			return nil
		},
		check: func(t *Topic) string {
			switch t.CleanupPolicy {
			case CleanupDelete, CleanupCompact, CleanupCompactDelete:
				return ""
			}
			return "not one of the allowed values"
		},
		get: func(t *Topic) string { return string(t.CleanupPolicy) },
	}
}

// parseCleanupPolicy reads a cleanup.policy list, or says why it cannot.
func parseCleanupPolicy(s string) (CleanupPolicy, string) {
	var compact, del bool
	for _, item := range strings.Split(s, ",") {
		switch strings.ToLower(strings.TrimSpace(item)) {
		case "compact":
			compact = true
		case "delete":
			del = true
		case "":
			return "", "empty policy in the list"
		default:
			return "", "unknown policy " + strconv.Quote(strings.TrimSpace(item))
		}
	}
	switch {
	case compact && del:
		return CleanupCompactDelete, ""
	case compact:
		return CleanupCompact, ""
	}
	return CleanupDelete, ""
}

// ratioKey is a fraction from 0 to 1, written as a decimal number.
func ratioKey(name, doc string, field func(*Topic) *float64) topicKey {
	const allowed = "a number from 0 to 1, such as 0.5"
	return topicKey{
		info: KeyInfo{Name: name, Type: "double", Allowed: allowed, Doc: doc},
		set: func(t *Topic, s string) error {
			v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				return &Error{Value: s, Allowed: allowed}
			}
			*field(t) = v
			return nil
		},
		check: func(t *Topic) string {
			if v := *field(t); !(v >= 0 && v <= 1) { // NaN fails both
				return "must be from 0 to 1"
			}
			return ""
		},
		get: func(t *Topic) string { return strconv.FormatFloat(*field(t), 'g', -1, 64) },
	}
}

// bytesKey is a size key within [min, max] (max 0: no upper bound), or
// Unbounded if allowed.
func bytesKey(name, doc, allowed string, field func(*Topic) *int64, min, max int64, unbounded bool) topicKey {
	return topicKey{
		info: KeyInfo{Name: name, Type: "bytes", Allowed: allowed, Doc: doc},
		set: func(t *Topic, s string) error {
			v, err := ParseBytes(s)
			if err != nil {
				return err
			}
			*field(t) = v
			return nil
		},
		check: func(t *Topic) string {
			v := *field(t)
			switch {
			case unbounded && v == Unbounded:
				return ""
			case v == Unbounded:
				return "-1 (unbounded) is not allowed here"
			case v < min:
				return "must be at least " + FormatBytes(min)
			case max > 0 && v > max:
				return "must be at most " + FormatBytes(max)
			}
			return ""
		},
		get: func(t *Topic) string { return strconv.FormatInt(*field(t), 10) },
	}
}

// countKey is a count of at least 1, or Unbounded.
func countKey(name, doc, allowed string, field func(*Topic) *int64) topicKey {
	return topicKey{
		info: KeyInfo{Name: name, Type: "int", Allowed: allowed, Doc: doc},
		set: func(t *Topic, s string) error {
			v, err := parseInt(s, 63)
			if err != nil {
				return err
			}
			*field(t) = v
			return nil
		},
		check: func(t *Topic) string {
			if v := *field(t); v < 1 && v != Unbounded {
				return "must be at least 1, or -1 for unbounded"
			}
			return ""
		},
		get: func(t *Topic) string { return strconv.FormatInt(*field(t), 10) },
	}
}

// intKey is an integer key within [min, max].
func intKey(name, doc, allowed string, field func(*Topic) *int, min, max int) topicKey {
	return topicKey{
		info: KeyInfo{Name: name, Type: "int", Allowed: allowed, Doc: doc},
		set: func(t *Topic, s string) error {
			v, err := parseInt(s, 32)
			if err != nil {
				return err
			}
			*field(t) = int(v)
			return nil
		},
		check: func(t *Topic) string {
			if v := *field(t); v < min || v > max {
				return "must be from " + itoa(min) + " to " + itoa(max)
			}
			return ""
		},
		get: func(t *Topic) string { return itoa(*field(t)) },
	}
}

// boolKey is a true/false key.
func boolKey(name, doc string, field func(*Topic) *bool) topicKey {
	return topicKey{
		info: KeyInfo{Name: name, Type: "bool", Allowed: allowedBool, Doc: doc},
		set: func(t *Topic, s string) error {
			v, err := parseBool(s)
			if err != nil {
				return err
			}
			*field(t) = v
			return nil
		},
		check: func(*Topic) string { return "" },
		get:   func(t *Topic) string { return strconv.FormatBool(*field(t)) },
	}
}

// enumKey is a key with a fixed set of values, matched case-insensitively
// and stored in the canonical spelling.
func enumKey[T ~string](name, doc string, field func(*Topic) *T, values ...T) topicKey {
	spelled := make([]string, len(values))
	for i, v := range values {
		spelled[i] = string(v)
	}
	allowed := strings.Join(spelled[:len(spelled)-1], ", ") + " or " + spelled[len(spelled)-1]
	return topicKey{
		info: KeyInfo{Name: name, Type: "enum", Allowed: allowed, Doc: doc},
		set: func(t *Topic, s string) error {
			v, ok := canonicalEnum(s, values)
			if !ok {
				return &Error{Value: s, Allowed: allowed}
			}
			*field(t) = v
			return nil
		},
		check: func(t *Topic) string {
			for _, v := range values {
				if *field(t) == v {
					return ""
				}
			}
			return "not one of the allowed values"
		},
		get: func(t *Topic) string { return string(*field(t)) },
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
