package kafka

// SaslAuthenticate, v0 to v2 (KIP-152): one token of the exchange the
// handshake chose (sasl.go), and the server's answer. Without a v1
// handshake before it, or after the exchange is over, it is
// ILLEGAL_SASL_STATE. A failed step (wrong password, unknown user, a
// malformed token, a PLAIN user name that is not the token's principal) is
// SASL_AUTHENTICATION_FAILED with a message that does not say which part
// was wrong; the connection is closed after the answer. No session
// lifetime is given (v1+: 0), so clients do not re-authenticate
// (KIP-368 is not served). Served before authentication (auth.go).

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func errIllegalSASL(what string) error { return errors.New(what + " is out of order") }

func handleSASLAuth(_ context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.SASLAuthBytes = []byte{}
	s := &c.auth.sasl
	if s.ex == nil || s.raw {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate without a SaslHandshake v1 before it, or after the exchange ended"
		resp.ErrorMessage = &msg
		c.authFailed(s.mechanism, "", errIllegalSASL("SaslAuthenticate"))
		c.auth.hangUp = true
		return resp, nil
	}
	answer, err := c.saslStep(req.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = messageOf(errSASLFailed)
		c.auth.hangUp = true
		return resp, nil
	}
	resp.SASLAuthBytes = answer
	return resp, nil
}
