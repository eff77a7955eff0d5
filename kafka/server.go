package kafka

// Server accepts Kafka clients on one listener and serves each connection
// on its own goroutine (conn.go) until the client leaves, the connection
// breaks a rule of the protocol, or the server closes. Close stops
// accepting, closes every connection and waits for their goroutines: a
// request in flight is cut off (its context is cancelled), as the broker
// is about to stop.

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

// Config configures a Server. Zero values take the defaults noted.
type Config struct {
	// Advertise is this broker's Kafka address as clients are told it in
	// metadata (host:port).
	Advertise string
	// MaxRequestBytes bounds a request frame; a larger one closes the
	// connection. 0 means 100 MiB (Kafka's socket.request.max.bytes).
	MaxRequestBytes int
	// IdleTimeout closes a connection that sends no request for this
	// long. 0 means 10 minutes (Kafka's connections.max.idle.ms).
	IdleTimeout time.Duration
	// RequestTimeout bounds reading one request's frame once its size has
	// come, and writing its response. 0 means 30 seconds.
	RequestTimeout time.Duration
	// Logger receives connection errors at debug level; nil logs none.
	Logger *slog.Logger
	// Auth, when set, authorizes the admin APIs (admin_auth.go) for the
	// principal Principal names; nil lets every caller do everything, as
	// the gRPC front end does without TLS.
	Auth *broker.Auth
	// Principal is who the client of a connection is, for Auth. The
	// listener has no TLS or SASL of its own yet, so whoever serves it
	// says; nil is anonymous.
	Principal func(net.Conn) security.Principal
}

const (
	defaultMaxRequestBytes = 100 << 20
	defaultIdleTimeout     = 10 * time.Minute
	defaultRequestTimeout  = 30 * time.Second
)

// Server is a Kafka-protocol listener over one broker.
type Server struct {
	b      *broker.Broker
	cfg    Config
	host   string
	port   int32
	log    *slog.Logger
	ctx    context.Context // done once the server closes
	cancel context.CancelFunc

	mu struct {
		sync.Mutex
		closed bool
		lis    []net.Listener
		conns  map[net.Conn]struct{}
	}
	wg sync.WaitGroup
}

// ErrClosed is Serve's answer once the server is closed.
var ErrClosed = errors.New("kafka: server closed")

// NewServer returns a server of b's Kafka front end configured by cfg.
func NewServer(b *broker.Broker, cfg Config) (*Server, error) {
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = defaultMaxRequestBytes
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = defaultIdleTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = defaultRequestTimeout
	}
	host, port, err := net.SplitHostPort(cfg.Advertise)
	if err != nil {
		return nil, errors.New("kafka: advertise address " + strconv.Quote(cfg.Advertise) + " is not host:port")
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return nil, errors.New("kafka: advertise address " + strconv.Quote(cfg.Advertise) + " has no port")
	}
	s := &Server{b: b, cfg: cfg, host: host, port: int32(p), log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.conns = map[net.Conn]struct{}{}
	return s, nil
}

// Serve accepts connections on lis until the server is closed (ErrClosed)
// or lis fails.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		lis.Close()
		return ErrClosed
	}
	s.mu.lis = append(s.mu.lis, lis)
	s.mu.Unlock()
	var delay time.Duration
	for {
		nc, err := lis.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return ErrClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		if !s.track(nc) {
			nc.Close()
			return ErrClosed
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(nc)
			c := &conn{s: s, nc: nc}
			c.serve()
		}()
	}
}

func (s *Server) track(nc net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return false
	}
	s.mu.conns[nc] = struct{}{}
	return true
}

func (s *Server) untrack(nc net.Conn) {
	s.mu.Lock()
	delete(s.mu.conns, nc)
	s.mu.Unlock()
	nc.Close()
}

// Close stops accepting, closes every connection, and returns once their
// goroutines have ended.
func (s *Server) Close() error {
	s.mu.Lock()
	s.mu.closed = true
	s.cancel()
	for _, l := range s.mu.lis {
		l.Close()
	}
	for nc := range s.mu.conns {
		nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}
