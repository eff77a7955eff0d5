package kafka

// SASL on the Kafka listener: the state one connection's exchange is in,
// the mechanisms, and the raw tokens of a v0 handshake.
//
// A client picks a mechanism with SaslHandshake (17_sasl_handshake.go),
// then sends its tokens either in SaslAuthenticate requests (handshake v1,
// KIP-152: 36_sasl_authenticate.go) or, after a v0 handshake, as raw
// frames: a 4-byte size and the token, answered the same way with no
// header (older clients). One exchange per connection; a failure answers
// SASL_AUTHENTICATION_FAILED (a raw exchange: nothing) and closes the
// connection, and is logged once with the remote address, never the
// secret.
//
// Mechanisms (Config.SASL offers some of them):
//
//   - PLAIN: the password is a Strata token, the same bearer tokens gRPC
//     accepts (security.tokens_file), authenticated by the broker's one
//     function (broker.Auth.Authenticate). The user name may be empty, or
//     name the token's principal (alice or User:alice for a token of
//     User:alice); any other name fails, so a client configured for one
//     user cannot silently act as another. An authorization id, if sent,
//     must equal the user name.
//   - SCRAM-SHA-256, SCRAM-SHA-512 (RFC 5802, 7677; sasl_scram.go):
//     against the credentials the cluster stores (strata user, or Kafka's
//     AlterUserScramCredentials). The principal is User:<name>.
//
// A connection that showed a client certificate is its certificate's
// principal whatever it then proves with SASL (broker.Auth's rule); the
// exchange must still succeed.

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
	mechPlain           = "PLAIN"
)

// Mechanisms are the SASL mechanisms the listener can offer.
var Mechanisms = []string{mechPlain, "SCRAM-SHA-256", "SCRAM-SHA-512"}

// errSASLFailed is what a client is told of any failed exchange: which
// part was wrong (the user, the password) is for the log.
var errSASLFailed = errors.New("authentication failed: invalid credentials")

// saslState is one connection's SASL exchange.
type saslState struct {
	// mechanism is the one the handshake chose; "" before.
	mechanism string
	// raw: the handshake was v0, so tokens come as raw frames.
	raw bool
	// ex is the exchange in progress; nil once over.
	ex saslExchange
}

// saslExchange is the server's side of one mechanism's exchange.
type saslExchange interface {
	// step takes the client's next token and returns the answer, and
	// whether the exchange is over; an error fails it.
	step(token []byte) (answer []byte, done bool, err error)
	// credentials are what the exchange proved, once done.
	credentials() broker.Credentials
	// user is the user name the client gave, for the log ("" before it
	// gave one).
	user() string
}

// newExchange starts mechanism's exchange for c, nil for a mechanism not
// offered.
func (c *conn) newExchange(mechanism string) saslExchange {
	if !slices.Contains(c.s.cfg.SASL, mechanism) {
		return nil
	}
	if mechanism == mechPlain {
		return &plainExchange{}
	}
	if security.SCRAMHash(mechanism) != nil {
		return newSCRAMExchange(mechanism, c.s.b.SCRAMCredential)
	}
	return nil
}

// rawTokenNext reports whether the next frame is a raw SASL token.
func (c *conn) rawTokenNext() bool { return c.auth.sasl.raw && c.auth.sasl.ex != nil }

// saslStep runs one step of the exchange in progress; when it completes,
// the connection is authenticated. An error has been logged; the caller
// answers it and closes the connection.
func (c *conn) saslStep(token []byte) ([]byte, error) {
	s := &c.auth.sasl
	answer, done, err := s.ex.step(token)
	if err != nil {
		c.authFailed(s.mechanism, s.ex.user(), err)
		s.ex = nil
		return nil, err
	}
	if !done {
		return answer, nil
	}
	creds := s.ex.credentials()
	user := s.ex.user()
	s.ex = nil
	// What SASL proved is checked on its own, so a wrong password fails
	// even beside a certificate; then the certificate decides
	// (broker.Auth's rule), as start already authenticated it.
	p, err := c.s.cfg.Auth.Authenticate(creds)
	if err == nil && creds.TokenGiven && !plainUserMatches(user, p.Name) {
		err = fmt.Errorf("user name %q is not the token's principal %s", user, p.Name)
	}
	if err != nil {
		c.authFailed(s.mechanism, user, err)
		return nil, err
	}
	if c.auth.cert == nil {
		c.auth.p = p
	}
	c.auth.done = true
	return answer, nil
}

// rawToken serves a raw token frame (after a v0 handshake). A failure
// closes the connection without an answer, as Kafka does.
func (c *conn) rawToken(token []byte) error {
	answer, err := c.saslStep(token)
	if err != nil {
		return fmt.Errorf("kafka: SASL %s: %w", c.auth.sasl.mechanism, err)
	}
	return c.writeRaw(answer)
}

// plainUserMatches: a PLAIN user name may be empty or name the token's
// principal, with or without its "User:".
func plainUserMatches(user, principal string) bool {
	return user == "" || user == principal || "User:"+user == principal
}

// plainExchange is SASL/PLAIN (RFC 4616): one message,
// authzid NUL authcid NUL password.
type plainExchange struct {
	name  string
	token string
	given bool
}

func (e *plainExchange) step(msg []byte) ([]byte, bool, error) {
	authz, user, pass, err := parsePlain(msg)
	if err != nil {
		return nil, false, err
	}
	if authz != "" && authz != user {
		return nil, false, fmt.Errorf("authorization id %q is not the user name %q", authz, user)
	}
	e.name, e.token, e.given = user, pass, true
	return []byte{}, true, nil
}

func (e *plainExchange) credentials() broker.Credentials {
	return broker.Credentials{TokenGiven: e.given, Token: e.token}
}

func (e *plainExchange) user() string { return e.name }

// parsePlain splits a PLAIN message into its three parts. The password
// must not be empty; nothing may contain a NUL.
func parsePlain(msg []byte) (authz, user, pass string, err error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", "", "", errors.New("a PLAIN message is authzid NUL user NUL password")
	}
	if len(parts[2]) == 0 {
		return "", "", "", errors.New("a PLAIN message without a password")
	}
	return string(parts[0]), string(parts[1]), string(parts[2]), nil
}
