package kafka

// Settings under their Kafka names, for the config APIs (CreateTopics,
// DescribeConfigs, AlterConfigs, IncrementalAlterConfigs).
//
// Topic settings: Strata's topic keys are Kafka's names already
// (config/topic_keys.go: retention.ms, local.retention.bytes,
// remote.storage.enable, min.insync.replicas, max.message.bytes,
// compression.type, message.timestamp.*, cleanup.policy,
// min.cleanable.dirty.ratio, min/max.compaction.lag.ms,
// delete.retention.ms, ...), and Strata's own keys (remote.max.lag.ms,
// flush.policy, replication.factor, ...) keep theirs; a value is passed to
// the broker as given, so the broker's rules and messages apply. Kafka
// keys Strata has no setting for are refused by the broker as unknown
// (INVALID_CONFIG naming the key and the known ones): never a silent
// default.
//
// Sources: a topic's override is DYNAMIC_TOPIC_CONFIG, a broker's
// topic_defaults differing from the built-in default is
// STATIC_BROKER_CONFIG (under Kafka's broker name, brokerNames), the rest
// DEFAULT_CONFIG. replication.factor is read-only: it is fixed at creation.
//
// Broker settings (resource type BROKER) are the broker's start-time
// settings that have Kafka names, all read-only (brokerConfigs).

import (
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
)

// Kafka's config sources and types (DescribeConfigs).
const (
	sourceTopic        = kmsg.ConfigSourceDynamicTopicConfig
	sourceStaticBroker = kmsg.ConfigSourceStaticBrokerConfig
	sourceDefault      = kmsg.ConfigSourceDefaultConfig
	typeBoolean        = kmsg.ConfigTypeBoolean
	typeString         = kmsg.ConfigTypeString
	typeInt            = kmsg.ConfigTypeInt
	typeLong           = kmsg.ConfigTypeLong
	typeDouble         = kmsg.ConfigTypeDouble
	typeList           = kmsg.ConfigTypeList
)

// brokerNames are the Kafka broker settings that give topics their
// defaults, by topic key.
var brokerNames = map[string]string{
	"retention.ms":                    "log.retention.ms",
	"retention.bytes":                 "log.retention.bytes",
	"local.retention.ms":              "log.local.retention.ms",
	"local.retention.bytes":           "log.local.retention.bytes",
	"segment.bytes":                   "log.segment.bytes",
	"segment.ms":                      "log.roll.ms",
	"replication.factor":              "default.replication.factor",
	"min.insync.replicas":             "min.insync.replicas",
	"max.message.bytes":               "message.max.bytes",
	"compression.type":                "compression.type",
	"message.timestamp.type":          "log.message.timestamp.type",
	"message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
	"message.timestamp.after.max.ms":  "log.message.timestamp.after.max.ms",
	"flush.ms":                        "log.flush.interval.ms",
	"unclean.leader.election.enable":  "unclean.leader.election.enable",
	"cleanup.policy":                  "log.cleanup.policy",
	"delete.retention.ms":             "log.cleaner.delete.retention.ms",
	"min.compaction.lag.ms":           "log.cleaner.min.compaction.lag.ms",
	"max.compaction.lag.ms":           "log.cleaner.max.compaction.lag.ms",
	"min.cleanable.dirty.ratio":       "log.cleaner.min.cleanable.ratio",
}

// readOnlyTopicKeys cannot be altered (the broker refuses them too).
var readOnlyTopicKeys = map[string]bool{"replication.factor": true}

// configEntry is one setting as DescribeConfigs shows it.
type configEntry struct {
	name, value string
	source      kmsg.ConfigSource
	readOnly    bool
	typ         kmsg.ConfigType
	doc         string
	synonyms    []configSynonym
}

type configSynonym struct {
	name, value string
	source      kmsg.ConfigSource
}

func kafkaType(t string) kmsg.ConfigType {
	switch t {
	case "ms", "bytes":
		return typeLong
	case "int":
		return typeInt
	case "bool":
		return typeBoolean
	case "double":
		return typeDouble
	case "list":
		return typeList
	}
	return typeString
}

// topicConfigs are a topic's settings: every Strata key, in the table's
// order.
func topicConfigs(defaults config.Topic, d broker.TopicDescription) []configEntry {
	builtin := config.DefaultTopic().Map()
	brokerDefaults := defaults.Map()
	var out []configEntry
	for _, k := range config.TopicKeys() {
		e := configEntry{name: k.Name, value: d.Config[k.Name], source: sourceDefault, readOnly: readOnlyTopicKeys[k.Name],
			typ: kafkaType(k.Type), doc: k.Doc}
		if v, ok := d.Overrides[k.Name]; ok {
			e.source = sourceTopic
			e.synonyms = append(e.synonyms, configSynonym{k.Name, v, sourceTopic})
		}
		if brokerDefaults[k.Name] != builtin[k.Name] {
			if e.source == sourceDefault {
				e.source = sourceStaticBroker
			}
			name := brokerNames[k.Name]
			if name == "" {
				name = k.Name
			}
			e.synonyms = append(e.synonyms, configSynonym{name, brokerDefaults[k.Name], sourceStaticBroker})
		}
		e.synonyms = append(e.synonyms, configSynonym{k.Name, builtin[k.Name], sourceDefault})
		out = append(out, e)
	}
	return out
}

// brokerConfigs are the broker's settings that have Kafka names, all
// read-only: the topic defaults under Kafka's broker names, and the
// broker's own.
func brokerConfigs(b *broker.Broker, kc Config) []configEntry {
	builtin := config.DefaultTopic().Map()
	defaults := b.TopicDefaults().Map()
	var out []configEntry
	for _, k := range config.TopicKeys() {
		name, ok := brokerNames[k.Name]
		if !ok {
			continue
		}
		src := sourceDefault
		if defaults[k.Name] != builtin[k.Name] {
			src = sourceStaticBroker
		}
		out = append(out, configEntry{name: name, value: defaults[k.Name], source: src, readOnly: true, typ: kafkaType(k.Type),
			doc: "The default of topic setting " + k.Name + ": " + k.Doc})
	}
	s := b.Settings()
	static := func(name, value string, typ kmsg.ConfigType, doc string) {
		out = append(out, configEntry{name: name, value: value, source: sourceStaticBroker, readOnly: true, typ: typ, doc: doc})
	}
	id := strconv.Itoa(int(b.ID()))
	static("broker.id", id, typeInt, "node_id")
	static("node.id", id, typeInt, "node_id")
	static("log.dirs", s.DataDir, typeString, "data_dir: the one log dir")
	static("broker.rack", s.Gossip.Rack, typeString, "gossip.rack")
	static("advertised.listeners", "PLAINTEXT://"+kc.Advertise, typeString, "kafka.advertise")
	static("replica.lag.time.max.ms", strconv.FormatInt(time.Duration(s.Replica.LagTimeMax).Milliseconds(), 10), typeLong, "replica.lag_time_max")
	static("remote.log.storage.system.enable", strconv.FormatBool(s.ObjectStore.Type != config.ObjectStoreNone), typeBoolean,
		"object_store.type is not none")
	static("socket.request.max.bytes", strconv.Itoa(kc.MaxRequestBytes), typeInt, "the Kafka listener's frame limit")
	static("connections.max.idle.ms", strconv.FormatInt(kc.IdleTimeout.Milliseconds(), 10), typeLong, "the Kafka listener's idle timeout")
	return out
}

// configRefusal is a Kafka error code and message for a request's
// settings, refused before they reach the broker.
type configRefusal struct {
	code int16
	msg  string
}

func (r *configRefusal) Error() string { return r.msg }

// topicSettings turns Kafka settings (name, value; nil for null) into the
// overrides the broker is asked for; null values and repeated names are
// refused.
func topicSettings(names []string, values []*string) (map[string]string, *configRefusal) {
	out := make(map[string]string, len(names))
	seen := map[string]bool{}
	for i, name := range names {
		if seen[name] {
			return nil, &configRefusal{kerr.InvalidRequest.Code, fmt.Sprintf("setting %q is given more than once", name)}
		}
		seen[name] = true
		if values[i] == nil {
			return nil, &configRefusal{kerr.InvalidConfig.Code, fmt.Sprintf("setting %q has a null value: give a value", name)}
		}
		out[name] = *values[i]
	}
	return out, nil
}
