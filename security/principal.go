package security

import (
	"context"
	"strconv"
)

// Principal is who a caller proved to be.
type Principal struct {
	// Name is "User:<name>" for a client (from its certificate's common
	// name or its token), "Broker:<id>" for a broker, or Anonymous.
	Name string
	// Broker is set when the caller proved with its certificate that it is
	// broker BrokerID of this cluster.
	Broker   bool
	BrokerID int32
	// Superuser is set for principals the broker's config names as
	// superusers: every ACL check passes.
	Superuser bool
}

// AnonymousName is the principal of a caller that showed no credentials.
const AnonymousName = "User:ANONYMOUS"

// Anonymous reports whether p showed no credentials.
func (p Principal) Anonymous() bool { return p.Name == "" || p.Name == AnonymousName }

// UserPrincipal is the principal of a client named name.
func UserPrincipal(name string) Principal { return Principal{Name: "User:" + name} }

// BrokerPrincipal is the principal of broker id.
func BrokerPrincipal(id int32) Principal {
	return Principal{Name: "Broker:" + strconv.FormatInt(int64(id), 10), Broker: true, BrokerID: id}
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx carries, and whether it carries
// one. A context without one comes from inside the broker, or from a
// broker whose listeners run without authentication.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
