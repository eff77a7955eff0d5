package kafka

// SASL/SCRAM-SHA-256 and SCRAM-SHA-512, the server's side (RFC 5802 §5,
// RFC 7677), against the credentials the cluster stores
// (broker.SCRAMCredential: salt, iterations, stored key, server key).
//
//	client-first  n,,n=<user>,r=<client nonce>[,extensions]
//	server-first  r=<client nonce><server nonce>,s=<salt>,i=<iterations>
//	client-final  c=biws,r=<nonce>,p=<proof>
//	server-final  v=<server signature>
//
// Refused, failing the exchange: channel binding (gs2 flag "p"; "y" is
// accepted, as TLS is not offered as a binding), an authorization id other
// than the user, a mandatory extension (m=), Kafka's delegation-token
// extension (tokenauth=true: Strata has no delegation tokens), a user
// without a credential for the mechanism, a nonce that does not end with
// ours (librdkafka repeats its own half before it, as Kafka allows), and a
// proof that does not check out. User names are decoded from SCRAM's
// saslname (=2C is ",", =3D is "="; any other "=" is malformed).

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/security"
)

// scramExchange is one SCRAM exchange, in two steps.
type scramExchange struct {
	mechanism string
	h         func() hash.Hash
	lookup    func(user, mechanism string) (cluster.SCRAMCredential, bool)
	// ourNonce makes the server's half of the nonce (random; fixed by the
	// RFC's test vector).
	ourNonce func() string

	name            string
	gs2             string // the client-first message's gs2 header
	nonce           string // the client's and ours
	clientFirstBare string
	serverFirst     string
	cred            cluster.SCRAMCredential
	proven          bool
}

func newSCRAMExchange(mechanism string, lookup func(user, mechanism string) (cluster.SCRAMCredential, bool)) *scramExchange {
	return &scramExchange{mechanism: mechanism, h: security.SCRAMHash(mechanism), lookup: lookup, ourNonce: randomNonce}
}

func randomNonce() string {
	var b [24]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (e *scramExchange) user() string { return e.name }

func (e *scramExchange) credentials() broker.Credentials {
	if !e.proven {
		return broker.Credentials{}
	}
	return broker.Credentials{SCRAMUser: e.name}
}

func (e *scramExchange) step(msg []byte) ([]byte, bool, error) {
	if e.serverFirst == "" {
		return e.first(msg)
	}
	return e.final(msg)
}

func (e *scramExchange) first(msg []byte) ([]byte, bool, error) {
	cf, err := parseSCRAMClientFirst(string(msg))
	if err != nil {
		return nil, false, err
	}
	e.name = cf.user
	cred, ok := e.lookup(cf.user, e.mechanism)
	if !ok {
		return nil, false, fmt.Errorf("no %s credential for user %q", e.mechanism, cf.user)
	}
	e.gs2, e.clientFirstBare, e.cred = cf.gs2, cf.bare, cred
	e.nonce = cf.nonce + e.ourNonce()
	e.serverFirst = "r=" + e.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(cred.Iterations)
	return []byte(e.serverFirst), false, nil
}

func (e *scramExchange) final(msg []byte) ([]byte, bool, error) {
	cf, err := parseSCRAMClientFinal(string(msg))
	if err != nil {
		return nil, false, err
	}
	if cf.binding != base64.StdEncoding.EncodeToString([]byte(e.gs2)) {
		return nil, false, errors.New("the channel binding does not repeat the client-first message's gs2 header")
	}
	// The RFC's client repeats the server's nonce; librdkafka sends its
	// own nonce before it again (client + client + server), which Kafka
	// accepts by checking only that the nonce ends with the server's. So
	// do we: the server's random part is still there, and the proof signs
	// the message as sent.
	if !strings.HasSuffix(cf.nonce, e.nonce) {
		return nil, false, errors.New("the nonce is not the one the server sent")
	}
	authMessage := []byte(e.clientFirstBare + "," + e.serverFirst + "," + cf.withoutProof)
	signature := security.SCRAMHMAC(e.h, e.cred.StoredKey, authMessage)
	if len(cf.proof) != len(signature) {
		return nil, false, errors.New("wrong password (the proof does not check out)")
	}
	clientKey := make([]byte, len(signature))
	subtle.XORBytes(clientKey, cf.proof, signature)
	d := e.h()
	d.Write(clientKey)
	if subtle.ConstantTimeCompare(d.Sum(nil), e.cred.StoredKey) != 1 {
		return nil, false, errors.New("wrong password (the proof does not check out)")
	}
	e.proven = true
	serverSig := security.SCRAMHMAC(e.h, e.cred.ServerKey, authMessage)
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSig)), true, nil
}

// scramClientFirst is a parsed client-first message.
type scramClientFirst struct {
	gs2   string // "n,," and the like, up to the bare message
	user  string
	nonce string
	bare  string
}

// parseSCRAMClientFirst parses gs2-header client-first-message-bare.
func parseSCRAMClientFirst(msg string) (scramClientFirst, error) {
	var cf scramClientFirst
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return cf, errors.New("malformed SCRAM client-first message")
	}
	switch {
	case flag == "n", flag == "y":
	case strings.HasPrefix(flag, "p="):
		return cf, errors.New("SCRAM channel binding is not supported")
	default:
		return cf, errors.New("malformed SCRAM gs2 header")
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return cf, errors.New("malformed SCRAM gs2 header")
	}
	cf.gs2 = msg[:len(msg)-len(bare)]
	cf.bare = bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return cf, errors.New("a SCRAM client-first message starts n=<user>,r=<nonce>")
	}
	user, err := decodeSASLName(attrs[0][2:])
	if err != nil {
		return cf, err
	}
	if err := cluster.ValidateSCRAMUser(user); err != nil {
		return cf, err
	}
	cf.user = user
	if cf.nonce = attrs[1][2:]; !printableNonce(cf.nonce) {
		return cf, errors.New("a SCRAM nonce of printable characters other than ','")
	}
	for _, ext := range attrs[2:] {
		k, v, _ := strings.Cut(ext, "=")
		if k == "tokenauth" && strings.EqualFold(v, "true") {
			return cf, errors.New("delegation tokens (tokenauth) are not supported")
		}
	}
	if authz != "" {
		a, ok := strings.CutPrefix(authz, "a=")
		if !ok {
			return cf, errors.New("malformed SCRAM authorization id")
		}
		if az, err := decodeSASLName(a); err != nil || az != user {
			return cf, fmt.Errorf("authorization id %q is not the user %q", a, user)
		}
	}
	return cf, nil
}

// scramClientFinal is a parsed client-final message.
type scramClientFinal struct {
	binding, nonce string
	proof          []byte
	withoutProof   string
}

// parseSCRAMClientFinal parses c=<binding>,r=<nonce>[,ext...],p=<proof>.
func parseSCRAMClientFinal(msg string) (scramClientFinal, error) {
	var cf scramClientFinal
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return cf, errors.New("a SCRAM client-final message ends ,p=<proof>")
	}
	cf.withoutProof = msg[:i]
	proof, err := base64.StdEncoding.DecodeString(msg[i+3:])
	if err != nil || len(proof) == 0 {
		return cf, errors.New("the SCRAM proof is not base64")
	}
	cf.proof = proof
	attrs := strings.Split(cf.withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return cf, errors.New("a SCRAM client-final message starts c=<binding>,r=<nonce>")
	}
	cf.binding, cf.nonce = attrs[0][2:], attrs[1][2:]
	return cf, nil
}

// decodeSASLName undoes SCRAM's escaping of "," and "=" in names.
func decodeSASLName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", errors.New("malformed SCRAM user name (a '=' not followed by 2C or 3D)")
		}
		i += 2
	}
	return b.String(), nil
}

func printableNonce(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return true
}
