package broker

// Read-only replica mode (read_replica: true): a broker attached to a
// bucket, and prefix, that another cluster writes. It serves that
// cluster's sealed history to consumers, so that replays, backfills and
// analytics never touch the writing brokers.
//
// The design, and why:
//
//   - A role of *Broker rather than a type of its own: package rpc, the
//     Kafka front end, the auth layer, the admin endpoint and strata serve
//     all hold a *Broker, and a second serving type would have doubled
//     every one of them. What a replica does differently is the role
//     interface (role.go); its implementation, readOnly
//     (readreplica_role.go and the answers below), is set in Broker.role
//     by Start, and Broker's methods call it without asking which kind
//     of broker they are. Nothing else of the broker is started: no data
//     dir, no gossip, no Raft, no partitions, no tiering loop.
//   - It joins no cluster. The writing cluster does not know it exists,
//     and it knows that cluster only through the bucket: every topic is
//     found by listing the manifest heads (tiering.ListHeads), its settings
//     and partition count are the ones the heads record (invariant 6 puts
//     them there), and what it serves of a partition is what its head
//     lists. Raft and gossip settings are unused, and config validation
//     does not check them.
//   - It never writes to the bucket: the store is opened through the
//     read-only view (objstore.ReaderWithPrefix, objstore.NewDirReader for
//     fs, as strata bucket does), which has no write methods at all. No
//     fencing head, no orphan collection, no retention: those are the
//     writing leader's. Reads go through this broker's own cold reader and
//     chunk cache (tiering.NewColdReader), as any broker's cold reads do.
//   - It follows new uploads by re-reading every known head each
//     read_replica_refresh, and lists the bucket for new topics (and for
//     topics deleted and created again, which get a new id) every
//     replicaScanEvery refreshes: a listing costs a call per thousand
//     objects, a head read one GET per partition. What it serves of a
//     partition ends where its last read head ends (its "high
//     watermark"), so offsets, fetches and describe agree. The age of that
//     read and the head's generation are the replica's staleness, shown in
//     describe (head_age_ms, head_generation) and in
//     strata_read_replica_head_age_seconds.
//   - Every broker is its own cluster of one in the metadata it answers:
//     it names itself leader of every partition it serves and the
//     controller, so a client routes fetches here and topic admin sent
//     here is refused here (READ_REPLICA) rather than forwarded.
//   - Writes are refused with READ_REPLICA: produce, producer ids, topic
//     and ACL admin, offset commits and the replication service. Committed
//     group offsets live in the writing cluster's metadata, so FetchOffsets
//     answers none and a consumer group starts from its reset policy.
//   - Security is unchanged: with security.tls.* the API speaks TLS and
//     authenticates, and since ACLs live in the writing cluster's Raft
//     metadata, which a replica does not read, only superusers (and
//     brokers) pass its ACL checks. Without TLS the loopback-only rule
//     holds as for any broker (for listen and admin.listen).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/tiering"
	"github.com/strata-log/strata/tiering/objstore"
	"github.com/strata-log/strata/tiering/objstore/s3"
)

// replicaScanEvery is how many refreshes pass between two listings of the
// bucket for new topics; the known heads are re-read on every one.
const replicaScanEvery = 10

// replicaReadParallelism bounds the head reads a refresh has in flight.
const replicaReadParallelism = 16

// readReplica is the catalog and serving state of a broker in read-only
// replica mode.
type readReplica struct {
	store   objstore.Reader
	cold    *tiering.ColdReader
	refresh time.Duration
	log     *slog.Logger
	now     func() time.Time

	mu struct {
		sync.RWMutex
		// topics are replaced whole by each refresh, never changed in
		// place, so a reader may keep one after unlocking.
		topics map[string]*replicaTopic
		// version counts the refreshes that changed what is served: the
		// metadata version clients see.
		version uint64
		// changed is closed and replaced when a refresh changed anything,
		// to wake fetches long-polling at a partition's end.
		changed chan struct{}
	}
}

// replicaTopic is one topic as the bucket's heads describe it.
type replicaTopic struct {
	name, id string
	config   map[string]string // the settings the newest head records
	parts    []replicaPartition
}

// replicaPartition is one partition's head as last read.
type replicaPartition struct {
	ref tiering.PartitionRef
	// head is nil while the partition has no manifest head (nothing
	// uploaded yet) or it has never been read.
	head *tiering.Head
	// readAt is when head was last read; zero if never.
	readAt time.Time
	// err is why the last read failed, empty when it did not.
	err string
}

// bounds returns the offsets served: from start up to, not including, end.
// An empty cold tier serves nothing: 0 to 0.
func (p *replicaPartition) bounds() (start, end int64) {
	if p.head == nil || p.head.Empty() {
		return 0, 0
	}
	return p.head.StartOffset(), p.head.EndOffset()
}

// startReadReplica starts b in read-only replica mode: it opens the bucket
// read-only, reads its catalog once (so the broker serves every topic as
// soon as Start returns) and starts the refresh loop.
func (b *Broker) startReadReplica(ctx context.Context) error {
	store, err := OpenReadOnlyStore(ctx, b.cfg)
	if err == nil {
		// Counted as a writing broker's store is, for /metrics.
		b.storeMetrics = &objstore.Metrics{}
		store = objstore.ReaderWithMetrics(store, b.storeMetrics)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("broker: read replica: no fs object store at %s (object_store.path): a read replica reads a store another cluster writes, and creates none", b.cfg.ObjectStorePath())
	}
	if err != nil {
		return fmt.Errorf("broker: read replica: %w", ExplainStoreError(b.cfg, fmt.Errorf("object store: %w", err)))
	}
	r := &readReplica{store: store, refresh: time.Duration(b.cfg.ReadReplicaRefresh), log: b.log, now: time.Now}
	r.mu.topics = map[string]*replicaTopic{}
	r.mu.changed = make(chan struct{})
	ro := readOnly{Broker: b, replica: r}
	b.coldPace = newColdPacer(b.cfg.Tiering, ro.replicaReadLimits)
	b.coldPace.yield = nil // no writers to yield to
	cold, err := tiering.NewColdReader(store, b.coldReaderConfig())
	if err != nil {
		return fmt.Errorf("broker: read replica: cold reader: %w", err)
	}
	r.cold = cold
	if err := r.scan(ctx); err != nil {
		cold.Close()
		return fmt.Errorf("broker: read replica: listing the bucket: %w", ExplainStoreError(b.cfg, err))
	}
	b.role = ro
	b.goLoop(r.refreshLoop)
	return nil
}

// OpenReadOnlyStore opens the store the settings name through the
// read-only view, so nothing that holds it can write to the bucket even by
// mistake: a read replica reading another cluster's bucket, strata bucket
// checking one. Unlike openStore it creates nothing: a missing fs directory
// is an error wrapping fs.ErrNotExist, and a missing bucket is not made.
// Type none is an error.
func OpenReadOnlyStore(ctx context.Context, cfg config.Broker) (objstore.Reader, error) {
	var store objstore.Reader
	var err error
	switch cfg.ObjectStore.Type {
	case config.ObjectStoreFS:
		path, _ := filepath.Abs(cfg.ObjectStorePath())
		store, err = objstore.NewDirReader(path)
	case config.ObjectStoreS3:
		store, err = s3.New(ctx, s3Config(cfg.ObjectStore))
	default:
		err = fmt.Errorf("object_store.type %q: reading a bucket needs fs or s3", cfg.ObjectStore.Type)
	}
	if err != nil {
		return nil, err
	}
	return objstore.ReaderWithPrefix(store, cfg.ObjectStore.Prefix), nil
}

func (r *readReplica) close() { r.cold.Close() }

// refreshLoop re-reads the heads every refresh, and lists the bucket every
// replicaScanEvery refreshes, until ctx ends (which ends a scan under way).
func (r *readReplica) refreshLoop(ctx context.Context) {
	tick := time.NewTicker(r.refresh)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var err error
		if n%replicaScanEvery == 0 {
			err = r.scan(ctx)
		} else {
			r.rereadHeads(ctx)
		}
		if err != nil && ctx.Err() == nil {
			r.log.Warn("read replica: listing the bucket failed; serving the topics found before", "err", err)
		}
	}
}

// scan lists the bucket and rebuilds the catalog from every head found.
// Of two topic ids under one name (a topic deleted and created again whose
// old objects are not gone yet) the one whose heads were written last is
// served, as restore picks it.
func (r *readReplica) scan(ctx context.Context) error {
	heads, err := tiering.ListHeads(ctx, r.store, "")
	if err != nil {
		return err
	}
	now := r.now()
	type idHeads struct {
		newest time.Time
		heads  []tiering.HeadListing
	}
	byName := map[string]map[string]*idHeads{}
	for _, h := range heads {
		ids := byName[h.Ref.Topic]
		if ids == nil {
			ids = map[string]*idHeads{}
			byName[h.Ref.Topic] = ids
		}
		ih := ids[h.Ref.TopicID]
		if ih == nil {
			ih = &idHeads{}
			ids[h.Ref.TopicID] = ih
		}
		if h.ModTime.After(ih.newest) {
			ih.newest = h.ModTime
		}
		ih.heads = append(ih.heads, h)
	}
	topics := map[string]*replicaTopic{}
	for name, ids := range byName {
		var pick string
		for id, ih := range ids {
			if pick == "" || ih.newest.After(ids[pick].newest) || (ih.newest.Equal(ids[pick].newest) && id > pick) {
				pick = id
			}
		}
		topics[name] = buildTopic(name, pick, ids[pick].heads, now)
	}
	r.swap(topics)
	return nil
}

// buildTopic makes a topic's catalog entry from its heads. The partition
// count is the largest a head records (a topic grows, never shrinks), or
// the highest partition found; a partition without a head serves nothing
// yet.
func buildTopic(name, id string, heads []tiering.HeadListing, now time.Time) *replicaTopic {
	t := &replicaTopic{name: name, id: id}
	// A partition number past what any cluster makes is damage, not a
	// reason to allocate for it.
	heads = slices.DeleteFunc(slices.Clone(heads), func(h tiering.HeadListing) bool { return h.Ref.Partition >= cluster.MaxPartitions })
	n := int32(0)
	for _, h := range heads {
		n = max(n, h.Ref.Partition+1)
		if h.Head != nil {
			n = max(n, min(h.Head.Partitions, cluster.MaxPartitions))
		}
	}
	t.parts = make([]replicaPartition, n)
	for i := range t.parts {
		t.parts[i].ref = tiering.PartitionRef{Topic: name, TopicID: id, Partition: int32(i)}
	}
	for _, h := range heads {
		p := &t.parts[h.Ref.Partition]
		if h.Err != nil {
			p.err = h.Err.Error()
			continue
		}
		p.head, p.readAt = h.Head, now
	}
	t.config = topicConfig(t.parts, nil)
	return t
}

// topicConfig returns the topic settings the heads record: those of the
// lowest-numbered partition whose head has any, else old. Every commit
// carries the settings in force and an alter completes only once every
// head carries it (invariant 6), so the heads differ only while an alter
// is under way, and then either answer is one the writer has accepted.
// Generations count each partition's own commits and cannot tell which
// head is newer across partitions.
func topicConfig(parts []replicaPartition, old map[string]string) map[string]string {
	for i := range parts {
		if h := parts[i].head; h != nil && h.Config != nil {
			return h.Config
		}
	}
	return old
}

// rereadHeads reads every known partition's head again, replicaReadParallelism
// at a time: one GET each, and an S3 GET takes milliseconds, so a topic of
// many partitions read one by one would make the refresh interval a lie. A
// failed read keeps the head read before (and its age, which then grows),
// noting why.
func (r *readReplica) rereadHeads(ctx context.Context) {
	r.mu.RLock()
	old := r.mu.topics
	r.mu.RUnlock()
	topics := make(map[string]*replicaTopic, len(old))
	sem := make(chan struct{}, replicaReadParallelism)
	var wg sync.WaitGroup
	for name, t := range old {
		nt := &replicaTopic{name: t.name, id: t.id, config: t.config, parts: append([]replicaPartition(nil), t.parts...)}
		topics[name] = nt
		for i := range nt.parts {
			p := &nt.parts[i]
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				h, _, err := tiering.LoadHead(ctx, r.store, p.ref)
				if err != nil {
					p.err = err.Error()
					return
				}
				p.err, p.readAt = "", r.now()
				if h != nil {
					p.head = h
				}
			}()
		}
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // stopping: the errors say only that
	}
	for _, t := range topics {
		t.config = topicConfig(t.parts, t.config)
	}
	r.swap(topics)
}

// swap installs a new catalog and wakes long-polling fetches when it
// serves anything new.
func (r *readReplica) swap(topics map[string]*replicaTopic) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if catalogChanged(r.mu.topics, topics) {
		r.mu.version++
		close(r.mu.changed)
		r.mu.changed = make(chan struct{})
	}
	r.mu.topics = topics
}

func catalogChanged(a, b map[string]*replicaTopic) bool {
	if len(a) != len(b) {
		return true
	}
	for name, ta := range a {
		tb, ok := b[name]
		if !ok || ta.id != tb.id || len(ta.parts) != len(tb.parts) {
			return true
		}
		for i := range ta.parts {
			ha, hb := ta.parts[i].head, tb.parts[i].head
			if (ha == nil) != (hb == nil) || (ha != nil && ha.Generation != hb.Generation) {
				return true
			}
		}
	}
	return false
}

// topic returns a topic's catalog entry and a channel closed at the next
// change of the catalog.
func (r *readReplica) topic(name string) (*replicaTopic, <-chan struct{}, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.mu.topics[name]
	return t, r.mu.changed, ok
}

func (r *readReplica) partition(topic string, partition int32) (*replicaPartition, <-chan struct{}, error) {
	t, changed, ok := r.topic(topic)
	if !ok {
		return nil, nil, refuse(ReasonTopicNotFound, nil, "topic %q not found in the bucket this read replica serves", topic)
	}
	if partition < 0 || int(partition) >= len(t.parts) {
		return nil, nil, refuse(ReasonPartitionNotFound, nil, "topic %q has no partition %d (it has %d)", topic, partition, len(t.parts))
	}
	return &t.parts[partition], changed, nil
}

func (r *readReplica) knows(topic string) bool {
	_, _, ok := r.topic(topic)
	return ok
}

// fetch serves batches from the bucket up to where the partition's last
// read head ends; at that end it waits up to MaxWait for a refresh that
// serves more.
func (r *readReplica) fetch(ctx context.Context, req FetchRequest) (FetchResult, error) {
	var wait <-chan time.Time
	for {
		p, changed, err := r.partition(req.Topic, req.Partition)
		if err != nil {
			return FetchResult{}, err
		}
		start, end := p.bounds()
		name := fmt.Sprintf("%s-%d", p.ref.Topic, p.ref.Partition)
		if req.Offset < start || req.Offset > end {
			return FetchResult{}, refuse(ReasonOffsetOutOfRange, nil, "offset %d of %s is out of range: valid offsets are %d to %d", req.Offset, name, start, end).
				with("log_start_offset", itoa(start)).with("high_watermark", itoa(end))
		}
		if req.Offset < end {
			res, err := r.cold.Read(ctx, p.ref, req.Offset, req.MaxBytes)
			if err != nil {
				return FetchResult{}, coldError(name, req.Offset, start, end, true, err)
			}
			// The cold reader may have read a newer head than the catalog's
			// (it re-reads at a miss): what it returned is committed all the
			// same, so the watermark covers it.
			return FetchResult{Batches: res.Batches, NextOffset: res.NextOffset, HighWatermark: max(end, res.NextOffset), LogStartOffset: start, cold: res}, nil
		}
		if req.MaxWait <= 0 {
			return FetchResult{NextOffset: end, HighWatermark: end, LogStartOffset: start}, nil
		}
		if wait == nil {
			t := time.NewTimer(req.MaxWait)
			defer t.Stop()
			wait = t.C
		}
		select {
		case <-changed:
		case <-wait:
			return FetchResult{NextOffset: end, HighWatermark: end, LogStartOffset: start}, nil
		case <-ctx.Done():
			return FetchResult{}, ctx.Err()
		}
	}
}

// listOffsets resolves a query against the bucket: earliest and latest are
// where the last read head starts and ends; a time after every record
// there answers the end.
func (r *readReplica) listOffsets(ctx context.Context, topic string, partition int32, q OffsetQuery) (OffsetAnswer, error) {
	p, _, err := r.partition(topic, partition)
	if err != nil {
		return OffsetAnswer{}, err
	}
	start, end := p.bounds()
	ans := OffsetAnswer{TimestampMs: -1, LogStartOffset: start, HighWatermark: end}
	switch {
	case q.Earliest:
		ans.Offset = start
	case q.Latest:
		ans.Offset = end
	default:
		ans.Offset = end
		if start == end {
			return ans, nil
		}
		off, ts, found, err := r.cold.OffsetForTimestamp(ctx, p.ref, q.TimestampMs)
		if err != nil {
			return OffsetAnswer{}, coldError(fmt.Sprintf("%s-%d", p.ref.Topic, p.ref.Partition), 0, start, end, true, err)
		}
		if found && off < end {
			ans.Offset, ans.TimestampMs = off, ts
		}
	}
	return ans, nil
}

// catalog returns the topics served, by name.
func (r *readReplica) catalog() ([]*replicaTopic, uint64) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*replicaTopic, 0, len(r.mu.topics))
	for _, t := range r.mu.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, r.mu.version
}

// replicaView is a partition as a replica answers for it: itself the only
// replica and the leader, in the epoch of the head's writer.
func (b readOnly) replicaView(p *replicaPartition) PartitionView {
	epoch := int32(0)
	if p.head != nil {
		epoch = p.head.LeaderEpoch
	}
	return PartitionView{Partition: p.ref.Partition, Leader: b.id, LeaderEpoch: epoch, Replicas: []int32{b.id}, ISR: []int32{b.id}}
}

// cluster is Cluster on a replica: a cluster of one.
func (b readOnly) cluster(topics []string) ClusterView {
	all, version := b.replica.catalog()
	v := ClusterView{
		Brokers:      []BrokerView{{ID: b.id, Addr: b.cfg.AdvertiseAddr(), KafkaAddr: b.cfg.Kafka.AdvertiseAddr()}},
		ControllerID: b.id, // so that admin comes here and is refused, not forwarded
		Version:      version,
	}
	want := map[string]bool{}
	for _, name := range topics {
		want[name] = true
	}
	for _, t := range all {
		if len(topics) > 0 && !want[t.name] {
			continue
		}
		tv := TopicView{Name: t.name, ID: t.id}
		for i := range t.parts {
			tv.Partitions = append(tv.Partitions, b.replicaView(&t.parts[i]))
		}
		v.Topics = append(v.Topics, tv)
	}
	return v
}

func (b readOnly) listTopics() []TopicSummary {
	all, _ := b.replica.catalog()
	out := []TopicSummary{}
	for _, t := range all {
		out = append(out, TopicSummary{Name: t.name, Partitions: int32(len(t.parts)), ReplicationFactor: 1})
	}
	return out
}

func (b readOnly) describeTopic(name string) (TopicDescription, error) {
	t, _, ok := b.replica.topic(name)
	if !ok {
		return TopicDescription{}, refuse(ReasonTopicNotFound, nil, "topic %q not found in the bucket this read replica serves", name)
	}
	cfg, err := b.defaults.With(t.config)
	if err != nil {
		cfg = b.defaults
	}
	d := TopicDescription{Name: t.name, ID: t.id, Config: cfg.Map(), Overrides: maps.Clone(t.config)}
	now := b.replica.now()
	for i := range t.parts {
		p := &t.parts[i]
		start, end := p.bounds()
		pd := PartitionDescription{
			PartitionView:    b.replicaView(p),
			Hosted:           true,
			LogStartOffset:   start,
			HighWatermark:    end,
			LogEndOffset:     end,
			LocalStartOffset: end, // nothing on local disk
			ColdEndOffset:    -1,
			UploadLagMs:      -1, // only the writing leader knows
			TieringError:     p.err,
			HeadAgeMs:        -1,
		}
		if p.head != nil {
			segs, bytes := p.head.Stats()
			pd.ColdBytes, pd.ColdSegments = bytes, int32(segs)
			pd.ColdEndOffset = p.head.EndOffset()
			pd.HeadGeneration = p.head.Generation
		}
		if !p.readAt.IsZero() {
			pd.HeadAgeMs = now.Sub(p.readAt).Milliseconds()
		}
		d.Partitions = append(d.Partitions, pd)
	}
	return d, nil
}

// clusterStatus is ClusterStatus on a replica: a cluster of one.
func (b readOnly) clusterStatus() ClusterStatus {
	all, version := b.replica.catalog()
	// No controller: Cluster names this broker the controller only so
	// that admin sent here is refused rather than forwarded; there is no
	// metadata group. The cold tier is the bucket it serves everything from.
	s := ClusterStatus{BrokerID: b.id, ControllerID: -1, MetadataVersion: version, Partitions: map[string]int{},
		ReadReplica: true, ColdTier: true, ObjectStore: StoreLocation(b.cfg)}
	s.Brokers = []BrokerStatus{{BrokerView: BrokerView{ID: b.id, Addr: b.cfg.AdvertiseAddr()}, Alive: true, Registered: true}}
	for _, t := range all {
		s.Partitions[t.name] = len(t.parts)
	}
	s.setColdStats(b.replica.cold.Stats())
	return s
}

// writeMetrics writes the replica's staleness by partition: how long ago
// each head was read, and its generation.
func (b readOnly) writeMetrics(w io.Writer) {
	mw := &metricsWriter{w: w}
	all, _ := b.replica.catalog()
	now := b.replica.now()
	n := 0
	for _, t := range all {
		n += len(t.parts)
	}
	mw.gauge("strata_partitions", "Partitions this read replica serves from the bucket.", int64(n))
	mw.family("strata_read_replica_head_age_seconds", "gauge", "How long ago this read replica last read the partition's manifest head from the bucket: how far behind the bucket it may be.")
	for _, t := range all {
		for i := range t.parts {
			if p := &t.parts[i]; !p.readAt.IsZero() {
				mw.sample("strata_read_replica_head_age_seconds", partitionLabels(t.name, p.ref.Partition), now.Sub(p.readAt).Seconds())
			}
		}
	}
	mw.family("strata_read_replica_head_generation", "gauge", "Generation (commits so far) of the manifest head this read replica serves the partition from.")
	for _, t := range all {
		for i := range t.parts {
			if p := &t.parts[i]; p.head != nil {
				mw.sample("strata_read_replica_head_generation", partitionLabels(t.name, p.ref.Partition), float64(p.head.Generation))
			}
		}
	}
	b.RequestMetrics().write(mw)
	b.writeThrottleMetrics(mw)
	b.writeStoreMetrics(mw, b.replica.cold)
}
