package rpc

import (
	"net/http"
	"slices"
	"strings"

	"github.com/strata-log/strata/security"
)

// AdminAllowed reports whether an admin HTTP request (metrics, profiler)
// may be answered: brokers, superusers and principals with cluster admin
// may. It returns the HTTP status to answer with when not.
func (a *Auth) AdminAllowed(r *http.Request) (int, error) {
	var p security.Principal
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		var err error
		if p, err = security.PrincipalOf(r.TLS.PeerCertificates[0], a.Cluster); err != nil {
			return http.StatusUnauthorized, err
		}
	} else if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && a.Tokens != nil {
		if p, ok = a.Tokens.Principal(token); !ok {
			return http.StatusUnauthorized, errUnknownToken
		}
	}
	if p.Anonymous() {
		return http.StatusUnauthorized, errNeedCredentials
	}
	p.Superuser = !p.Broker && slices.Contains(a.Superusers, p.Name)
	if !security.Allowed(a.ACLs(), p, security.ResourceCluster, "", security.OpAdmin) {
		a.denials.note(a.Log, p, string(security.OpAdmin), "cluster (admin endpoint)")
		return http.StatusForbidden, errAdminOnly{p.Name}
	}
	return 0, nil
}

type errAdminOnly struct{ principal string }

func (e errAdminOnly) Error() string {
	return e.principal + " may not read the admin endpoint: it needs admin on the cluster (strata acl add --principal " + e.principal + " --cluster --operation admin)"
}

type authError string

func (e authError) Error() string { return string(e) }

const (
	errUnknownToken    = authError("the bearer token is not known")
	errNeedCredentials = authError("the admin endpoint needs a client certificate or a bearer token")
)
