package rpc

// ClusterStatus: the cluster as this broker sees it (broker.ClusterStatus),
// for `strata cluster status`. The partitions it lists are capped at
// max_partitions per list and, for a client held to ACLs, limited to the
// topics it may see, as listings are everywhere else; the counts cover the
// whole cluster (how many partitions are under-replicated names nothing).

import (
	"context"

	"github.com/strata-log/strata/broker"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/security"
)

// defaultStatusPartitions is how many partitions each list holds when the
// request does not say: more than a screen, far less than a large cluster.
const defaultStatusPartitions = 100

func (s *adminService) ClusterStatus(ctx context.Context, req *stratav1.ClusterStatusRequest) (*stratav1.ClusterStatusResponse, error) {
	if req.MaxPartitions < 0 {
		return nil, invalid("max_partitions must not be negative")
	}
	limit := int(req.MaxPartitions)
	if limit == 0 {
		limit = defaultStatusPartitions
	}
	visible := s.topicVisibility(ctx)
	st := s.b.ClusterStatus()
	// Every count and list covers only the topics the caller may see, as
	// the topic listings do: a count must not tell what a listing hides.
	resp := &stratav1.ClusterStatusResponse{
		BrokerId:             st.BrokerID,
		ControllerId:         st.ControllerID,
		MetadataVersion:      st.MetadataVersion,
		UnderReplicatedCount: countVisible(st.UnderReplicated, visible),
		OfflineCount:         countVisible(st.Offline, visible),
		ColdTier:             st.ColdTier,
		CacheHits:            st.CacheHits,
		CacheMisses:          st.CacheMisses,
	}
	for topic, n := range st.Partitions {
		if visible(topic) {
			resp.Topics++
			resp.Partitions += int32(n)
		}
	}
	for _, b := range st.Brokers {
		resp.Brokers = append(resp.Brokers, &stratav1.BrokerStatus{Id: b.ID, Address: b.Addr, Rack: b.Rack, Alive: b.Alive, Registered: b.Registered})
	}
	resp.UnderReplicated = partitionStatuses(st.UnderReplicated, visible, limit)
	resp.Offline = partitionStatuses(st.Offline, visible, limit)
	for _, l := range st.UploadLag {
		if !visible(l.Topic) {
			continue
		}
		resp.UploadLagBytes += l.Bytes
		resp.UploadLagPartitions++
		if len(resp.UploadLag) < limit {
			resp.UploadLag = append(resp.UploadLag, &stratav1.PartitionUploadLag{Topic: l.Topic, Partition: l.Partition, Bytes: l.Bytes, Segments: int32(l.Segments)})
		}
	}
	return resp, nil
}

func countVisible(ps []broker.PartitionStatus, visible func(string) bool) int32 {
	var n int32
	for _, p := range ps {
		if visible(p.Topic) {
			n++
		}
	}
	return n
}

func partitionStatuses(ps []broker.PartitionStatus, visible func(string) bool, limit int) []*stratav1.PartitionStatus {
	var out []*stratav1.PartitionStatus
	for _, p := range ps {
		if len(out) == limit {
			break
		}
		if visible(p.Topic) {
			out = append(out, &stratav1.PartitionStatus{Topic: p.Topic, Partition: partitionMetadata(p.PartitionView)})
		}
	}
	return out
}

// topicVisibility says which topics the caller may see named: all of them
// without authorization (no principal), for brokers and for superusers;
// else those on which an ACL grants it anything, as Auth.filter does for
// the other listings.
func (s *adminService) topicVisibility(ctx context.Context) func(topic string) bool {
	p, ok := security.PrincipalFrom(ctx)
	if !ok || p.Broker || p.Superuser {
		return func(string) bool { return true }
	}
	acls := s.b.ACLsInForce()
	return func(topic string) bool { return security.AllowedAny(acls, p, security.ResourceTopic, topic) }
}
