package broker

// Topic admin and cluster metadata. Writes go through the controller (the
// metadata group's leader); on success the call waits until this broker has
// applied the change, so a topic is ready for produce here as soon as its
// creation returns.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/tiering"
)

// CreateTopic creates a topic. partitions 0 means 1; replicationFactor 0
// means the replication.factor setting (the topic's, else the broker's
// default); negative counts are INVALID_REQUEST, and so is a
// replicationFactor that differs from a replication.factor in overrides.
// The settings are validated against this broker's defaults, and a topic
// that would put more partition replicas on a broker than the limit allows
// (limits.go) is refused.
func (b *Broker) CreateTopic(ctx context.Context, name string, partitions, replicationFactor int32, overrides map[string]string) (TopicDescription, error) {
	return forward(b, ctx, func() (TopicDescription, error) {
		return b.createTopic(ctx, name, partitions, replicationFactor, overrides)
	}, func(c ControllerClient) (TopicDescription, error) {
		d, err := c.CreateTopic(ctx, name, partitions, replicationFactor, overrides)
		if err != nil {
			return d, err
		}
		return b.describeApplied(ctx, d), nil
	})
}

func (b *Broker) createTopic(ctx context.Context, name string, partitions, replicationFactor int32, overrides map[string]string) (TopicDescription, error) {
	nt, err := b.newTopic(name, partitions, replicationFactor, overrides)
	if err != nil {
		return TopicDescription{}, err
	}
	t, err := b.meta.CreateTopic(ctx, name, nt.partitions, nt.cfg.ReplicationFactor, nt.overrides)
	if err != nil {
		return TopicDescription{}, clusterError(err)
	}
	if err := b.waitReconciled(ctx, b.meta.Metadata().Version); err != nil {
		return TopicDescription{}, err
	}
	b.awaitTierLoaded(ctx, t.ID, time.Second)
	return b.describe(t), nil
}

// ValidateCreateTopic answers as CreateTopic would, creating nothing: nil
// for a topic CreateTopic would create now (as this broker's metadata has
// it), else CreateTopic's refusal, TOPIC_ALREADY_EXISTS included.
func (b *Broker) ValidateCreateTopic(name string, partitions, replicationFactor int32, overrides map[string]string) error {
	if _, err := b.newTopic(name, partitions, replicationFactor, overrides); err != nil {
		return err
	}
	if t, ok := b.meta.Metadata().Topic(name); ok {
		return refuse(ReasonTopicAlreadyExists, nil, "topic %q already exists (id %s)", name, t.ID).with("topic_id", t.ID)
	}
	return nil
}

// newTopic is a topic CreateTopic is asked for, checked: its partition
// count, settings and overrides in canonical form.
type newTopic struct {
	partitions int32
	cfg        config.Topic
	overrides  map[string]string
}

func (b *Broker) newTopic(name string, partitions, replicationFactor int32, overrides map[string]string) (newTopic, error) {
	return b.role.newTopic(name, partitions, replicationFactor, overrides)
}

func (b clusterMember) newTopic(name string, partitions, replicationFactor int32, overrides map[string]string) (newTopic, error) {
	if err := cluster.ValidateTopicName(name); err != nil {
		return newTopic{}, refuse(ReasonInvalidTopicName, err, "%v", err)
	}
	if partitions == 0 {
		partitions = 1
	}
	if partitions < 0 || partitions > cluster.MaxPartitions {
		return newTopic{}, refuse(ReasonInvalidRequest, nil, "partitions %d: want 1 to %d (cluster.MaxPartitions), or 0 for 1", partitions, cluster.MaxPartitions)
	}
	if err := checkReplicationFactor(replicationFactor); err != nil {
		return newTopic{}, err
	}
	overrides = maps.Clone(overrides)
	if overrides == nil {
		overrides = map[string]string{}
	}
	if replicationFactor > 0 {
		if v, ok := overrides["replication.factor"]; ok {
			given := config.DefaultTopic()
			if err := given.Set("replication.factor", v); err != nil {
				return newTopic{}, configError(err)
			}
			if given.ReplicationFactor != int(replicationFactor) {
				return newTopic{}, refuse(ReasonInvalidRequest, nil,
					"replication_factor %d and the setting replication.factor=%s disagree: give one of them, or the same value in both", replicationFactor, v).
					with("replication_factor", itoa(int64(replicationFactor))).with("key", "replication.factor").with("value", v)
			}
		}
		overrides["replication.factor"] = strconv.Itoa(int(replicationFactor))
	}
	cfg, err := b.defaults.With(overrides)
	if err != nil {
		return newTopic{}, configError(err)
	}
	canonical, err := canonicalOverrides(cfg, overrides)
	if err != nil {
		return newTopic{}, configError(err)
	}
	if err := b.checkReplicaBudget(name, partitions, cfg.ReplicationFactor); err != nil {
		return newTopic{}, err
	}
	return newTopic{partitions: partitions, cfg: cfg, overrides: canonical}, nil
}

// checkReplicationFactor refuses a negative replication factor: 0 asks for
// the replication.factor setting, and -1 is not a shorthand for it.
func checkReplicationFactor(rf int32) error {
	if rf < 0 {
		return refuse(ReasonInvalidRequest, nil, "replication factor %d: want 1 or more, or 0 for the replication.factor setting", rf).
			with("replication_factor", itoa(int64(rf)))
	}
	return nil
}

// canonicalOverrides keeps the overridden keys in the canonical form the
// parsed settings give them, so the metadata never stores "7d" for one topic
// and "604800000" for another.
func canonicalOverrides(cfg config.Topic, overrides map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(overrides))
	for k := range overrides {
		v, err := cfg.Get(k)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// DeleteTopic deletes a topic and, on every broker, its data; the cold tier
// goes too, in the background (objects left by a failure there are under the
// deleted topic's id, so no later topic of the same name sees them).
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	return b.role.deleteTopic(ctx, name)
}

func (b clusterMember) deleteTopic(ctx context.Context, name string) error {
	t, ok := b.meta.Metadata().Topic(name)
	if err := b.meta.DeleteTopic(ctx, name); err != nil {
		c := b.controllerFor(ctx, err)
		if c == nil {
			return clusterError(err)
		}
		if err := c.DeleteTopic(ctx, name); err != nil {
			return err
		}
		b.awaitApplied(ctx, func(m *cluster.Metadata) bool {
			now, there := m.Topic(name)
			return !there || !ok || now.ID != t.ID
		})
		return nil
	}
	if ok && b.store != nil {
		b.goTask(func(life context.Context) {
			dctx, cancel := context.WithTimeout(life, 10*time.Minute)
			defer cancel()
			if err := tiering.DeleteTopic(dctx, b.store, t.Name, t.ID); err != nil {
				b.log.Warn("deleting the cold tier of a deleted topic failed", "topic", t.Name, "id", t.ID, "err", err)
			}
		})
	}
	return b.waitReconciled(ctx, b.meta.Metadata().Version)
}

// RestoreTopic brings a topic back from the cold tier: it is created again
// under the id its objects carry (the most recently written one when id is
// empty), with the partitions and settings its manifests recorded; its
// leaders then continue the log where the cold tier ends.
func (b *Broker) RestoreTopic(ctx context.Context, name, id string, replicationFactor int32) (TopicDescription, error) {
	return forward(b, ctx, func() (TopicDescription, error) {
		return b.restoreTopic(ctx, name, id, replicationFactor)
	}, func(c ControllerClient) (TopicDescription, error) {
		d, err := c.RestoreTopic(ctx, name, id, replicationFactor, RestoreCopy{})
		if err != nil {
			return d, err
		}
		return b.describeApplied(ctx, d), nil
	})
}

func (b *Broker) restoreTopic(ctx context.Context, name, id string, replicationFactor int32) (TopicDescription, error) {
	return b.role.restoreTopic(ctx, name, id, replicationFactor)
}

func (b clusterMember) restoreTopic(ctx context.Context, name, id string, replicationFactor int32) (TopicDescription, error) {
	if b.store == nil {
		return TopicDescription{}, refuse(ReasonInvalidRequest, nil, "this broker has no object store (object_store.type is none)")
	}
	if err := cluster.ValidateTopicName(name); err != nil {
		return TopicDescription{}, refuse(ReasonInvalidTopicName, err, "%v", err)
	}
	if err := checkReplicationFactor(replicationFactor); err != nil {
		return TopicDescription{}, err
	}
	if live, ok := b.meta.Metadata().Topic(name); ok {
		return TopicDescription{}, b.restoreLiveError(ctx, live)
	}
	found, overrides, cfg, err := b.findRestorable(ctx, name, id, replicationFactor)
	if err != nil {
		return TopicDescription{}, err
	}
	// The restored partitions will remember their idempotent producers by
	// ids this cluster must not hand out again.
	top, err := maxColdProducerID(ctx, b.store, found.Heads)
	if err != nil {
		return TopicDescription{}, refuse(ReasonStorageError, err, "%s: reading the producer state in the bucket: %v", name, err)
	}
	if err := b.checkReplicaBudget(name, found.Partitions, cfg.ReplicationFactor); err != nil {
		return TopicDescription{}, err
	}
	if top >= 0 {
		if err := b.meta.ReserveProducerIDs(ctx, top); err != nil {
			return TopicDescription{}, clusterError(err)
		}
	}
	t, err := b.meta.RestoreTopic(ctx, name, found.TopicID, found.Partitions, cfg.ReplicationFactor, overrides, firstEpochAfter(found.Heads))
	if err != nil {
		return TopicDescription{}, clusterError(err)
	}
	return b.restored(ctx, t)
}

// restored waits until this broker has taken in a restored topic and the
// partitions it leads continue from where their cold tiers end, then
// describes the topic.
func (b *Broker) restored(ctx context.Context, t *cluster.TopicInfo) (TopicDescription, error) {
	if err := b.waitReconciled(ctx, b.meta.Metadata().Version); err != nil {
		return TopicDescription{}, err
	}
	for _, p := range b.partitions() {
		if p.topicID == t.ID && p.isLeader() {
			if err := b.ensureTier(ctx, p); err != nil {
				return TopicDescription{}, err
			}
		}
	}
	return b.describe(t), nil
}

// restoreLiveError answers a restore of a topic the cluster has. It is
// TOPIC_ALREADY_EXISTS, as a create of that name would be: restore
// creates the topic again, and the name is taken. (TOPIC_NOT_FOUND, the
// answer when the bucket held nothing, sent the user looking for a topic
// that is plainly there.) The message says whether the bucket holds
// anything of it, since that is what the user wanted to know.
func (b *Broker) restoreLiveError(ctx context.Context, t *cluster.TopicInfo) error {
	msg := fmt.Sprintf("topic %q exists (id %s): restore brings back only a topic the cluster no longer has", t.Name, t.ID)
	switch _, err := tiering.FindTopic(ctx, b.store, t.Name, t.ID); {
	case errors.Is(err, tiering.ErrNoColdTopic):
		msg += ", and nothing of it is in the bucket to restore"
	case err == nil:
		msg += "; its history in the bucket is served as it is (strata topic describe shows it)"
	}
	return refuse(ReasonTopicAlreadyExists, nil, "%s", msg).with("topic_id", t.ID)
}

// AlterTopicConfig sets and removes per-topic settings; they take effect on
// every replica without a restart. For a topic with a cold tier it answers
// success only once every partition's manifest in the bucket records them
// (awaitConfigInBucket), within the request's deadline: until then a
// restore from the bucket would bring back the old ones. Otherwise it
// answers TIMEOUT (retriable) naming the partitions whose manifests lack
// them; the change itself is made and in force.
func (b *Broker) AlterTopicConfig(ctx context.Context, name string, set map[string]string, del []string) (TopicDescription, error) {
	return forward(b, ctx, func() (TopicDescription, error) {
		return b.alterTopicConfig(ctx, name, set, del)
	}, func(c ControllerClient) (TopicDescription, error) {
		d, err := c.AlterTopicConfig(ctx, name, set, del)
		if err != nil {
			return d, err
		}
		return b.describeApplied(ctx, d), nil
	})
}

func (b *Broker) alterTopicConfig(ctx context.Context, name string, set map[string]string, del []string) (TopicDescription, error) {
	canonical, err := b.topicConfigChange(ctx, name, set, del)
	if err != nil {
		return TopicDescription{}, err
	}
	t, err := b.meta.AlterTopicConfig(ctx, name, canonical, del)
	if err != nil {
		return TopicDescription{}, clusterError(err)
	}
	if err := b.waitReconciled(ctx, b.meta.Metadata().Version); err != nil {
		return TopicDescription{}, err
	}
	if err := b.awaitConfigInBucket(ctx, name, t.ID); err != nil {
		return TopicDescription{}, err
	}
	return b.describe(t), nil
}

// ValidateTopicConfig answers as AlterTopicConfig would, changing
// nothing: nil for a change it would make now, else its refusal.
func (b *Broker) ValidateTopicConfig(ctx context.Context, name string, set map[string]string, del []string) error {
	_, err := b.topicConfigChange(ctx, name, set, del)
	return err
}

// topicConfigChange checks a change of a topic's settings and returns the
// settings to set, in canonical form.
func (b *Broker) topicConfigChange(ctx context.Context, name string, set map[string]string, del []string) (map[string]string, error) {
	return b.role.topicConfigChange(ctx, name, set, del)
}

func (b clusterMember) topicConfigChange(ctx context.Context, name string, set map[string]string, del []string) (map[string]string, error) {
	t, ok := b.topicMetadata(name).Topic(name)
	if !ok {
		return nil, refuse(ReasonTopicNotFound, nil, "topic %q not found", name)
	}
	next := maps.Clone(t.Config)
	maps.Copy(next, set)
	for _, k := range del {
		if _, err := config.DefaultTopic().Get(k); err != nil {
			return nil, configError(err)
		}
		delete(next, k)
	}
	if rf, ok := next["replication.factor"]; ok && rf != t.Config["replication.factor"] {
		return nil, refuse(ReasonInvalidConfig, nil, "replication.factor of an existing topic cannot be changed by altering its settings").
			with("key", "replication.factor").with("value", rf).with("allowed", t.Config["replication.factor"])
	}
	cfg, err := b.defaults.With(next)
	if err != nil {
		return nil, configError(err)
	}
	if err := b.checkRemoteDisable(ctx, t, cfg); err != nil {
		return nil, err
	}
	canonical, err := canonicalOverrides(cfg, set)
	if err != nil {
		return nil, configError(err)
	}
	return canonical, nil
}

// ListTopics lists every topic.
func (b *Broker) ListTopics() []TopicSummary {
	return b.role.listTopics()
}

func (b clusterMember) listTopics() []TopicSummary {
	m := b.meta.Metadata()
	out := []TopicSummary{}
	for _, name := range m.TopicNames() {
		t, _ := m.Topic(name)
		rf := int32(0)
		if len(t.Partitions) > 0 {
			rf = int32(len(t.Partitions[0].Replicas))
		}
		out = append(out, TopicSummary{Name: name, Partitions: int32(len(t.Partitions)), ReplicationFactor: rf})
	}
	return out
}

// DescribeTopic describes a topic: settings, partitions and, for the
// partitions held here, their logs.
func (b *Broker) DescribeTopic(name string) (TopicDescription, error) {
	return b.role.describeTopic(name)
}

func (b clusterMember) describeTopic(name string) (TopicDescription, error) {
	t, ok := b.topicMetadata(name).Topic(name)
	if !ok {
		return TopicDescription{}, refuse(ReasonTopicNotFound, nil, "topic %q not found", name)
	}
	return b.describe(t), nil
}

func (b *Broker) describe(t *cluster.TopicInfo) TopicDescription {
	cfg, err := b.defaults.With(t.Config)
	if err != nil {
		cfg = b.defaults
	}
	d := TopicDescription{Name: t.Name, ID: t.ID, Config: cfg.Map(), Overrides: maps.Clone(t.Config)}
	for _, info := range t.Partitions {
		pd := PartitionDescription{PartitionView: partitionView(info), HeadAgeMs: -1}
		b.mu.RLock()
		p, ok := b.mu.partitions[cluster.TopicPartition{Topic: t.Name, Partition: info.Partition}]
		b.mu.RUnlock()
		if ok && p.topicID == t.ID {
			segs := p.log.Segments()
			tier := p.tier.Load()
			pd.Hosted = true
			pd.LogStartOffset = p.logStart()
			pd.HighWatermark = p.log.HighWatermark()
			pd.LogEndOffset = p.log.LogEndOffset()
			pd.LocalStartOffset = p.log.LogStartOffset()
			pd.LocalSegments = int32(len(segs))
			for _, s := range segs {
				pd.LocalBytes += s.Size
			}
			pd.ColdBytes, pd.ColdSegments, pd.ColdEndOffset = tier.coldBytes, int32(tier.coldSegments), tier.coldEnd
			lagBytes, lagSegs := p.uploadLag()
			pd.UploadLagMs = -1
			if p.uploads(b) {
				pd.UploadLagBytes, pd.UploadLagSegs = lagBytes, int32(lagSegs)
				// Until the manifest head is read, the figures above are
				// the local log's alone: say so rather than pass them off
				// as the partition's.
				pd.ColdLoading = !tier.loaded
				if age, ok := p.uploadLagAge(p.now()); ok {
					pd.UploadLagMs = age.Milliseconds()
				}
			}
			pd.TieringError = tier.err
		}
		d.Partitions = append(d.Partitions, pd)
	}
	return d
}

func partitionView(info cluster.PartitionInfo) PartitionView {
	return PartitionView{
		Partition:   info.Partition,
		Leader:      info.Leader,
		LeaderEpoch: info.LeaderEpoch,
		Replicas:    append([]int32(nil), info.Replicas...),
		ISR:         append([]int32(nil), info.ISR...),
	}
}

// Cluster returns the brokers and the topics (all, or those named) with
// their leaders. Unknown names are left out.
func (b *Broker) Cluster(topics []string) ClusterView {
	return b.role.cluster(topics)
}

func (b clusterMember) cluster(topics []string) ClusterView {
	m := b.meta.Metadata()
	v := ClusterView{ControllerID: -1, Version: m.Version}
	if id, ok := b.meta.ControllerID(); ok {
		v.ControllerID = id
	}
	for _, id := range m.BrokerIDs() {
		info, _ := m.Broker(id)
		v.Brokers = append(v.Brokers, BrokerView{ID: info.ID, Addr: info.Addr, Rack: info.Rack, KafkaAddr: info.KafkaAddr})
	}
	if len(topics) == 0 {
		topics = m.TopicNames()
	}
	for _, name := range topics {
		t, ok := m.Topic(name)
		if !ok {
			continue
		}
		tv := TopicView{Name: t.Name, ID: t.ID}
		for _, info := range t.Partitions {
			tv.Partitions = append(tv.Partitions, partitionView(info))
		}
		v.Topics = append(v.Topics, tv)
	}
	return v
}

// configError turns a settings error into INVALID_CONFIG naming the key, the
// value and what is allowed.
func configError(err error) error {
	var ce *config.Error
	if errors.As(err, &ce) {
		return refuse(ReasonInvalidConfig, err, "%v", err).with("key", ce.Key).with("value", ce.Value).with("allowed", ce.Allowed)
	}
	return refuse(ReasonInvalidConfig, err, "%v", err)
}

// clusterError translates the metadata group's refusals.
func clusterError(err error) error {
	var nc *cluster.NotControllerError
	switch {
	case errors.Is(err, cluster.ErrTopicExists):
		return refuse(ReasonTopicAlreadyExists, err, "%v", err)
	case errors.Is(err, cluster.ErrTopicNotFound):
		return refuse(ReasonTopicNotFound, err, "%v", err)
	case errors.Is(err, cluster.ErrPartitionNotFound):
		return refuse(ReasonPartitionNotFound, err, "%v", err)
	case errors.Is(err, cluster.ErrInvalidTopicName):
		return refuse(ReasonInvalidTopicName, err, "%v", err)
	case errors.Is(err, cluster.ErrNotEnoughBrokers), errors.Is(err, cluster.ErrInvalidReplicationFactor):
		return refuse(ReasonInvalidConfig, err, "%v", err).with("key", "replication.factor")
	case errors.Is(err, cluster.ErrInvalidPartitions), errors.Is(err, cluster.ErrInvalidOffsetCommit), errors.Is(err, cluster.ErrInvalidConfig),
		errors.Is(err, cluster.ErrInvalidISR), errors.Is(err, cluster.ErrNotInISR):
		// Requests that cannot succeed as they are: retrying would not help.
		return refuse(ReasonInvalidRequest, err, "%v", err)
	case errors.Is(err, cluster.ErrStaleEpoch):
		return refuse(ReasonFencedEpoch, err, "%v", err)
	case errors.As(err, &nc):
		return refuse(ReasonUnavailable, err, "%v", err).with("controller_id", strconv.Itoa(int(nc.ControllerID))).with("controller_address", nc.Addr)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, cluster.ErrOutcomeUnknown):
		return refuse(ReasonTimeout, err, "%v", err)
	}
	return refuse(ReasonUnavailable, err, "%v", err)
}

// firstEpochAfter is the leader epoch a topic restored under its own id
// starts in: above every epoch its manifests were written in, so its
// leaders take them over instead of finding themselves fenced by a
// predecessor (tiering.NewCommitter).
func firstEpochAfter(heads map[int32]*tiering.Head) int32 {
	first := int32(0)
	for _, h := range heads {
		if h != nil {
			first = max(first, h.LeaderEpoch+1)
		}
	}
	return first
}

// findRestorable finds a topic's manifests in the bucket (the most recently
// written topic of that name when id is empty) and the settings a restore
// of it takes: what its heads record, with replicationFactor (when above
// 0) in place of theirs, over this broker's defaults.
func (b *Broker) findRestorable(ctx context.Context, name, id string, replicationFactor int32) (*tiering.ColdTopic, map[string]string, config.Topic, error) {
	found, err := tiering.FindTopic(ctx, b.store, name, id)
	if err != nil {
		if errors.Is(err, tiering.ErrNoColdTopic) {
			what := fmt.Sprintf("topic %q", name)
			if id != "" {
				what = fmt.Sprintf("topic %q with id %s", name, id)
			}
			return nil, nil, config.Topic{}, refuse(ReasonTopicNotFound, err, "the bucket holds nothing of %s to restore", what)
		}
		return nil, nil, config.Topic{}, refuse(ReasonStorageError, err, "%v", err)
	}
	overrides := maps.Clone(found.Config)
	if overrides == nil {
		overrides = map[string]string{}
	}
	if replicationFactor > 0 {
		overrides["replication.factor"] = strconv.Itoa(int(replicationFactor))
	}
	// A restored topic's history is in the bucket alone: it is tiered
	// whatever this broker's topic defaults say, or its leaders would
	// neither read that history nor continue the log after it (they would
	// hand out its offsets again).
	overrides["remote.storage.enable"] = "true"
	cfg, err := b.defaults.With(overrides)
	if err != nil {
		return nil, nil, config.Topic{}, configError(err)
	}
	return found, overrides, cfg, nil
}
