package client

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/grpc"
)

// Option configures a Client (New). Producer and consumer settings have
// their own types, ProducerOption and ConsumerOption, so passing one to the
// wrong constructor does not compile.
type Option interface {
	applyClient(*clientConfig)
}

type clientOption func(*clientConfig)

func (o clientOption) applyClient(c *clientConfig) { o(c) }

// clientConfig holds the settings of a Client; defaultClientConfig gives
// the values used when no option says otherwise.
type clientConfig struct {
	dialOptions        []grpc.DialOption
	metadataMaxAge     time.Duration
	metadataMinRefresh time.Duration
	requestTimeout     time.Duration
	logger             *slog.Logger
	tls                *tls.Config
	token              string
}

func defaultClientConfig() clientConfig {
	return clientConfig{
		metadataMaxAge:     5 * time.Minute,
		metadataMinRefresh: 100 * time.Millisecond,
		requestTimeout:     30 * time.Second,
		logger:             slog.New(slog.DiscardHandler),
	}
}

func (c *clientConfig) validate() error {
	var errs []error
	if c.metadataMaxAge <= 0 {
		errs = append(errs, configError("WithMetadataMaxAge", c.metadataMaxAge, "a duration > 0"))
	}
	if c.metadataMinRefresh < 0 {
		errs = append(errs, configError("WithMetadataMinRefreshInterval", c.metadataMinRefresh, "a duration >= 0"))
	}
	if c.token != "" && c.tls == nil {
		errs = append(errs, errors.New("strata: WithToken needs WithTLS: a token sent in plaintext can be read off the wire"))
	}
	if c.requestTimeout <= 0 {
		errs = append(errs, configError("WithRequestTimeout", c.requestTimeout, "a duration > 0"))
	}
	return errors.Join(errs...)
}

// WithDialOptions adds gRPC dial options to every broker connection, after
// the client's own (insecure transport credentials), so they can replace
// them with TLS credentials, add interceptors or keepalive settings.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return clientOption(func(c *clientConfig) { c.dialOptions = append(c.dialOptions, opts...) })
}

// WithTLS connects to brokers over TLS with cfg: its RootCAs verify the
// brokers, and a certificate in it (Certificates or GetClientCertificate)
// authenticates this client as User:<its common name>. See TLSConfig.
func WithTLS(cfg *tls.Config) Option {
	return clientOption(func(c *clientConfig) { c.tls = cfg })
}

// WithToken authenticates this client with a bearer token (see `strata
// dev token`), sent on every call; it needs WithTLS.
func WithToken(token string) Option {
	return clientOption(func(c *clientConfig) { c.token = token })
}

// WithMetadataMaxAge sets how old the cached cluster metadata (partitions,
// leaders, broker addresses) may grow before a call refreshes it even though
// nothing failed; it is how a client learns of new partitions. Default 5
// minutes.
func WithMetadataMaxAge(d time.Duration) Option {
	return clientOption(func(c *clientConfig) { c.metadataMaxAge = d })
}

// WithMetadataMinRefreshInterval sets the shortest time between two metadata
// fetches: however many calls find the cache stale at once (a leader moving
// under a thousand partitions), they share one fetch, and the next waits
// this long. Default 100 ms.
func WithMetadataMinRefreshInterval(d time.Duration) Option {
	return clientOption(func(c *clientConfig) { c.metadataMinRefresh = d })
}

// WithLogger sets where the client logs retries, leader moves and failures.
// By default it logs nothing; nil also means nothing.
func WithLogger(l *slog.Logger) Option {
	return clientOption(func(c *clientConfig) {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		c.logger = l
	})
}

// WithRequestTimeout bounds each single RPC attempt (a produce waiting for
// its acks included) and how long a fetch stream may stay silent before the
// consumer reconnects. Retries get a fresh timeout. Default 30 s.
func WithRequestTimeout(d time.Duration) Option {
	return clientOption(func(c *clientConfig) { c.requestTimeout = d })
}
