package rpc

import (
	"net/http"
	"strings"

	"github.com/strata-log/strata/broker"
)

// AdminAllowed reports whether an admin HTTP request (metrics, profiler)
// may be answered, by the broker's rules (broker.Auth.AdminEndpoint) for
// the credentials the request shows. It returns the HTTP status to answer
// with when not.
func (a *Auth) AdminAllowed(r *http.Request) (int, error) {
	var c broker.Credentials
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		c.Cert = r.TLS.PeerCertificates[0] // verified by the handshake
	}
	// Only a bearer token counts here; any other header is no credential.
	if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		c.TokenGiven, c.Token = true, token
	}
	p, err := a.policy().Authenticate(c)
	if err == nil {
		err = a.policy().AdminEndpoint(p)
	}
	switch broker.ReasonOf(err) {
	case "":
		return 0, nil
	case broker.ReasonPermissionDenied:
		return http.StatusForbidden, adminError(err)
	default:
		return http.StatusUnauthorized, adminError(err)
	}
}

// adminError is the broker's refusal as the endpoint answers it: its
// message, for people.
func adminError(err error) error {
	if be, ok := err.(*broker.Error); ok {
		return authError(be.Message)
	}
	return err
}

type authError string

func (e authError) Error() string { return string(e) }
