package client

import (
	"context"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"google.golang.org/grpc/codes"
)

// snapshot is one immutable view of the cluster: who leads which partition
// and where each broker listens. Readers load it without a lock; a change
// builds a new one.
type snapshot struct {
	fetched    time.Time
	version    uint64
	controller int32
	brokers    map[int32]string      // broker id -> host:port
	topics     map[string]*topicInfo // immutable once published
}

// topicInfo lists a topic's partitions by id: partitions[i] is partition i.
type topicInfo struct {
	name       string
	partitions []partitionInfo
}

type partitionInfo struct {
	leader int32 // -1 while there is none
	epoch  int32
}

// noLeader marks a partition that has no leader or that the metadata did
// not list (ids are expected to be dense, 0..n-1).
const noLeader = -1

// newSnapshot builds a snapshot from a metadata response.
func newSnapshot(resp *stratav1.GetMetadataResponse, now time.Time) *snapshot {
	s := &snapshot{
		fetched:    now,
		version:    resp.GetVersion(),
		controller: resp.GetControllerId(),
		brokers:    make(map[int32]string, len(resp.GetBrokers())),
		topics:     make(map[string]*topicInfo, len(resp.GetTopics())),
	}
	for _, b := range resp.GetBrokers() {
		s.brokers[b.GetId()] = b.GetAddress()
	}
	for _, t := range resp.GetTopics() {
		s.topics[t.GetName()] = newTopicInfo(t)
	}
	return s
}

func newTopicInfo(t *stratav1.TopicMetadata) *topicInfo {
	n := int32(0)
	for _, p := range t.GetPartitions() {
		n = max(n, p.GetPartition()+1)
	}
	ti := &topicInfo{name: t.GetName(), partitions: make([]partitionInfo, n)}
	for i := range ti.partitions {
		ti.partitions[i].leader = noLeader
	}
	for _, p := range t.GetPartitions() {
		if p.GetPartition() >= 0 {
			ti.partitions[p.GetPartition()] = partitionInfo{leader: p.GetLeader(), epoch: p.GetLeaderEpoch()}
		}
	}
	return ti
}

// partitions returns the topic's partition count, or false when the topic
// is not known.
func (s *snapshot) partitions(topic string) (int32, bool) {
	t, ok := s.topics[topic]
	if !ok {
		return 0, false
	}
	return int32(len(t.partitions)), true
}

// leaderAddr returns the address of tp's leader, or an error that says what
// is missing: the topic, the partition, a leader, or the leader's address.
func (s *snapshot) leaderAddr(tp TopicPartition) (string, error) {
	t, ok := s.topics[tp.Topic]
	if !ok {
		return "", newError(codes.NotFound, "TOPIC_NOT_FOUND", false, "topic %q is not in the cluster metadata", tp.Topic)
	}
	if tp.Partition < 0 || int(tp.Partition) >= len(t.partitions) {
		return "", newError(codes.NotFound, "PARTITION_NOT_FOUND", false,
			"partition %d is not in the cluster metadata (topic %q has %d)", tp.Partition, tp.Topic, len(t.partitions))
	}
	id := t.partitions[tp.Partition].leader
	if id < 0 {
		return "", newError(codes.Unavailable, "LEADER_NOT_AVAILABLE", true, "%s has no leader", tp)
	}
	addr, ok := s.brokers[id]
	if !ok || addr == "" {
		return "", newError(codes.Unavailable, "LEADER_NOT_AVAILABLE", true, "%s: leader %d has no known address", tp, id)
	}
	return addr, nil
}

// withLeader returns a copy of s in which tp is led by broker id at addr.
// Only the changed topic and the maps are copied: leader moves are rare.
func (s *snapshot) withLeader(tp TopicPartition, id int32, addr string) *snapshot {
	t, ok := s.topics[tp.Topic]
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.partitions) {
		return s
	}
	n := *s
	n.topics = maps.Clone(s.topics)
	nt := &topicInfo{name: t.name, partitions: append([]partitionInfo(nil), t.partitions...)}
	nt.partitions[tp.Partition].leader = id
	n.topics[tp.Topic] = nt
	if addr != "" {
		n.brokers = maps.Clone(s.brokers)
		n.brokers[id] = addr
	}
	return &n
}

// metadataCache holds the current snapshot and refreshes it, one fetch at a
// time and at most once per minInterval however many callers ask.
type metadataCache struct {
	fetch       func(ctx context.Context) (*stratav1.GetMetadataResponse, error)
	minInterval time.Duration
	maxAge      time.Duration

	snap atomic.Pointer[snapshot]

	// ctx bounds the background refreshes started by fresh; close cancels
	// it and waits for them (wg).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		flight     *refreshFlight // the refresh in progress, if any
		last       time.Time      // when the last refresh ended
		background bool           // a background refresh is running
	}
}

// refreshFlight is one refresh shared by every caller that asked while it
// was pending.
type refreshFlight struct {
	done chan struct{}
	err  error
}

func newMetadataCache(fetch func(context.Context) (*stratav1.GetMetadataResponse, error), minInterval, maxAge time.Duration) *metadataCache {
	m := &metadataCache{fetch: fetch, minInterval: minInterval, maxAge: maxAge}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.snap.Store(&snapshot{brokers: map[int32]string{}, topics: map[string]*topicInfo{}})
	return m
}

// close stops the background refresh, if one runs, and waits for it.
func (m *metadataCache) close() {
	m.cancel()
	m.wg.Wait()
}

// current returns the snapshot as it is, without checking its age.
func (m *metadataCache) current() *snapshot { return m.snap.Load() }

// fresh returns the snapshot and, when it is older than maxAge, starts a
// refresh in the background: a caller (Produce among them) never waits for
// a refresh that nothing failed to ask for, and a stale map beats none.
func (m *metadataCache) fresh() *snapshot {
	s := m.snap.Load()
	if time.Since(s.fetched) > m.maxAge {
		m.refreshInBackground()
	}
	return s
}

// refreshInBackground starts one refresh in a goroutine owned by the cache,
// unless one is running or the cache is closed.
func (m *metadataCache) refreshInBackground() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.background || m.ctx.Err() != nil {
		return
	}
	m.mu.background = true
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		_ = m.refresh(m.ctx)
		m.mu.Lock()
		m.mu.background = false
		m.mu.Unlock()
	}()
}

// refresh fetches new metadata, or joins the fetch already pending. The
// first caller waits out minInterval since the previous refresh before it
// fetches, so a storm of failures turns into one fetch per interval.
func (m *metadataCache) refresh(ctx context.Context) error {
	m.mu.Lock()
	if f := m.mu.flight; f != nil {
		m.mu.Unlock()
		select {
		case <-f.done:
			return f.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f := &refreshFlight{done: make(chan struct{})}
	m.mu.flight = f
	wait := m.minInterval - time.Since(m.mu.last)
	m.mu.Unlock()

	f.err = sleepCtx(ctx, wait)
	if f.err == nil {
		var resp *stratav1.GetMetadataResponse
		resp, f.err = m.fetch(ctx)
		if f.err == nil {
			m.install(resp)
		}
	}
	m.mu.Lock()
	m.mu.flight = nil
	m.mu.last = time.Now()
	m.mu.Unlock()
	close(f.done)
	return f.err
}

// install publishes a response unless it is older than what we hold: brokers
// answer from their own copy of the metadata, and one may lag another.
func (m *metadataCache) install(resp *stratav1.GetMetadataResponse) {
	n := newSnapshot(resp, time.Now())
	for {
		old := m.snap.Load()
		if n.version < old.version {
			// Keep the newer map, but count it as checked.
			upd := *old
			upd.fetched = n.fetched
			n = &upd
		}
		if m.snap.CompareAndSwap(old, n) {
			return
		}
	}
}

// applyLeaderHint records the leader named by a NOT_LEADER answer, so the
// next attempt goes there without a metadata fetch. It reports whether the
// hint was usable (a leader with an address).
func (m *metadataCache) applyLeaderHint(tp TopicPartition, md map[string]string) bool {
	id, err := strconv.ParseInt(md["leader_id"], 10, 32)
	addr := md["leader_address"]
	if err != nil || id < 0 || addr == "" {
		return false
	}
	for {
		old := m.snap.Load()
		n := old.withLeader(tp, int32(id), addr)
		if n == old || m.snap.CompareAndSwap(old, n) {
			return n != old
		}
	}
}
