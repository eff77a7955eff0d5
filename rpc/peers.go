package rpc

// The broker's transport to other brokers (broker.Peers) over gRPC: one
// connection per broker, replaced when the broker moves to a new address.

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/rpc/grpcmem"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/security"
)

// maxPeerMessage bounds a replication message: a chunk of batches, and a
// batch can be as large as max.message.bytes allows.
const maxPeerMessage = 80 << 20

// connBufferBytes is the size of the buffers gRPC writes a server's
// answers through and reads requests and a peer broker's messages
// through.
const connBufferBytes = 256 << 10

// Peers reaches other brokers over gRPC.
type Peers struct {
	// tls, when set, is this broker's identity; every connection then
	// demands the certificate of the broker it means to reach.
	tls     *security.Material
	cluster string

	mu    sync.Mutex
	conns map[int32]peerConn
}

type peerConn struct {
	addr string
	conn *grpc.ClientConn
}

// NewPeers returns a transport with no connections yet; they are made on
// first use. With tls set, connections run over TLS and each must reach the
// broker it was made for, proven by a certificate naming broker-<id>.<cluster>.
func NewPeers(tls *security.Material, cluster string) *Peers {
	return &Peers{tls: tls, cluster: cluster, conns: map[int32]peerConn{}}
}

// credentials for a connection to broker id (any broker when id < 0).
func (ps *Peers) credentials(id int32) grpc.DialOption {
	if ps.tls == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(ps.tls.ClientConfig(security.RequireBroker(id, ps.cluster))))
}

// VerifyBroker implements broker.Peers. A TLS handshake that only broker
// claim.ID's certificate completes is no proof on its own: a TCP relay to
// the broker passes it. So, over a TLS connection to the claimed gRPC
// address that only that certificate completes, it asks the broker who it
// is (Identify), and the claim stands only if the broker's own answer names
// the same gossip member and addresses (broker.BrokerIdentity.Confirm).
// The claimed Raft address must complete the same handshake; its value is
// covered by the answer. Without TLS there is nothing to prove with, and
// every claim passes.
//
// The connection is made for this check and closed after it: a claim must
// not replace the connection to the broker it names (conn).
func (ps *Peers) VerifyBroker(ctx context.Context, claim broker.BrokerIdentity) error {
	if ps.tls == nil {
		return nil
	}
	check := security.RequireBroker(claim.ID, ps.cluster)
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", claim.RaftAddr)
	if err != nil {
		return fmt.Errorf("broker %d at %s: %w", claim.ID, claim.RaftAddr, err)
	}
	c := tls.Client(raw, ps.tls.ClientConfig(check))
	err = c.HandshakeContext(ctx)
	c.Close()
	if err != nil {
		return fmt.Errorf("broker %d at %s: %w", claim.ID, claim.RaftAddr, err)
	}

	conn, err := grpc.NewClient(claim.GRPCAddr, grpc.WithTransportCredentials(credentials.NewTLS(ps.tls.ClientConfig(check))))
	if err != nil {
		return fmt.Errorf("broker %d at %s: %w", claim.ID, claim.GRPCAddr, err)
	}
	defer conn.Close()
	resp, err := stratav1.NewReplicationServiceClient(conn).Identify(ctx, &stratav1.IdentifyRequest{})
	if err != nil {
		return fmt.Errorf("broker %d at %s: %w", claim.ID, claim.GRPCAddr, fromStatus(err))
	}
	return claim.Confirm(broker.BrokerIdentity{ID: resp.BrokerId, Node: resp.GossipNode, GossipAddr: resp.GossipAddr,
		GRPCAddr: resp.GrpcAddr, RaftAddr: resp.RaftAddr})
}

func (ps *Peers) conn(to broker.Peer) (*grpc.ClientConn, error) {
	if to.Addr == "" {
		return nil, fmt.Errorf("broker %d has no known address", to.ID)
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if c, ok := ps.conns[to.ID]; ok {
		if c.addr == to.Addr {
			return c.conn, nil
		}
		c.conn.Close()
	}
	// A follower reads its leader's chunks connBufferBytes at a time, not
	// 32 KiB (gRPC's default): one buffer per peer broker.
	opts := append([]grpc.DialOption{ps.credentials(to.ID), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxPeerMessage)),
		grpc.WithReadBufferSize(connBufferBytes)}, grpcmem.DialOptions()...)
	conn, err := grpc.NewClient(to.Addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to broker %d at %s: %w", to.ID, to.Addr, err)
	}
	ps.conns[to.ID] = peerConn{addr: to.Addr, conn: conn}
	return conn, nil
}

// Replicate implements broker.Peers.
func (ps *Peers) Replicate(ctx context.Context, to broker.Peer) (broker.FollowerStream, error) {
	conn, err := ps.conn(to)
	if err != nil {
		return nil, err
	}
	s, err := stratav1.NewReplicationServiceClient(conn).Replicate(ctx)
	if err != nil {
		return nil, fromStatus(err)
	}
	return followerStream{s}, nil
}

// followerStream adapts the gRPC stream to the broker's.
type followerStream struct {
	s stratav1.ReplicationService_ReplicateClient
}

func (f followerStream) Send(u broker.ReplicaUpdate) error {
	req := &stratav1.ReplicateRequest{FollowerId: u.FollowerID, Positions: make([]*stratav1.ReplicaPosition, len(u.Positions))}
	for i, p := range u.Positions {
		req.Positions[i] = &stratav1.ReplicaPosition{Topic: p.Topic, TopicId: p.TopicID, Partition: p.Partition,
			LeaderEpoch: p.LeaderEpoch, LogEndOffset: p.LogEnd, Stop: p.Stop}
	}
	return f.s.Send(req)
}

// Recv receives a chunk whose Batches lie in the buffer gRPC received it
// in (decodeReplicateResponse), lent until the chunk's Release: one copy
// of every replicated byte less than proto.Unmarshal makes.
func (f followerStream) Recv() (broker.ReplicaChunk, error) {
	frame := new(grpcmem.Frame)
	if err := f.s.RecvMsg(frame); err != nil {
		return broker.ReplicaChunk{}, fromStatus(err)
	}
	c, err := decodeReplicateResponse(frame.Bytes())
	if err != nil {
		frame.Free()
		return broker.ReplicaChunk{}, fromStatus(status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err))
	}
	readFrom := int64(broker.NoReadFrom)
	if c.ReadFrom != nil {
		readFrom = *c.ReadFrom
	}
	return broker.ReplicaChunk{Topic: c.Topic, TopicID: c.TopicId, Partition: c.Partition, LeaderEpoch: c.LeaderEpoch,
		Batches: c.Batches, HighWatermark: c.HighWatermark, LogStart: c.LogStartOffset, ReadFrom: readFrom,
		TombstoneFloor: c.TombstoneFloor, ErrReason: broker.Reason(c.ErrorReason), ErrMessage: c.ErrorMessage, Release: frame.Free}, nil
}

// batchesField is the number of ReplicateResponse.batches.
var batchesField = protowire.Number((&stratav1.ReplicateResponse{}).ProtoReflect().Descriptor().Fields().ByName("batches").Number())

// decodeReplicateResponse decodes a ReplicateResponse as proto.Unmarshal
// does, except that Batches is a slice of b, not a copy.
func decodeReplicateResponse(b []byte) (*stratav1.ReplicateResponse, error) {
	c := new(stratav1.ReplicateResponse)
	batches, err := unmarshalInPlace(b, batchesField, c)
	if err != nil {
		return nil, err
	}
	if len(batches) > 0 {
		c.Batches = batches
	}
	return c, nil
}

// EndOffsetForEpoch implements broker.Peers.
func (ps *Peers) EndOffsetForEpoch(ctx context.Context, to broker.Peer, q broker.EpochQuery) (broker.EpochEnd, error) {
	conn, err := ps.conn(to)
	if err != nil {
		return broker.EpochEnd{}, err
	}
	resp, err := stratav1.NewReplicationServiceClient(conn).EndOffsetForEpoch(ctx,
		&stratav1.EndOffsetForEpochRequest{Topic: q.Topic, TopicId: q.TopicID, Partition: q.Partition, LeaderEpoch: q.Epoch})
	if err != nil {
		return broker.EpochEnd{}, fromStatus(err)
	}
	logEnd := int64(-1)
	if resp.LogEndOffset != nil {
		logEnd = *resp.LogEndOffset
	}
	return broker.EpochEnd{Epoch: resp.LeaderEpoch, EndOffset: resp.EndOffset, LogEnd: logEnd}, nil
}

// AlterISR implements broker.Peers.
func (ps *Peers) AlterISR(ctx context.Context, to broker.Peer, req broker.ISRRequest) (cluster.PartitionInfo, error) {
	conn, err := ps.conn(to)
	if err != nil {
		return cluster.PartitionInfo{}, err
	}
	resp, err := stratav1.NewReplicationServiceClient(conn).AlterISR(ctx, &stratav1.AlterISRRequest{
		Topic: req.Topic, TopicId: req.TopicID, Partition: req.Partition, LeaderId: req.LeaderID,
		LeaderEpoch: req.LeaderEpoch, PartitionEpoch: req.PartitionEpoch, Isr: req.ISR,
	})
	if err != nil {
		return cluster.PartitionInfo{}, fromStatus(err)
	}
	return cluster.PartitionInfo{Partition: req.Partition, Replicas: resp.Replicas, ISR: resp.Isr, Leader: resp.Leader,
		LeaderEpoch: resp.LeaderEpoch, PartitionEpoch: resp.PartitionEpoch}, nil
}

// NewLeaderEpoch implements broker.Peers.
func (ps *Peers) NewLeaderEpoch(ctx context.Context, to broker.Peer, req broker.ISRRequest) (cluster.PartitionInfo, error) {
	conn, err := ps.conn(to)
	if err != nil {
		return cluster.PartitionInfo{}, err
	}
	resp, err := stratav1.NewReplicationServiceClient(conn).NewLeaderEpoch(ctx, &stratav1.NewLeaderEpochRequest{
		Topic: req.Topic, TopicId: req.TopicID, Partition: req.Partition, LeaderId: req.LeaderID, LeaderEpoch: req.LeaderEpoch,
	})
	if err != nil {
		return cluster.PartitionInfo{}, fromStatus(err)
	}
	return cluster.PartitionInfo{Partition: req.Partition, Replicas: resp.Replicas, ISR: resp.Isr, Leader: resp.Leader,
		LeaderEpoch: resp.LeaderEpoch, PartitionEpoch: resp.PartitionEpoch}, nil
}

// KnowsController implements broker.Peers.
func (ps *Peers) KnowsController(ctx context.Context, to broker.Peer) (bool, error) {
	conn, err := ps.conn(to)
	if err != nil {
		return false, err
	}
	md, err := stratav1.NewMetadataServiceClient(conn).GetMetadata(ctx, &stratav1.GetMetadataRequest{})
	if err != nil {
		return false, fromStatus(err)
	}
	return md.ControllerId >= 0, nil
}

// Close implements broker.Peers.
func (ps *Peers) Close() error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for id, c := range ps.conns {
		c.conn.Close()
		delete(ps.conns, id)
	}
	return nil
}

// fromStatus turns a status a broker answered with back into the broker's
// error, with its reason, when it carries one.
func fromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.Domain != ErrorDomain {
			continue
		}
		// The message, metadata and retry time as the peer's broker gave
		// them ("retriable" is the reason's own, toStatus adds it).
		be := &broker.Error{Reason: broker.Reason(info.Reason), Message: strings.TrimPrefix(st.Message(), "broker: ")}
		for k, v := range info.Metadata {
			if k != "retriable" {
				be = be.With(k, v)
			}
		}
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				be.RetryAfter = ri.GetRetryDelay().AsDuration()
			}
		}
		return be
	}
	return err
}
