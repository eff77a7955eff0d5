package kafka

// Authentication and authorization on the Kafka listener, translated: the
// rules are the broker's (broker/auth.go, authz.go, visibility.go), one
// copy for this front end and gRPC. Here the credentials are read off the
// connection (the TLS peer certificate, or a SASL exchange: sasl.go) and
// each request is translated into what it needs (authorization, below).
//
// With Config.Auth nil (a plaintext broker on loopback, or one allowed
// plaintext) every client may do everything and nothing is checked, as
// the gRPC listener without TLS. With Auth set the listener speaks TLS, and
// a connection is authenticated either by the client certificate its
// handshake verified (mTLS; the principal is the one gRPC derives from the
// same certificate) or, when Config.SASL offers mechanisms, by a SASL
// exchange. Until then only ApiVersions and the SASL APIs are served, in
// frames of at most MaxPreAuthBytes (512 KiB by default); any other request
// closes the connection. Without SASL mechanisms the TLS handshake itself
// requires a client certificate, so a TLS listener never serves a client
// that proved nothing.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

// defaultMaxPreAuthBytes bounds a frame before the connection is
// authenticated: ApiVersions and SASL tokens are small (a SCRAM message is
// well under 1 KiB), so a client that has proved nothing cannot make the
// broker hold a 100 MiB frame.
const defaultMaxPreAuthBytes = 512 << 10

// authorization says how each served API is authorized. conn.handle
// refuses, on a listener that authenticates, an API with no entry here
// (Auth.NoRule), so a new API stays closed until someone writes down what
// it needs; the handlers named do the per-topic checks. Every entry also
// needs an authenticated caller (Auth.Authorize refuses an anonymous one),
// except the pre-authentication APIs.
var authorization = map[int16]string{
	0:              "write on each topic (00_produce.go); TOPIC_AUTHORIZATION_FAILED per partition",
	1:              "read on each topic (01_fetch.go)",
	2:              "read on each topic (02_list_offsets.go)",
	3:              "topics listed only when the caller may see them; one asked by name or id it may not see is TOPIC_AUTHORIZATION_FAILED (03_metadata.go)",
	10:             "an authenticated caller: group calls check the group",
	apiVersionsKey: "anyone, also before authentication",
	17:             "anyone, before authentication (17_sasl_handshake.go)",
	22:             "an authenticated caller (producer ids number writes, which are checked topic by topic)",
	23:             "read on each topic (23_offset_for_leader_epoch.go)",
	// Consumer groups, as the gRPC group and offset calls: read on the
	// group and on each topic named; deleting needs admin on the group.
	8:  "read on the group (GROUP_AUTHORIZATION_FAILED for every partition) and on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions) (08_offset_commit.go)",
	9:  "read on each group (GROUP_AUTHORIZATION_FAILED for it); partitions of topics the caller may not read are TOPIC_AUTHORIZATION_FAILED, or left out of an all-topics answer (09_offset_fetch.go)",
	11: "read on the group, and for a consumer member on every topic it subscribes (11_join_group.go)",
	12: "read on the group (12_heartbeat.go)",
	13: "read on the group (13_leave_group.go)",
	14: "read on the group (14_sync_group.go)",
	15: "read on each group; GROUP_AUTHORIZATION_FAILED for it otherwise (15_describe_groups.go)",
	16: "an authenticated caller; only groups it may read are listed (16_list_groups.go)",
	42: "admin on each group; GROUP_AUTHORIZATION_FAILED for it otherwise (42_delete_groups.go)",
	47: "admin on the group, read on each topic (47_offset_delete.go)",
	68: "read on the group and on every topic subscribed (68_consumer_group_heartbeat.go)",
	69: "read on each group; GROUP_AUTHORIZATION_FAILED for it otherwise (69_consumer_group_describe.go)",
	// Admin, as the gRPC admin calls (admin_auth.go): admin on a topic to
	// create, delete or alter it; any permission on it to describe its
	// settings; read on it for its producers; admin on the cluster for
	// ACLs, broker settings and log dirs.
	19: "admin on each topic created (19_create_topics.go)",
	20: "admin on each topic deleted (20_delete_topics.go)",
	29: "admin on the cluster (29_describe_acls.go)",
	30: "admin on the cluster (30_create_acls.go)",
	31: "admin on the cluster (31_delete_acls.go)",
	32: "any permission on each topic; admin on the cluster for broker settings (32_describe_configs.go)",
	33: "admin on each topic altered (33_alter_configs.go)",
	35: "admin on the cluster (35_describe_log_dirs.go)",
	37: "admin on each topic (37_create_partitions.go)",
	44: "admin on each topic altered (44_incremental_alter_configs.go)",
	60: "an authenticated caller, as ClusterStatus (60_describe_cluster.go)",
	61: "read on each topic (61_describe_producers.go)",
	36: "anyone, before authentication (36_sasl_authenticate.go)",
	50: "admin on the cluster; CLUSTER_AUTHORIZATION_FAILED otherwise (50_describe_user_scram_credentials.go)",
	51: "admin on the cluster; CLUSTER_AUTHORIZATION_FAILED for every user otherwise (51_alter_user_scram_credentials.go)",
}

// preAuth are the APIs served before a connection is authenticated.
var preAuth = map[int16]bool{apiVersionsKey: true, saslHandshakeKey: true, saslAuthenticateKey: true}

var errNotAuthenticated = errors.New("kafka: request before authentication")

// connAuth is what one connection has proved.
type connAuth struct {
	// cert is the client certificate the TLS handshake verified.
	cert *x509.Certificate
	// p is the connection's principal once done.
	p    security.Principal
	done bool
	sasl saslState
	// hangUp closes the connection once the answer is written (a failed
	// SASL step).
	hangUp bool
}

// start runs the TLS handshake, when the listener speaks TLS, and
// authenticates a connection that showed a certificate. It returns false
// when the connection is to be closed.
func (c *conn) start() bool {
	if c.s.cfg.Auth == nil {
		c.auth.done = true
		return true
	}
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return false // NewServer requires TLS with Auth
	}
	ctx, cancel := context.WithTimeout(c.s.ctx, c.s.cfg.RequestTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		// Scanners and health checks open and drop connections: debug, as
		// the gRPC listener's TLS errors are not in the broker's log either.
		c.s.log.Debug("kafka: TLS handshake failed", "remote", c.nc.RemoteAddr(), "err", err)
		return false
	}
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
		// The handshake verified the chain (security.ServerConfig).
		c.auth.cert = certs[0]
		p, err := c.s.cfg.Auth.Authenticate(broker.Credentials{Cert: c.auth.cert})
		if err != nil {
			c.authFailed("TLS", "", err)
			return false
		}
		c.auth.p, c.auth.done = p, true
	}
	return true
}

// frameLimit is the largest frame the connection may send now.
func (c *conn) frameLimit() int {
	if c.auth.done {
		return c.s.cfg.MaxRequestBytes
	}
	return c.s.cfg.MaxPreAuthBytes
}

// admit refuses a request the connection may not make yet, or one no rule
// covers; the connection then closes.
func (c *conn) admit(key int16) error {
	if c.s.cfg.Auth == nil {
		return nil
	}
	if !c.auth.done && !preAuth[key] {
		c.authFailed("", "", fmt.Errorf("%s before authenticating", kmsg.NameForKey(key)))
		return fmt.Errorf("%w: %s", errNotAuthenticated, kmsg.NameForKey(key))
	}
	if _, ok := authorization[key]; !ok {
		// Refused as gRPC refuses a method without a rule (not logged as
		// a denial there either); the connection closes.
		return c.s.cfg.Auth.NoRule(c.auth.p, "Kafka "+kmsg.NameForKey(key))
	}
	return nil
}

// withPrincipal is ctx carrying the connection's principal, for the broker
// calls that read it (producer ids, visibility); ctx as it is without
// authentication.
func (c *conn) withPrincipal(ctx context.Context) context.Context {
	if c.s.cfg.Auth == nil {
		return ctx
	}
	return security.WithPrincipal(ctx, c.auth.p)
}

// allow returns nil when the connection's principal may make call, which
// needs acc, or the broker's refusal (logged and counted there, as gRPC's
// are). Without authentication everything is allowed.
func (c *conn) allow(call string, acc broker.Access) error {
	if c.s.cfg.Auth == nil {
		return nil
	}
	return c.s.cfg.Auth.Authorize(c.auth.p, "Kafka "+call, acc)
}

// allowTopic is allow for op on one topic.
func (c *conn) allowTopic(call, topic string, op security.Operation) error {
	return c.allow(call, broker.Needs(broker.TopicNeed(topic, op)))
}

// allowGroup is allow for op on one consumer group.
func (c *conn) allowGroup(call, group string, op security.Operation) error {
	return c.allow(call, broker.Needs(broker.GroupNeed(group, op)))
}

// groupCodeOf is the Kafka code of a refusal of a group permission:
// GROUP_AUTHORIZATION_FAILED, where a topic's is
// TOPIC_AUTHORIZATION_FAILED (errors.go).
func groupCodeOf(err error) int16 {
	if broker.ReasonOf(err) == broker.ReasonPermissionDenied {
		return kerr.GroupAuthorizationFailed.Code
	}
	return codeOf(err)
}

// clusterCodeOf is the Kafka code of a refusal of a cluster permission:
// Kafka names it CLUSTER_AUTHORIZATION_FAILED, where a topic's is
// TOPIC_AUTHORIZATION_FAILED (errors.go).
func clusterCodeOf(err error) int16 {
	if broker.ReasonOf(err) == broker.ReasonPermissionDenied {
		return kerr.ClusterAuthorizationFailed.Code
	}
	return codeOf(err)
}

// authFailed logs one failed authentication: the remote address, the
// mechanism and user name when there are, and why; never a password,
// token or proof.
func (c *conn) authFailed(mechanism, user string, err error) {
	args := []any{"remote", c.nc.RemoteAddr(), "err", err}
	if mechanism != "" {
		args = append(args, "mechanism", mechanism)
	}
	if user != "" {
		args = append(args, "user", user)
	}
	c.s.log.Warn("kafka: authentication failed", args...)
}

// readFrame reads the next frame: a request, bounded by frameLimit, or a
// raw SASL token (which may be shorter than a request header).
func (c *conn) readFrame() ([]byte, error) {
	if c.rawTokenNext() {
		return readSizedFrame(c.br, 0, c.s.cfg.MaxPreAuthBytes)
	}
	return readFrame(c.br, c.frameLimit())
}

// writeRaw writes a raw SASL token: its size and its bytes, no header.
func (c *conn) writeRaw(token []byte) error {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(token)))
	c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.RequestTimeout))
	_, err := c.nc.Write(append(b, token...))
	return err
}

// checkSecurity checks and completes a Config's security settings.
func checkSecurity(cfg *Config) error {
	if cfg.MaxPreAuthBytes <= 0 {
		cfg.MaxPreAuthBytes = defaultMaxPreAuthBytes
	}
	cfg.MaxPreAuthBytes = min(cfg.MaxPreAuthBytes, cfg.MaxRequestBytes)
	switch {
	case cfg.Auth != nil && cfg.TLS == nil:
		return errors.New("kafka: authentication needs TLS (credentials would cross the network in the clear)")
	case cfg.Auth == nil && len(cfg.SASL) > 0:
		return errors.New("kafka: SASL needs authentication (Config.Auth)")
	}
	for _, m := range cfg.SASL {
		if !slices.Contains(Mechanisms, m) {
			return fmt.Errorf("kafka: SASL mechanism %q: want one of %s", m, strings.Join(Mechanisms, ", "))
		}
	}
	return nil
}
