package rpc

// ClusterStatus: the cluster as this broker sees it (broker.ClusterStatus),
// for `strata cluster status`. The partitions it lists are capped at
// max_partitions per list and, for a client held to ACLs, limited to the
// topics it may see, as listings are everywhere else, and so are the
// counts (broker.ClusterStatus.VisibleTo).

import (
	"context"

	"github.com/strata-log/strata/broker"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
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
	// Every count and list covers only the topics the caller may see
	// (broker/visibility.go): a count must not tell what a listing hides.
	st := s.b.ClusterStatus().VisibleTo(s.b.Visibility(ctx))
	resp := &stratav1.ClusterStatusResponse{
		BrokerId:             st.BrokerID,
		ControllerId:         st.ControllerID,
		MetadataVersion:      st.MetadataVersion,
		Topics:               int32(len(st.Partitions)),
		UnderReplicatedCount: int32(len(st.UnderReplicated)),
		OfflineCount:         int32(len(st.Offline)),
		UploadLagPartitions:  int32(len(st.UploadLag)),
		ColdTier:             st.ColdTier,
		CacheHits:            st.CacheHits,
		CacheMisses:          st.CacheMisses,
		ColdGets:             st.ColdGets,
		ObjectStore:          st.ObjectStore,
		ReadReplica:          st.ReadReplica,
	}
	for _, n := range st.Partitions {
		resp.Partitions += int32(n)
	}
	for _, b := range st.Brokers {
		resp.Brokers = append(resp.Brokers, &stratav1.BrokerStatus{Id: b.ID, Address: b.Addr, Rack: b.Rack, Alive: b.Alive, Registered: b.Registered, Version: b.Version})
	}
	resp.UnderReplicated = partitionStatuses(st.UnderReplicated, limit)
	resp.Offline = partitionStatuses(st.Offline, limit)
	for _, l := range st.UploadLag {
		resp.UploadLagBytes += l.Bytes
		if len(resp.UploadLag) < limit {
			resp.UploadLag = append(resp.UploadLag, &stratav1.PartitionUploadLag{Topic: l.Topic, Partition: l.Partition, Bytes: l.Bytes, Segments: int32(l.Segments)})
		}
	}
	return resp, nil
}

func partitionStatuses(ps []broker.PartitionStatus, limit int) []*stratav1.PartitionStatus {
	var out []*stratav1.PartitionStatus
	for _, p := range ps[:min(len(ps), limit)] {
		out = append(out, &stratav1.PartitionStatus{Topic: p.Topic, Partition: partitionMetadata(p.PartitionView)})
	}
	return out
}
