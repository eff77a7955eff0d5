package broker

// The operator's view of one broker and of the cluster as it sees it:
// readiness for the admin endpoint's /readyz, and the figures of
// `strata cluster status`.

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/strata-log/strata/tiering"
)

// Ready returns nil when the broker is ready for clients: it knows a
// controller (so metadata changes can be made and reach it) and its
// partitions reflect the metadata it has applied. Otherwise it returns why,
// in one line. Every metadata change (an offset commit is one) leaves the
// partitions behind for the moment the broker takes to apply it, so Ready
// waits, up to ctx, for them to catch up before it reports them behind:
// readiness should not flap with every commit.
func (b *Broker) Ready(ctx context.Context) error {
	b.mu.RLock()
	closed := b.mu.closed
	b.mu.RUnlock()
	if closed {
		return errors.New("the broker is shutting down")
	}
	return b.role.ready(ctx)
}

func (b clusterMember) ready(ctx context.Context) error {
	if _, ok := b.meta.ControllerID(); !ok {
		return errors.New("no controller known: the metadata group has no leader (are most of its voters down or cut off?)")
	}
	v := b.meta.Metadata().Version
	if err := b.waitReconciled(ctx, v); err != nil {
		b.mu.RLock()
		at := b.mu.reconciled
		b.mu.RUnlock()
		return fmt.Errorf("the partitions reflect metadata version %d, not yet %d: applying it is slow or failed (see the broker's log)", at, v)
	}
	return nil
}

// ClusterStatus is the cluster as one broker sees it. The brokers and the
// partition health come from the metadata, which every broker has whole;
// whether a broker is alive is this broker's gossip view; the upload lag
// and the cache figures are this broker's own.
type ClusterStatus struct {
	BrokerID        int32
	ControllerID    int32 // -1 when none is known
	MetadataVersion uint64
	// Partitions counts the partitions of each topic; VisibleTo keeps
	// only the topics a caller may see, here and in the lists below.
	Partitions map[string]int
	// Brokers are the registered brokers and any others gossip shows
	// alive (joining, or not yet proven), by id.
	Brokers []BrokerStatus
	// UnderReplicated are the partitions with a leader and an ISR smaller
	// than their replicas; Offline those without a leader. By topic and
	// partition.
	UnderReplicated []PartitionStatus
	Offline         []PartitionStatus
	// UploadLag are the partitions this broker leads that have sealed
	// bytes awaiting upload to the cold tier, the most behind first.
	UploadLag []UploadLag
	// ColdTier says whether this broker has an object store; the cache
	// figures count its cold reads since it started.
	ColdTier    bool
	CacheHits   uint64
	CacheMisses uint64
	// ColdGets counts the GETs the cold reader sent: the first read of a
	// chunk shows here even when read-ahead made it a cache hit.
	ColdGets uint64
	// ObjectStore is where the cold tier is (StoreLocation); empty
	// without one.
	ObjectStore string
	// ReadReplica: this broker is a read-only replica of another
	// cluster's bucket, a cluster of one with no controller.
	ReadReplica bool
}

// BrokerStatus is one broker in a ClusterStatus.
type BrokerStatus struct {
	BrokerView
	// Alive: gossip shows it now. Registered: the cluster metadata has it
	// (a broker gossip shows is registered once the controller has
	// checked that it is who it claims to be).
	Alive      bool
	Registered bool
	// Version is the software version the broker publishes in gossip;
	// empty while it is not alive.
	Version string
}

// PartitionStatus is one partition in a ClusterStatus.
type PartitionStatus struct {
	Topic string
	PartitionView
}

// UploadLag is one partition's sealed data not yet in the cold tier.
type UploadLag struct {
	Topic     string
	Partition int32
	Bytes     int64
	Segments  int
}

// ClusterStatus returns the cluster as this broker sees it.
func (b *Broker) ClusterStatus() ClusterStatus {
	return b.role.clusterStatus()
}

func (b clusterMember) clusterStatus() ClusterStatus {
	md := b.meta.Metadata()
	s := ClusterStatus{BrokerID: b.id, ControllerID: -1, MetadataVersion: md.Version, Partitions: map[string]int{}}
	if id, ok := b.meta.ControllerID(); ok {
		s.ControllerID = id
	}
	alive := map[int32]BrokerStatus{}
	for _, m := range b.liveMembers() { // with TLS, only members that proved their id
		alive[m.Meta.BrokerID] = BrokerStatus{BrokerView: BrokerView{ID: m.Meta.BrokerID, Addr: m.Meta.GRPCAddr, Rack: m.Meta.Rack}, Alive: true, Version: m.Meta.Version}
	}
	for _, id := range md.BrokerIDs() {
		info, _ := md.Broker(id)
		live, up := alive[id]
		s.Brokers = append(s.Brokers, BrokerStatus{BrokerView: BrokerView{ID: id, Addr: info.Addr, Rack: info.Rack}, Alive: up, Registered: true, Version: live.Version})
		delete(alive, id)
	}
	for _, st := range alive {
		s.Brokers = append(s.Brokers, st)
	}
	sort.Slice(s.Brokers, func(i, j int) bool { return s.Brokers[i].ID < s.Brokers[j].ID })

	for _, name := range md.TopicNames() {
		t, _ := md.Topic(name)
		s.Partitions[name] = len(t.Partitions)
		for _, info := range t.Partitions {
			switch {
			case offline(info):
				s.Offline = append(s.Offline, PartitionStatus{Topic: name, PartitionView: partitionView(info)})
			case underReplicated(info):
				s.UnderReplicated = append(s.UnderReplicated, PartitionStatus{Topic: name, PartitionView: partitionView(info)})
			}
		}
	}

	for _, p := range b.partitions() {
		if !p.isLeader() || !p.uploads(b.Broker) {
			continue
		}
		if bytes, segs := p.uploadLag(); bytes > 0 {
			s.UploadLag = append(s.UploadLag, UploadLag{Topic: p.topic, Partition: p.id, Bytes: bytes, Segments: segs})
		}
	}
	sort.Slice(s.UploadLag, func(i, j int) bool {
		a, c := s.UploadLag[i], s.UploadLag[j]
		if a.Bytes != c.Bytes {
			return a.Bytes > c.Bytes
		}
		if a.Topic != c.Topic {
			return a.Topic < c.Topic
		}
		return a.Partition < c.Partition
	})
	if b.store != nil {
		s.ColdTier = true
		s.ObjectStore = StoreLocation(b.cfg)
		if b.cold != nil {
			s.setColdStats(b.cold.Stats())
		}
	}
	return s
}

// setColdStats copies the cold reader's cache and GET counts.
func (s *ClusterStatus) setColdStats(st tiering.ReaderStats) {
	s.CacheHits, s.CacheMisses, s.ColdGets = st.ChunkHits, st.ChunkMisses, uint64(st.Gets)
}
