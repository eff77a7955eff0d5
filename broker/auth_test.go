package broker

import (
	"bytes"
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-log/strata/security"
)

// testTokens is a tokens file admitting User:app with the token it returns.
func testTokens(t *testing.T) (*security.Tokens, string) {
	t.Helper()
	token, line, err := security.NewToken("User:app")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := security.LoadTokens(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return tokens, token
}

// cert is a certificate as the TLS handshake hands it over, verified: only
// its names matter here.
func cert(cn string, dns ...string) *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: dns}
}

// TestAuthenticate: what each kind of credentials makes of a caller, the
// same for every front end.
func TestAuthenticate(t *testing.T) {
	tokens, token := testTokens(t)
	a := &Auth{Cluster: "c", Tokens: tokens, Superusers: []string{"User:admin", "Broker:1"}}
	broker1 := cert("broker-1.c", "broker-1.c")
	for _, tc := range []struct {
		name string
		c    Credentials
		want security.Principal
		err  string // a part of the UNAUTHENTICATED message; "" for none
	}{
		{"nothing", Credentials{}, security.Principal{Name: security.AnonymousName}, ""},
		{"a client certificate", Credentials{Cert: cert("alice")}, security.UserPrincipal("alice"), ""},
		{"a superuser's certificate", Credentials{Cert: cert("admin")}, security.Principal{Name: "User:admin", Superuser: true}, ""},
		{"a broker's certificate, never a superuser", Credentials{Cert: broker1}, security.BrokerPrincipal(1), ""},
		{"a broker certificate of another cluster is a user's", Credentials{Cert: cert("b", "broker-1.other")}, security.UserPrincipal("b"), ""},
		{"a certificate without a usable name", Credentials{Cert: cert("two words")}, security.Principal{}, "common name"},
		{"a certificate wins over a token", Credentials{Cert: cert("alice"), TokenGiven: true, Token: "junk"}, security.UserPrincipal("alice"), ""},
		{"a known token", Credentials{TokenGiven: true, Token: token}, security.UserPrincipal("app"), ""},
		{"an unknown token", Credentials{TokenGiven: true, Token: "junk"}, security.Principal{}, "the bearer token is not known"},
		{"a token field holding none", Credentials{TokenGiven: true}, security.Principal{}, "holds no bearer token"},
		{"a broker calling for a client", Credentials{Cert: broker1, OnBehalfOf: "User:admin"}, security.Principal{Name: "User:admin", Superuser: true}, ""},
		{"a broker calling for an anonymous caller", Credentials{Cert: broker1, OnBehalfOf: security.AnonymousName}, security.Principal{Name: security.AnonymousName}, ""},
		{"a client calling for another", Credentials{Cert: cert("alice"), OnBehalfOf: "User:admin"}, security.Principal{}, "only a broker"},
		{"an anonymous caller calling for another", Credentials{OnBehalfOf: "User:admin"}, security.Principal{}, "only a broker"},
	} {
		p, err := a.Authenticate(tc.c)
		switch {
		case tc.err != "":
			if ReasonOf(err) != ReasonUnauthenticated || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, %v; want UNAUTHENTICATED saying %q", tc.name, p, err, tc.err)
			}
		case err != nil || p != tc.want:
			t.Errorf("%s: %+v, %v; want %+v", tc.name, p, err, tc.want)
		}
	}
	// A broker that takes no tokens refuses one rather than ignore it.
	if _, err := (&Auth{}).Authenticate(Credentials{TokenGiven: true, Token: token}); ReasonOf(err) != ReasonUnauthenticated {
		t.Errorf("a token to a broker without tokens: %v", err)
	}
}

// The principals TestAuthorize and TestVisibility ask about.
var (
	pAnon    = security.Principal{Name: security.AnonymousName}
	pBroker2 = security.BrokerPrincipal(2)
	pAdmin   = security.Principal{Name: "User:admin", Superuser: true}
	pApp     = security.UserPrincipal("app")    // ACLs below
	pNobody  = security.UserPrincipal("nobody") // no ACL but those for "*"
)

var testACLs = []security.ACL{
	{Principal: "User:app", Resource: security.ResourceTopic, Name: "orders", Op: security.OpWrite},
	{Principal: "User:app", Resource: security.ResourceTopic, Name: "logs.", Prefix: true, Op: security.OpRead},
	{Principal: "User:app", Resource: security.ResourceTopic, Name: "owned", Op: security.OpAdmin},
	{Principal: "User:app", Resource: security.ResourceGroup, Name: "g", Op: security.OpRead},
	{Principal: "*", Resource: security.ResourceTopic, Name: "public", Op: security.OpRead},
}

// TestAuthorize: the answers the gRPC API's calls get (rpc/auth.go
// translates them into these Accesses), and which refusals are logged
// and counted.
func TestAuthorize(t *testing.T) {
	var denied []string
	var log bytes.Buffer
	a := &Auth{ACLs: func() []security.ACL { return testACLs }, OnDenied: func(p string) { denied = append(denied, p) },
		Log: slog.New(slog.NewTextHandler(&log, nil))}
	produce := func(topic string) Access { return Needs(TopicNeed(topic, security.OpWrite)) }
	fetch := func(topic string) Access { return Needs(TopicNeed(topic, security.OpRead)) }
	describe := func(topic string) Access { return Needs(TopicNeed(topic, OpSee)) }
	for _, tc := range []struct {
		p    security.Principal
		acc  Access
		want Reason // "" allowed
		msg  string // a part of the message
	}{
		// Anonymous: nothing, not even what needs no permission.
		{pAnon, Access{}, ReasonUnauthenticated, "Call needs credentials: a client certificate or a bearer token"},
		{pAnon, fetch("public"), ReasonUnauthenticated, ""},
		{pAnon, AnyBroker(), ReasonUnauthenticated, ""},
		// Brokers and superusers: everything but another broker's calls.
		{pBroker2, produce("orders"), "", ""},
		{pBroker2, Needs(ClusterAdmin()), "", ""},
		{pBroker2, AnyBroker(), "", ""},
		{pBroker2, BrokerAs(2, "follower"), "", ""},
		{pBroker2, BrokerAs(3, "follower"), ReasonPermissionDenied, "broker 2's certificate cannot speak as follower 3"},
		{pAdmin, produce("anything"), "", ""},
		{pAdmin, Needs(ClusterAdmin(), GroupNeed("g2", security.OpAdmin)), "", ""},
		{pAdmin, AnyBroker(), ReasonPermissionDenied, "User:admin may not use the replication service"},
		// A user with ACLs: what they grant, admin implying read and write.
		{pApp, Access{}, "", ""},
		{pApp, produce("orders"), "", ""},
		{pApp, fetch("orders"), ReasonPermissionDenied, "User:app may not read topic orders: no ACL grants it (an admin can: strata acl add --principal User:app --topic orders --operation read)"},
		{pApp, fetch("logs.web"), "", ""},
		{pApp, produce("logs.web"), ReasonPermissionDenied, ""},
		{pApp, produce("owned"), "", ""},
		{pApp, fetch("owned"), "", ""},
		{pApp, describe("orders"), "", ""},
		{pApp, describe("b"), ReasonPermissionDenied, "User:app may not read, write or admin topic b: no ACL grants it (an admin can: strata acl add --principal User:app --topic b --operation read)"},
		{pApp, Needs(GroupNeed("g", security.OpRead), TopicNeed("logs.x", security.OpRead)), "", ""},
		{pApp, Needs(GroupNeed("g", security.OpRead), TopicNeed("b", security.OpRead)), ReasonPermissionDenied, "topic b"},
		{pApp, Needs(GroupNeed("g", security.OpAdmin)), ReasonPermissionDenied, "may not admin group g"},
		{pApp, Needs(ClusterAdmin()), ReasonPermissionDenied, "User:app may not admin cluster: no ACL grants it (an admin can: strata acl add --principal User:app --cluster --operation admin)"},
		{pApp, BrokerAs(1, "leader"), ReasonPermissionDenied, "User:app may not use the replication service"},
		// A user without ACLs: what "*" grants, and no more.
		{pNobody, Access{}, "", ""},
		{pNobody, fetch("public"), "", ""},
		{pNobody, produce("public"), ReasonPermissionDenied, ""},
		{pNobody, fetch("orders"), ReasonPermissionDenied, ""},
	} {
		err := a.Authorize(tc.p, "Call", tc.acc)
		if ReasonOf(err) != tc.want || (tc.want == "") != (err == nil) || !strings.Contains(errString(err), tc.msg) {
			t.Errorf("%s, %+v: %v; want %q saying %q", tc.p.Name, tc.acc, err, tc.want, tc.msg)
		}
	}
	// Every refusal but the unauthenticated ones is counted; the log has
	// each principal, operation and resource once.
	wantDenied := []string{"Broker:2", "User:admin", "User:app", "User:app", "User:app", "User:app", "User:app", "User:app", "User:app", "User:nobody", "User:nobody"}
	if !slices.Equal(denied, wantDenied) {
		t.Errorf("OnDenied saw %q, want %q", denied, wantDenied)
	}
	denied, before := nil, log.Len()
	a.Authorize(pApp, "Call", fetch("orders"))
	if log.Len() != before || !slices.Equal(denied, []string{"User:app"}) {
		t.Errorf("a repeated denial: logged %q, counted %q; want it counted, not logged again", log.String()[before:], denied)
	}
	if !strings.Contains(log.String(), `msg="request denied" principal=User:app operation="read, write or admin" resource="topic b"`) ||
		!strings.Contains(log.String(), `principal=Broker:2 operation=Call resource=""`) {
		t.Errorf("the denials log:\n%s", log.String())
	}

	if err := a.NoRule(pApp, "Call"); ReasonOf(err) != ReasonPermissionDenied || err.Error() != "broker: User:app may not call Call" {
		t.Errorf("a call without a rule: %v", err)
	}
	for _, tc := range []struct {
		p    security.Principal
		want Reason
	}{{pAnon, ReasonUnauthenticated}, {pBroker2, ""}, {pAdmin, ""}, {pApp, ReasonPermissionDenied}, {security.UserPrincipal("ops"), ""}} {
		a.ACLs = func() []security.ACL {
			return append(slices.Clone(testACLs), security.ACL{Principal: "User:ops", Resource: security.ResourceCluster, Op: security.OpAdmin})
		}
		if err := a.AdminEndpoint(tc.p); ReasonOf(err) != tc.want {
			t.Errorf("the admin endpoint for %s: %v, want %q", tc.p.Name, err, tc.want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestVisibility: what each principal sees named in listings and in the
// cluster status.
func TestVisibility(t *testing.T) {
	a := &Auth{ACLs: func() []security.ACL { return testACLs }}
	topics := []string{"orders", "logs.web", "owned", "public", "b"}
	for _, tc := range []struct {
		p              security.Principal
		topics, groups []string
		offsets        []string // topics whose committed offsets it sees
	}{
		{pBroker2, topics, []string{"g", "g2"}, topics},
		{pAdmin, topics, []string{"g", "g2"}, topics},
		{pApp, []string{"orders", "logs.web", "owned", "public"}, []string{"g"}, []string{"logs.web", "owned", "public"}},
		{pNobody, []string{"public"}, nil, []string{"public"}},
		{pAnon, nil, nil, nil},
	} {
		v := a.VisibleTo(tc.p)
		got := func(names []string, f func(string) bool) []string {
			var out []string
			for _, n := range names {
				if f(n) {
					out = append(out, n)
				}
			}
			return out
		}
		if g := got(topics, v.Topic); !slices.Equal(g, tc.topics) {
			t.Errorf("%s sees topics %q, want %q", tc.p.Name, g, tc.topics)
		}
		if g := got([]string{"g", "g2"}, v.Group); !slices.Equal(g, tc.groups) {
			t.Errorf("%s sees groups %q, want %q", tc.p.Name, g, tc.groups)
		}
		if g := got(topics, v.Offset); !slices.Equal(g, tc.offsets) {
			t.Errorf("%s sees the offsets of %q, want %q", tc.p.Name, g, tc.offsets)
		}
		if v.All() != (tc.p.Broker || tc.p.Superuser) {
			t.Errorf("%s: All() = %v", tc.p.Name, v.All())
		}
	}
	// A call without a principal (from inside the broker, or without
	// authentication) sees everything.
	if v := (&Broker{}).Visibility(context.Background()); !v.All() || !v.Topic("b") {
		t.Error("a call without a principal does not see everything")
	}

	st := ClusterStatus{
		BrokerID:        1,
		Partitions:      map[string]int{"orders": 3, "b": 2},
		UnderReplicated: []PartitionStatus{{Topic: "b"}, {Topic: "orders"}},
		Offline:         []PartitionStatus{{Topic: "b"}},
		UploadLag:       []UploadLag{{Topic: "b", Bytes: 10}, {Topic: "orders", Bytes: 5}},
		Brokers:         []BrokerStatus{{BrokerView: BrokerView{ID: 1}}},
	}
	got := st.VisibleTo(a.VisibleTo(pApp))
	if len(got.Partitions) != 1 || got.Partitions["orders"] != 3 || len(got.UnderReplicated) != 1 || got.UnderReplicated[0].Topic != "orders" ||
		len(got.Offline) != 0 || len(got.UploadLag) != 1 || got.UploadLag[0].Topic != "orders" || len(got.Brokers) != 1 || got.BrokerID != 1 {
		t.Errorf("the status app sees: %+v", got)
	}
	if len(st.Partitions) != 2 || len(st.UnderReplicated) != 2 {
		t.Errorf("VisibleTo changed the status it filtered: %+v", st)
	}
	if got := st.VisibleTo(a.VisibleTo(pAdmin)); len(got.Partitions) != 2 || len(got.Offline) != 1 {
		t.Errorf("the status a superuser sees: %+v", got)
	}
}
