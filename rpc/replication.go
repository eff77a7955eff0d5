package rpc

// Replication between brokers: the leader's side of the follower streams,
// where a follower's latest epoch ended, and ISR changes asked of the
// controller.

import (
	"context"
	"errors"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/rpc/grpcmem"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

type replicationService struct {
	stratav1.UnimplementedReplicationServiceServer
	b        *broker.Broker
	stopping context.Context // done when the server shuts down
}

// replicaStream adapts the gRPC stream to the broker's.
type replicaStream struct {
	s stratav1.ReplicationService_ReplicateServer
}

func (r replicaStream) Recv() (broker.ReplicaUpdate, error) {
	req, err := r.s.Recv()
	if err != nil {
		return broker.ReplicaUpdate{}, err
	}
	u := broker.ReplicaUpdate{FollowerID: req.FollowerId}
	for _, p := range req.Positions {
		u.Positions = append(u.Positions, broker.ReplicaPosition{
			Topic: p.Topic, TopicID: p.TopicId, Partition: p.Partition,
			LeaderEpoch: p.LeaderEpoch, LogEnd: p.LogEndOffset, Stop: p.Stop,
		})
	}
	return u, nil
}

// Send writes a chunk. One whose buffer the pusher lends (Release) goes
// out without a copy: the other fields encoded, then the batches field
// last, its bytes written by gRPC from the lent buffer, which it gives
// back once they are on the connection.
func (r replicaStream) Send(c broker.ReplicaChunk) error {
	m := &stratav1.ReplicateResponse{
		Topic: c.Topic, TopicId: c.TopicID, Partition: c.Partition, LeaderEpoch: c.LeaderEpoch,
		HighWatermark: c.HighWatermark, LogStartOffset: c.LogStart, TombstoneFloor: c.TombstoneFloor,
		ErrorReason: string(c.ErrReason), ErrorMessage: c.ErrMessage,
	}
	if c.ReadFrom != broker.NoReadFrom && len(c.Batches) > 0 {
		m.ReadFrom = &c.ReadFrom
	}
	if c.Release == nil || len(c.Batches) == 0 {
		m.Batches = c.Batches
		err := r.s.Send(m)
		if c.Release != nil {
			c.Release()
		}
		return err
	}
	head, err := proto.Marshal(m)
	if err != nil {
		c.Release()
		return err
	}
	head = protowire.AppendTag(head, batchesField, protowire.BytesType)
	head = protowire.AppendVarint(head, uint64(len(c.Batches)))
	return r.s.SendMsg(&grpcmem.Encoded{Head: head, Body: c.Batches, Release: c.Release})
}

// Replicate serves a follower's stream until it ends or the server stops:
// a stream would otherwise hold a graceful stop open for as long as the
// follower stays connected. A follower that half-closes its side (it has
// nothing more to report) ends the stream cleanly, with OK.
func (s *replicationService) Replicate(stream stratav1.ReplicationService_ReplicateServer) error {
	served := make(chan error, 1)
	go func() { served <- s.b.ServeReplication(stream.Context(), replicaStream{stream}) }()
	select {
	case err := <-served:
		if stream.Context().Err() != nil || errors.Is(err, io.EOF) {
			return nil
		}
		return toStatus(err)
	case <-s.stopping.Done():
		// Returning ends the stream, which ends ServeReplication.
		return toStatus(broker.Unavailable("the broker is shutting down"))
	}
}

func (s *replicationService) EndOffsetForEpoch(ctx context.Context, req *stratav1.EndOffsetForEpochRequest) (*stratav1.EndOffsetForEpochResponse, error) {
	ans, err := s.b.EndOffsetForEpoch(broker.EpochQuery{Topic: req.Topic, TopicID: req.TopicId, Partition: req.Partition, Epoch: req.LeaderEpoch})
	if err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.EndOffsetForEpochResponse{LeaderEpoch: ans.Epoch, EndOffset: ans.EndOffset, LogEndOffset: &ans.LogEnd}, nil
}

func (s *replicationService) AlterISR(ctx context.Context, req *stratav1.AlterISRRequest) (*stratav1.AlterISRResponse, error) {
	info, err := s.b.AlterISR(ctx, broker.ISRRequest{
		Topic: req.Topic, TopicID: req.TopicId, Partition: req.Partition, LeaderID: req.LeaderId,
		LeaderEpoch: req.LeaderEpoch, PartitionEpoch: req.PartitionEpoch, ISR: req.Isr,
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.AlterISRResponse{Isr: info.ISR, LeaderEpoch: info.LeaderEpoch, Leader: info.Leader,
		PartitionEpoch: info.PartitionEpoch, Replicas: info.Replicas}, nil
}

func (s *replicationService) NewLeaderEpoch(ctx context.Context, req *stratav1.NewLeaderEpochRequest) (*stratav1.AlterISRResponse, error) {
	info, err := s.b.NewLeaderEpoch(ctx, broker.ISRRequest{
		Topic: req.Topic, TopicID: req.TopicId, Partition: req.Partition, LeaderID: req.LeaderId, LeaderEpoch: req.LeaderEpoch,
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.AlterISRResponse{Isr: info.ISR, LeaderEpoch: info.LeaderEpoch, Leader: info.Leader,
		PartitionEpoch: info.PartitionEpoch, Replicas: info.Replicas}, nil
}

// Identify answers a broker that checks a gossip claim of this broker's id
// with what this broker says of itself (broker/claims.go).
func (s *replicationService) Identify(ctx context.Context, _ *stratav1.IdentifyRequest) (*stratav1.IdentifyResponse, error) {
	self, err := s.b.Identity()
	if err != nil {
		return nil, toStatus(err)
	}
	return &stratav1.IdentifyResponse{BrokerId: self.ID, GossipNode: self.Node, GossipAddr: self.GossipAddr,
		GrpcAddr: self.GRPCAddr, RaftAddr: self.RaftAddr}, nil
}
