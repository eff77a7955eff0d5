package broker

import (
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// peers holds one gRPC connection per other broker, by address, for
// replication and requests to the controller. A broker that moves to a new
// address gets a new connection; the old one is closed.
type peers struct {
	mu    sync.Mutex
	conns map[int32]peerConn
}

type peerConn struct {
	addr string
	conn *grpc.ClientConn
}

// replication returns the replication client of broker id at addr.
func (ps *peers) replication(id int32, addr string) (stratav1.ReplicationServiceClient, error) {
	conn, err := ps.conn(id, addr)
	if err != nil {
		return nil, err
	}
	return stratav1.NewReplicationServiceClient(conn), nil
}

func (ps *peers) conn(id int32, addr string) (*grpc.ClientConn, error) {
	if addr == "" {
		return nil, fmt.Errorf("broker %d has no known address", id)
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.conns == nil {
		ps.conns = map[int32]peerConn{}
	}
	if c, ok := ps.conns[id]; ok {
		if c.addr == addr {
			return c.conn, nil
		}
		c.conn.Close()
	}
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxPeerMessage)))
	if err != nil {
		return nil, fmt.Errorf("connect to broker %d at %s: %w", id, addr, err)
	}
	ps.conns[id] = peerConn{addr: addr, conn: conn}
	return conn, nil
}

// maxPeerMessage bounds a replication message: a chunk of batches, and a
// batch can be as large as max.message.bytes allows.
const maxPeerMessage = 80 << 20

func (ps *peers) close() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for id, c := range ps.conns {
		c.conn.Close()
		delete(ps.conns, id)
	}
}
