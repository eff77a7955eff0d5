package main

// The broker's side of TLS and authentication, read from security.* at
// start: one TLS identity (re-read when its files change) for every
// listener and every connection to another broker, and the tokens file.

import (
	"log/slog"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/rpc"
	"github.com/strata-log/strata/security"
)

// brokerSecurity is what a broker with TLS runs with; nil without.
type brokerSecurity struct {
	cfg    config.Security
	tls    *security.Material
	tokens *security.Tokens
}

func loadSecurity(cfg config.Security, logger *slog.Logger) (*brokerSecurity, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	m, err := security.LoadMaterial(security.Files{CA: cfg.TLS.CAFile, Cert: cfg.TLS.CertFile, Key: cfg.TLS.KeyFile}, logger)
	if err != nil {
		return nil, err
	}
	s := &brokerSecurity{cfg: cfg, tls: m}
	if cfg.TokensFile != "" {
		if s.tokens, err = security.LoadTokens(cfg.TokensFile, logger); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// material is the TLS identity, nil without TLS.
func (s *brokerSecurity) material() *security.Material {
	if s == nil {
		return nil
	}
	return s.tls
}

// raftTLS admits only brokers of this cluster to the metadata group, both
// ways.
func (s *brokerSecurity) raftTLS() *cluster.TransportTLS {
	anyBroker := security.RequireBroker(-1, s.cfg.ClusterName)
	return &cluster.TransportTLS{Server: s.tls.ServerConfig(true, anyBroker), Client: s.tls.ClientConfig(anyBroker)}
}

// auth is the gRPC and admin endpoints' authentication, nil without TLS.
func (s *brokerSecurity) auth(b *broker.Broker, logger *slog.Logger) *rpc.Auth {
	if s == nil {
		return nil
	}
	return &rpc.Auth{
		Material:   s.tls,
		Tokens:     s.tokens,
		Cluster:    s.cfg.ClusterName,
		Superusers: s.cfg.Superusers,
		ACLs:       b.ACLsInForce,
		Log:        logger,
	}
}

// producerIDKey binds producer ids to principals with a key every broker of
// the cluster derives alike: from the gossip key, which TLS makes required.
func (s *brokerSecurity) producerIDKey(g config.Gossip) []byte {
	secret, _ := g.SecretKeyBytes() // validated at load
	return broker.ProducerIDKey(secret)
}
