package cluster

// Raft's transport over TLS. hashicorp/raft's NetworkTransport runs over any
// StreamLayer; this one wraps the TCP listener in TLS and dials with the
// broker's certificate, so only brokers that prove themselves with the
// cluster's CA join the metadata group, and nobody else can read or forge
// its traffic. Which certificates pass is the tls.Configs' business (see
// security.Material): the broker asks for any broker of its cluster, both
// ways.

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
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
	lis       net.Listener // TCP
	server    *tls.Config
	advertise net.Addr
	client    *tls.Config
	// handshakeTimeout bounds an incoming handshake: a caller that connects
	// and says nothing must not hold a connection and its goroutine.
	handshakeTimeout time.Duration
}

// tlsHandshakeTimeout is how long an incoming Raft connection may take to
// complete its TLS handshake.
const tlsHandshakeTimeout = 10 * time.Second

func newTLSStreamLayer(bind string, advertise net.Addr, t *TransportTLS) (*tlsStreamLayer, error) {
	lis, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	return &tlsStreamLayer{lis: lis, server: t.Server, advertise: advertise, client: t.Client, handshakeTimeout: tlsHandshakeTimeout}, nil
}

// Accept implements net.Listener. The handshake runs on the connection's
// first read, in the transport's goroutine for it, not here: one slow
// caller must not hold up the accept loop.
func (l *tlsStreamLayer) Accept() (net.Conn, error) {
	c, err := l.lis.Accept()
	if err != nil {
		return nil, err
	}
	return &serverConn{Conn: tls.Server(c, l.server), timeout: l.handshakeTimeout}, nil
}

// Close implements net.Listener.
func (l *tlsStreamLayer) Close() error { return l.lis.Close() }

// serverConn completes its handshake, within timeout, before its first read.
type serverConn struct {
	*tls.Conn
	timeout time.Duration
	once    sync.Once
	err     error
}

func (c *serverConn) Read(p []byte) (int, error) {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		defer cancel()
		if c.err = c.HandshakeContext(ctx); c.err != nil {
			c.Conn.Close()
		}
	})
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(p)
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
	return l.lis.Addr()
}
