package broker

// Authentication: who a caller is, from what its connection presents. Every
// front end reads the credentials off its own wire (gRPC: the TLS peer
// certificate and the "authorization: Bearer" header; the admin endpoint:
// the same over HTTP; Kafka: the TLS peer certificate, or a SASL/PLAIN
// password, which is a Strata token) and hands them to Auth.Authenticate;
// the rules below are the only ones.
//
//   - A verified client certificate decides: broker <id> when it names
//     broker-<id>.<cluster>, else User:<common name>. A token beside it is
//     ignored.
//   - Else a token decides: the principal the tokens file gives it. A token
//     that is not known is refused; so is one offered to a broker that takes
//     no tokens.
//   - Else a user proved by SASL/SCRAM (Kafka) is User:<name>.
//   - Else the caller is anonymous (security.AnonymousName). Authorize
//     refuses an anonymous caller every call it has a rule for.
//   - A broker, and only a broker, may call on behalf of another principal
//     (a call it forwards to the controller); the call is then that
//     principal's, and checked as such.
//   - The superusers the broker's config names pass every ACL check; a
//     broker is never a superuser (it passes them as a broker).
//
// Authorization is authz.go; what a principal may see in listings is
// visibility.go.

import (
	"crypto/x509"
	"log/slog"
	"slices"

	"github.com/strata-log/strata/security"
)

// Auth authenticates callers and authorizes their calls, for every front
// end of one broker. Set its fields before the first call; it is safe for
// concurrent use after that.
type Auth struct {
	// Cluster is the cluster name in brokers' certificates.
	Cluster string
	// Tokens admits clients by token; nil admits none that way.
	Tokens *security.Tokens
	// Superusers pass every ACL check.
	Superusers []string
	// ACLs returns the ACLs in force (the cluster metadata's,
	// Broker.ACLsInForce); nil is none.
	ACLs func() []security.ACL
	// Log receives denials, at most one per principal, operation and
	// resource a minute; nil logs none.
	Log *slog.Logger
	// OnDenied, when set, is called with the principal of every call
	// refused by a rule or an ACL (the broker counts them for its metrics,
	// RequestMetrics.Denied; Log's are rate-limited, these are not).
	OnDenied func(principal string)

	denials denialLog
}

// Credentials are what a caller presents on its connection, as its front
// end read them.
type Credentials struct {
	// Cert is the client certificate the TLS handshake verified against the
	// CA (security.ServerConfig), nil when the caller showed none.
	Cert *x509.Certificate
	// TokenGiven says the caller offered a token (an authorization header,
	// a SASL/PLAIN password); Token is the token, "" when what it offered
	// holds none a broker could accept (a header that is not "Bearer ...").
	TokenGiven bool
	Token      string
	// OnBehalfOf, when not "", names the principal a broker calls for
	// (security.AnonymousName for an anonymous one).
	OnBehalfOf string
	// SCRAMUser, when not "", is a user the front end proved with
	// SASL/SCRAM against the credentials the cluster stores (Broker's
	// SCRAMCredential): the caller is User:<SCRAMUser>, unless a
	// certificate decides.
	SCRAMUser string
}

// Authenticate returns who presents c. An error (UNAUTHENTICATED) says why
// the credentials do not check out; showing none is not an error but the
// anonymous principal.
func (a *Auth) Authenticate(c Credentials) (security.Principal, error) {
	var p security.Principal
	if c.Cert != nil {
		var err error
		if p, err = security.PrincipalOf(c.Cert, a.Cluster); err != nil {
			return p, Unauthenticated("%v", err)
		}
	}
	if p.Name == "" && c.TokenGiven {
		if c.Token == "" || a.Tokens == nil {
			return p, Unauthenticated("the authorization header holds no bearer token this broker accepts")
		}
		var ok bool
		if p, ok = a.Tokens.Principal(c.Token); !ok {
			return p, Unauthenticated("the bearer token is not known (revoked, or from another cluster)")
		}
	}
	if p.Name == "" && c.SCRAMUser != "" {
		p = security.UserPrincipal(c.SCRAMUser)
	}
	if c.OnBehalfOf != "" {
		if !p.Broker {
			return p, Unauthenticated("only a broker may call on behalf of another principal")
		}
		p = security.Principal{Name: c.OnBehalfOf}
	}
	if p.Name == "" {
		p.Name = security.AnonymousName
	}
	p.Superuser = !p.Broker && slices.Contains(a.Superusers, p.Name)
	return p, nil
}

// acls returns the ACLs in force.
func (a *Auth) acls() []security.ACL {
	if a.ACLs == nil {
		return nil
	}
	return a.ACLs()
}
