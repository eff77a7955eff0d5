package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-log/strata/rpc/grpcmem"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// Client is a connection to a Strata cluster: it knows which broker leads
// which partition, keeps one gRPC connection per broker, runs admin calls
// and creates producers and consumers. It is safe for concurrent use; make
// one per process and share it.
type Client struct {
	cfg       clientConfig
	log       *slog.Logger
	bootstrap []string
	meta      *metadataCache
	// leaderChecks shares the metadata fetches of requests watching their
	// leader (leaderwatch.go).
	leaderChecks leaderChecks

	mu struct {
		sync.Mutex
		conns  map[string]*grpc.ClientConn // by address; dialled lazily
		closed bool
		// silent holds the brokers that left a group call unanswered;
		// listeners, a channel per broker that group calls waiting on it
		// watch, closed when it is found silent (coordinator.go).
		silent    map[string]silence
		listeners map[string]chan struct{}
	}
}

// adminAttempts is how many times an admin or offset call is tried when its
// errors are retriable: enough to ride out a controller election, few enough
// that a caller without a deadline still hears about a dead cluster.
const adminAttempts = 4

// New creates a Client and loads the cluster metadata from the first
// bootstrap broker (host:port) that answers: it asks them in turn, the next
// one at once when one fails and after a fifth of a second when one has not
// answered yet (a paused broker), until one answers or ctx ends. Connections are made lazily with grpc.NewClient and insecure
// transport credentials unless WithDialOptions says otherwise.
func New(ctx context.Context, bootstrap []string, opts ...Option) (*Client, error) {
	cfg := defaultClientConfig()
	for _, o := range opts {
		o.applyClient(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(bootstrap) == 0 {
		return nil, configError("bootstrap", "[]", "at least one host:port")
	}
	c := newClient(cfg, bootstrap)
	if err := c.meta.refresh(ctx); err != nil {
		_ = c.Close()
		return nil, wrapOp("load metadata from bootstrap brokers", err)
	}
	return c, nil
}

// newClient builds a Client without loading the metadata.
func newClient(cfg clientConfig, bootstrap []string) *Client {
	c := &Client{cfg: cfg, log: cfg.logger, bootstrap: append([]string(nil), bootstrap...)}
	c.mu.conns = make(map[string]*grpc.ClientConn)
	c.meta = newMetadataCache(c.fetchMetadata, cfg.metadataMinRefresh, cfg.metadataMaxAge)
	return c
}

// Close closes every broker connection. Producers and consumers made from
// the client should be closed first; their calls fail with ErrClosed after.
func (c *Client) Close() error {
	c.meta.close()
	c.mu.Lock()
	conns := c.mu.conns
	c.mu.conns = nil
	c.mu.closed = true
	c.mu.Unlock()
	var errs []error
	for _, cc := range conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("strata: close: %w", errors.Join(errs...))
	}
	return nil
}

// conn returns the connection to addr, creating it on first use.
// grpc.NewClient does not dial: the connection is made by the first RPC.
func (c *Client) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, ErrClosed
	}
	if cc, ok := c.mu.conns[addr]; ok {
		return cc, nil
	}
	creds := insecure.NewCredentials()
	if c.cfg.tls != nil {
		creds = credentials.NewTLS(c.cfg.tls)
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, grpcmem.DialOptions()...)
	if c.cfg.token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearerToken(c.cfg.token)))
	}
	opts = append(opts, c.cfg.dialOptions...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("strata: connect to %s: %w", addr, err)
	}
	c.mu.conns[addr] = cc
	return cc, nil
}

// brokerAddrs lists where to send a call that any broker can answer: the
// known brokers in random order (to spread the load), then the bootstrap
// list in case the known ones are all gone.
func (c *Client) brokerAddrs() []string {
	s := c.meta.current()
	addrs := make([]string, 0, len(s.brokers)+len(c.bootstrap))
	seen := make(map[string]bool, cap(addrs))
	for _, a := range s.brokers {
		if a != "" && !seen[a] {
			seen[a] = true
			addrs = append(addrs, a)
		}
	}
	rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	for _, a := range c.bootstrap {
		if !seen[a] {
			seen[a] = true
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// metadataHedgeAfter is how long a metadata fetch waits for one broker
// before it asks the next one too: a broker that is paused (SIGSTOP, a long
// GC, a frozen VM) accepts the connection and never answers, and waiting
// the request timeout for it would hold New, or a client looking for a new
// leader or controller, for that long. Well above a healthy answer, so a
// healthy cluster is asked once.
const metadataHedgeAfter = 200 * time.Millisecond

// fetchMetadata asks the brokers for the metadata of every topic (see
// fetchMetadataAvoiding). It is the metadata cache's source.
func (c *Client) fetchMetadata(ctx context.Context) (*stratav1.GetMetadataResponse, error) {
	return c.fetchMetadataAvoiding(ctx, "", c.cfg.requestTimeout)
}

// fetchMetadataAvoiding asks the brokers for the metadata of every topic,
// the broker at avoid last, each for at most timeout, and returns the first
// answer. It asks one broker at a time, and the next one at once when one
// fails or after metadataHedgeAfter without an answer, so a silent broker
// delays it by that much and no more.
func (c *Client) fetchMetadataAvoiding(ctx context.Context, avoid string, timeout time.Duration) (*stratav1.GetMetadataResponse, error) {
	addrs := c.brokerAddrs()
	if i := slices.Index(addrs, avoid); i >= 0 && avoid != "" {
		addrs = append(slices.Delete(addrs, i, i+1), avoid)
	}
	if len(addrs) == 0 {
		return nil, newError(codes.Unavailable, "", true, "no broker address known")
	}
	type answer struct {
		addr string
		resp *stratav1.GetMetadataResponse
		err  error
	}
	// The requests still running when one has answered end with fctx; the
	// buffer lets them finish without a reader.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan answer, len(addrs))
	next, running := 0, 0
	ask := func() {
		addr := addrs[next]
		next++
		running++
		go func() {
			cc, err := c.conn(addr)
			if err != nil {
				answers <- answer{addr: addr, err: err}
				return
			}
			rctx, rcancel := context.WithTimeout(fctx, min(timeout, c.cfg.requestTimeout))
			defer rcancel()
			// All topics: the contract does not say how a missing topic in
			// the list is answered, and an absent topic is easy to read.
			resp, err := stratav1.NewMetadataServiceClient(cc).GetMetadata(rctx, &stratav1.GetMetadataRequest{})
			answers <- answer{addr: addr, resp: resp, err: err}
		}()
	}
	hedge := time.NewTimer(metadataHedgeAfter)
	defer hedge.Stop()
	ask()
	var last error
	for running > 0 {
		select {
		case a := <-answers:
			running--
			if a.err == nil {
				return a.resp, nil
			}
			if errors.Is(a.err, ErrClosed) {
				return nil, a.err
			}
			last = toError(a.err)
			c.log.Debug("strata: metadata fetch failed", "broker", a.addr, "err", last)
			if next < len(addrs) && ctx.Err() == nil {
				ask()
				hedge.Reset(metadataHedgeAfter)
			}
		case <-hedge.C:
			if next < len(addrs) {
				ask()
				hedge.Reset(metadataHedgeAfter)
			}
		}
	}
	if ctx.Err() != nil {
		return nil, ctxError(ctx, last)
	}
	return nil, last
}

// ctxError reports that ctx ended, naming the last failure seen before, so
// errors.Is finds both the context error and the broker's answer.
func ctxError(ctx context.Context, last error) error {
	return withLast(ctx.Err(), last, "")
}

// callAny runs an RPC that any broker can answer (admin and offset calls:
// brokers forward them to the controller), trying the next broker and
// backing off while the errors are retriable, at most adminAttempts times.
func (c *Client) callAny(ctx context.Context, op string, call func(ctx context.Context, cc *grpc.ClientConn) error) error {
	return c.callAnyTimeout(ctx, op, c.cfg.requestTimeout, call)
}

// callAnyTimeout is callAny with a timeout per attempt other than the
// request timeout (a group heartbeat the coordinator may hold).
func (c *Client) callAnyTimeout(ctx context.Context, op string, timeout time.Duration, call func(ctx context.Context, cc *grpc.ClientConn) error) error {
	// One order for all the attempts: each goes to the next broker, so a
	// dead one is tried at most once in a row (a fresh shuffle per attempt
	// could pick it every time).
	addrs := c.brokerAddrs()
	if len(addrs) == 0 {
		return wrapOp(op, newError(codes.Unavailable, "", true, "no broker address known"))
	}
	var last error
	for attempt := 0; attempt < adminAttempts; attempt++ {
		if attempt > 0 {
			if err := sleepCtx(ctx, defaultBackoff.delay(attempt-1, retryAfter(last))); err != nil {
				return wrapOp(op, ctxError(ctx, last))
			}
		}
		cc, err := c.conn(addrs[attempt%len(addrs)])
		if err != nil {
			return wrapOp(op, err)
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		err = call(rctx, cc)
		cancel()
		if err == nil {
			return nil
		}
		last = toError(err)
		if ctx.Err() != nil {
			return wrapOp(op, ctxError(ctx, last))
		}
		if !IsRetriable(last) {
			return wrapOp(op, last)
		}
		c.log.Debug("strata: retrying", "op", op, "attempt", attempt+1, "err", last)
	}
	return wrapOp(op, last)
}

// callLeader runs an RPC on tp's leader, following NOT_LEADER answers and
// refreshing metadata while the errors are retriable, at most adminAttempts
// times. The producer and the consumer have their own loops with their own
// limits; this one serves ListOffsets.
func (c *Client) callLeader(ctx context.Context, op string, tp TopicPartition, call func(ctx context.Context, cc *grpc.ClientConn) error) error {
	var last error
	for attempt := 0; attempt < adminAttempts; attempt++ {
		if attempt > 0 && !errors.Is(last, ErrNotLeader) {
			if err := sleepCtx(ctx, defaultBackoff.delay(attempt-1, retryAfter(last))); err != nil {
				return wrapOp(op, ctxError(ctx, last))
			}
		}
		cc, err := c.leaderConn(ctx, tp)
		if err == nil {
			rctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
			err = call(rctx, cc)
			cancel()
			if err == nil {
				return nil
			}
			err = c.partitionError(ctx, tp, err)
		}
		last = toError(err)
		if ctx.Err() != nil {
			return wrapOp(op, ctxError(ctx, last))
		}
		if !IsRetriable(last) {
			return wrapOp(op, last)
		}
		c.log.Debug("strata: retrying", "op", op, "partition", tp, "attempt", attempt+1, "err", last)
	}
	return wrapOp(op, last)
}

// leaderConn returns the connection to tp's leader. When the metadata does
// not know the partition or its leader, it refreshes once and looks again.
func (c *Client) leaderConn(ctx context.Context, tp TopicPartition) (*grpc.ClientConn, error) {
	addr, err := c.meta.fresh().leaderAddr(tp)
	if err != nil {
		if rerr := c.meta.refresh(ctx); rerr != nil && ctx.Err() != nil {
			return nil, ctxError(ctx, err)
		}
		addr, err = c.meta.current().leaderAddr(tp)
		if err != nil {
			if derr := c.deniedTopic(ctx, tp.Topic); derr != nil {
				return nil, derr
			}
			return nil, err
		}
	}
	return c.conn(addr)
}

// partitionCount returns the topic's partition count, waiting (at most a
// request timeout, within ctx) for the metadata to list the topic and, for
// partition >= 0, that partition: right after CreateTopic, or after
// partitions were added, the brokers' metadata may lag.
func (c *Client) partitionCount(ctx context.Context, topic string, partition int32) (int32, error) {
	if n, ok := c.meta.fresh().partitions(topic); ok && n > 0 && partition < n {
		return n, nil
	}
	wctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		err := c.meta.refresh(wctx)
		if errors.Is(err, ErrUnauthenticated) {
			return 0, err
		}
		n, ok := c.meta.current().partitions(topic)
		if !ok && attempt == 0 {
			if derr := c.deniedTopic(wctx, topic); derr != nil {
				return 0, derr
			}
		}
		switch {
		case ok && n > 0 && partition < n:
			return n, nil
		case ctx.Err() != nil:
			return 0, ctxError(ctx, err)
		case wctx.Err() != nil && !ok:
			return 0, newError(codes.NotFound, "TOPIC_NOT_FOUND", false, "topic %q not in the cluster metadata after %s", topic, c.cfg.requestTimeout)
		case wctx.Err() != nil:
			return 0, newError(codes.NotFound, "PARTITION_NOT_FOUND", false, "partition %d of topic %q not in the cluster metadata (%d partitions) after %s", partition, topic, n, c.cfg.requestTimeout)
		}
		_ = sleepCtx(wctx, defaultBackoff.delay(attempt, 0))
	}
}

// deniedTopic returns PERMISSION_DENIED if this client may not see topic.
// The metadata lists only the topics a client may see, so a topic missing
// from it is asked for by name, which a broker answers with the denial
// rather than leaving the client to wait for a topic it will never be shown.
func (c *Client) deniedTopic(ctx context.Context, topic string) error {
	if _, err := c.Metadata(ctx, topic); errors.Is(err, ErrPermissionDenied) || errors.Is(err, ErrUnauthenticated) {
		return err
	}
	return nil
}

// partitionError converts the error of a call to tp's leader and reacts to
// what it says about the metadata: a NOT_LEADER hint is applied at once; a
// NOT_LEADER without one, an unknown topic or partition, or a leader not yet
// available make the next lookup refresh. Transport failures do too: the
// broker may be gone for good.
func (c *Client) partitionError(ctx context.Context, tp TopicPartition, err error) error {
	err = toError(err)
	e, ok := AsError(err)
	if !ok {
		return err
	}
	switch {
	case e.Reason == "NOT_LEADER":
		if c.meta.applyLeaderHint(tp, e.Metadata) {
			c.log.Debug("strata: leader moved", "partition", tp, "leader", e.Metadata["leader_id"], "address", e.Metadata["leader_address"])
			return err
		}
		c.refreshAfterError(ctx)
	case e.Reason == "TOPIC_NOT_FOUND", e.Reason == "PARTITION_NOT_FOUND", e.Reason == "LEADER_NOT_AVAILABLE",
		e.Reason == "" && e.Code == codes.Unavailable:
		c.refreshAfterError(ctx)
	}
	return err
}

// refreshAfterError refreshes the metadata; failures are only logged, since
// the caller is already handling an error and will look up again.
func (c *Client) refreshAfterError(ctx context.Context) {
	if err := c.meta.refresh(ctx); err != nil && ctx.Err() == nil {
		c.log.Debug("strata: metadata refresh failed", "err", err)
	}
}

// retryAfter is the RetryAfter of err, or zero.
func retryAfter(err error) time.Duration {
	if e, ok := AsError(err); ok {
		return e.RetryAfter
	}
	return 0
}
