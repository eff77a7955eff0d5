package kafka

// SaslHandshake, v0 and v1: the client names the SASL mechanism it will
// use; the answer lists the mechanisms offered (Config.SASL: PLAIN,
// SCRAM-SHA-256, SCRAM-SHA-512; none on a listener without SASL).
//
// v1 means the tokens follow in SaslAuthenticate requests (KIP-152); v0
// means they follow as raw frames (sasl.go). A mechanism not offered is
// UNSUPPORTED_SASL_MECHANISM, and a second handshake on one connection is
// ILLEGAL_SASL_STATE; either is answered and the connection closed, as
// Kafka does. Served before authentication (auth.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleSaslHandshake(_ context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = append([]string{}, c.s.cfg.SASL...)
	s := &c.auth.sasl
	if s.mechanism != "" {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		c.authFailed(s.mechanism, "", errIllegalSASL("a second SaslHandshake"))
		c.auth.hangUp = true
		return resp, nil
	}
	ex := c.newExchange(req.Mechanism)
	if ex == nil {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.authFailed(req.Mechanism, "", errIllegalSASL("a mechanism not offered"))
		c.auth.hangUp = true
		return resp, nil
	}
	s.mechanism, s.raw, s.ex = req.Mechanism, req.Version == 0, ex
	return resp, nil
}
