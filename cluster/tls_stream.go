package cluster

// Raft's transport over TLS. hashicorp/raft's NetworkTransport runs over any
// StreamLayer; this one wraps the TCP listener in TLS and dials with the
// broker's certificate, so only brokers that prove themselves with the
// cluster's CA join the metadata group, and nobody else can read or forge
// its traffic. Which certificates pass is the tls.Configs' business (see
// security.Material): the broker asks for any broker of its cluster, both
// ways.

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// TransportTLS is the TLS configuration of the Raft transport.
type TransportTLS struct {
	// Server is used for connections other brokers make to this one.
	Server *tls.Config
	// Client is used for connections this broker makes to others.
	Client *tls.Config
}

type tlsStreamLayer struct {
	net.Listener
	advertise net.Addr
	client    *tls.Config
}

func newTLSStreamLayer(bind string, advertise net.Addr, t *TransportTLS) (*tlsStreamLayer, error) {
	lis, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	return &tlsStreamLayer{Listener: tls.NewListener(lis, t.Server), advertise: advertise, client: t.Client}, nil
}

// Dial implements raft.StreamLayer: the handshake completes within timeout.
func (l *tlsStreamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(addr), l.client)
}

// Addr implements net.Listener: the address peers are given.
func (l *tlsStreamLayer) Addr() net.Addr {
	if l.advertise != nil {
		return l.advertise
	}
	return l.Listener.Addr()
}
