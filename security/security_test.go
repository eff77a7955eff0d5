package security

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBrokerIDOf(t *testing.T) {
	for _, tc := range []struct {
		names []string
		id    int32
		ok    bool
	}{
		{[]string{"broker-7.strata"}, 7, true},
		{[]string{"localhost", "broker-7.strata", "broker-7.strata"}, 7, true},
		{[]string{"broker-7.other"}, 0, false},
		{[]string{"broker-07.strata"}, 0, false}, // one spelling per id
		{[]string{"broker-x.strata"}, 0, false},
		{[]string{"broker-1.strata", "broker-2.strata"}, 0, false}, // two claims: none
		{[]string{"broker-1.strata.evil"}, 0, false},
	} {
		id, ok := BrokerIDOf(&x509.Certificate{DNSNames: tc.names}, "strata")
		if id != tc.id || ok != tc.ok {
			t.Errorf("BrokerIDOf(%v) = %d, %v; want %d, %v", tc.names, id, ok, tc.id, tc.ok)
		}
	}
}

func TestAllowed(t *testing.T) {
	acls := []ACL{
		{Principal: "User:alice", Resource: ResourceTopic, Name: "orders", Op: OpRead},
		{Principal: "User:alice", Resource: ResourceTopic, Name: "logs.", Prefix: true, Op: OpAdmin},
		{Principal: AnyPrincipal, Resource: ResourceGroup, Name: "", Prefix: true, Op: OpRead},
	}
	for _, a := range acls {
		if err := a.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	alice, bob := UserPrincipal("alice"), UserPrincipal("bob")
	for _, tc := range []struct {
		p    Principal
		res  ResourceType
		name string
		op   Operation
		want bool
	}{
		{alice, ResourceTopic, "orders", OpRead, true},
		{alice, ResourceTopic, "orders", OpWrite, false},
		{alice, ResourceTopic, "orders2", OpRead, false},
		{alice, ResourceTopic, "logs.app", OpWrite, true}, // admin implies write
		{alice, ResourceTopic, "logs.app", OpRead, true},
		{alice, ResourceCluster, "", OpAdmin, false},
		{bob, ResourceTopic, "orders", OpRead, false},
		{bob, ResourceGroup, "anything", OpRead, true},
		{Principal{Name: AnonymousName}, ResourceGroup, "anything", OpRead, false},
		{BrokerPrincipal(2), ResourceCluster, "", OpAdmin, true},
		{Principal{Name: "User:root", Superuser: true}, ResourceTopic, "x", OpAdmin, true},
	} {
		if got := Allowed(acls, tc.p, tc.res, tc.name, tc.op); got != tc.want {
			t.Errorf("Allowed(%s, %s %s %s) = %v, want %v", tc.p.Name, tc.op, tc.res, tc.name, got, tc.want)
		}
	}
}

func TestACLValidate(t *testing.T) {
	for _, bad := range []ACL{
		{Principal: "alice", Resource: ResourceTopic, Name: "t", Op: OpRead},
		{Principal: "User:", Resource: ResourceTopic, Name: "t", Op: OpRead},
		{Principal: "User:a", Resource: ResourceTopic, Name: "", Op: OpRead},
		{Principal: "User:a", Resource: ResourceGroup, Name: "g", Op: OpWrite},
		{Principal: "User:a", Resource: ResourceCluster, Name: "x", Op: OpAdmin},
		{Principal: "User:a", Resource: ResourceCluster, Op: OpRead},
		{Principal: "User:a", Resource: "broker", Name: "1", Op: OpRead},
		{Principal: "User:a", Resource: ResourceTopic, Name: strings.Repeat("t", 250), Op: OpRead},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}

// pki is a CA with a broker's and a client's certificates on disk.
type pki struct {
	dir string
	ca  *CA
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	if err := WriteDevCerts(dir, DevCerts{Brokers: 2, Clients: []string{"alice"}}); err != nil {
		t.Fatal(err)
	}
	ca, err := LoadCA(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return &pki{dir: dir, ca: ca}
}

func (p *pki) material(t *testing.T, base string) *Material {
	t.Helper()
	m, err := LoadMaterial(Files{CA: filepath.Join(p.dir, "ca.pem"), Cert: filepath.Join(p.dir, base+".pem"), Key: filepath.Join(p.dir, base+"-key.pem")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// handshake connects client to server over a real loopback socket and
// returns the error each side saw, and the server's certificate.
func handshake(t *testing.T, server, client *tls.Config) (serverErr, clientErr error, serverCert *x509.Certificate) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	done := make(chan error, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		done <- tls.Server(c, server).Handshake()
	}()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", lis.Addr().String(), client)
	if err != nil {
		return <-done, err, nil
	}
	defer c.Close()
	serverCert = c.ConnectionState().PeerCertificates[0]
	if serverErr = <-done; serverErr != nil {
		// With TLS 1.3 the client learns of a refused certificate on its
		// first read.
		c.SetDeadline(time.Now().Add(10 * time.Second))
		_, clientErr = c.Read(make([]byte, 1))
	}
	return serverErr, clientErr, serverCert
}

func TestOnlyBrokersOfTheClusterPassABrokerListener(t *testing.T) {
	p := newPKI(t)
	server := p.material(t, "broker-1").ServerConfig(true, RequireBroker(-1, DefaultCluster))

	// Broker 2 dials broker 1 expecting broker 1: accepted both ways.
	b2 := p.material(t, "broker-2")
	if se, ce, _ := handshake(t, server, b2.ClientConfig(RequireBroker(1, DefaultCluster))); se != nil || ce != nil {
		t.Fatalf("broker to broker: server %v, client %v", se, ce)
	}
	// Expecting broker 2 at broker 1's address: the client refuses.
	if _, ce, _ := handshake(t, server, b2.ClientConfig(RequireBroker(2, DefaultCluster))); ce == nil || !strings.Contains(ce.Error(), "names broker 1, want broker 2") {
		t.Fatalf("wrong broker at the address: client error %v", ce)
	}

	refused := func(name string, client *tls.Config, want string) {
		t.Helper()
		se, _, _ := handshake(t, server, client)
		if se == nil || !strings.Contains(se.Error(), want) {
			t.Errorf("%s: server error %v, want one containing %q", name, se, want)
		}
	}
	// A client certificate from the same CA is no broker.
	refused("client certificate", p.material(t, "client-alice").ClientConfig(nil), "names no broker")
	// No certificate at all.
	refused("no certificate", &tls.Config{InsecureSkipVerify: true}, "didn't provide a certificate")
	// A broker certificate from another CA.
	other := newPKI(t)
	refused("other CA", trustingClient(other.material(t, "broker-2")), "unknown authority")
	// An expired broker certificate from the right CA.
	c, k, err := p.ca.Issue(CertRequest{CommonName: "old", DNSNames: []string{BrokerName(2, DefaultCluster)}, Server: true,
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFiles(p.dir, "expired", c, k); err != nil {
		t.Fatal(err)
	}
	refused("expired", trustingClient(p.material(t, "expired")), "expired")
	// A broker of another cluster name, same CA.
	c, k, err = p.ca.IssueBroker(2, "elsewhere", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFiles(p.dir, "elsewhere", c, k); err != nil {
		t.Fatal(err)
	}
	refused("other cluster", p.material(t, "elsewhere").ClientConfig(nil), "names no broker")
}

func TestAClientListenerTakesCertificatesOrNone(t *testing.T) {
	p := newPKI(t)
	server := p.material(t, "broker-1").ServerConfig(false, nil)
	if se, ce, _ := handshake(t, server, p.material(t, "client-alice").ClientConfig(RequireBroker(-1, DefaultCluster))); se != nil || ce != nil {
		t.Fatalf("client certificate: server %v, client %v", se, ce)
	}
	// Without a certificate (a token client): the handshake passes; the
	// caller is anonymous until it shows a token.
	anon := &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "localhost"}
	anon.RootCAs.AddCert(p.ca.Cert)
	if se, ce, _ := handshake(t, server, anon); se != nil || ce != nil {
		t.Fatalf("no certificate: server %v, client %v", se, ce)
	}
	// A certificate from another CA is refused, not ignored.
	other := newPKI(t)
	if se, _, _ := handshake(t, server, trustingClient(other.material(t, "client-alice"))); se == nil {
		t.Fatal("a client certificate from another CA was accepted")
	}
}

func TestCertificatesRotateWithoutARestart(t *testing.T) {
	p := newPKI(t)
	m := p.material(t, "broker-1")
	client := p.material(t, "broker-2").ClientConfig(RequireBroker(1, DefaultCluster))
	_, _, before := handshake(t, m.ServerConfig(true, nil), client)
	if before == nil {
		t.Fatal("no handshake before the rotation")
	}
	// A new certificate for broker 1 lands in its files.
	if err := WriteDevCerts(p.dir, DevCerts{Brokers: 1}); err != nil {
		t.Fatal(err)
	}
	m.Reload()
	_, _, after := handshake(t, m.ServerConfig(true, nil), client)
	if after == nil || after.SerialNumber.Cmp(before.SerialNumber) == 0 {
		t.Fatalf("the listener still shows the old certificate after the files changed")
	}

	// A broken file (a key that does not match) keeps the current material.
	if err := os.WriteFile(filepath.Join(p.dir, "broker-1-key.pem"), mustRead(t, filepath.Join(p.dir, "broker-2-key.pem")), 0o600); err != nil {
		t.Fatal(err)
	}
	m.Reload()
	_, _, kept := handshake(t, m.ServerConfig(true, nil), client)
	if kept == nil || kept.SerialNumber.Cmp(after.SerialNumber) != 0 {
		t.Fatal("a broken rotation replaced the working certificate")
	}

	// A new CA: certificates of the old one stop being accepted.
	os.Remove(filepath.Join(p.dir, "ca.pem"))
	os.Remove(filepath.Join(p.dir, "ca-key.pem"))
	if err := WriteDevCerts(p.dir, DevCerts{Brokers: 1}); err != nil {
		t.Fatal(err)
	}
	m.Reload()
	if se, _, _ := handshake(t, m.ServerConfig(true, nil), trustingClient(p.material(t, "broker-2"))); se == nil || !strings.Contains(se.Error(), "unknown authority") {
		t.Fatalf("a certificate of the replaced CA: server error %v", se)
	}
}

// trustingClient shows m's certificate but trusts any server: the tests
// of what a listener refuses must not fail on the client's side first.
func trustingClient(m *Material) *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		cert, _ := m.current()
		return cert, nil
	}}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTokens(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	tokA, lineA, err := NewToken("User:alice")
	if err != nil {
		t.Fatal(err)
	}
	tokB, lineB, _ := NewToken("User:bob")
	if err := os.WriteFile(path, []byte("# clients\n"+lineA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := LoadTokens(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := toks.Principal(tokA); !ok || p.Name != "User:alice" {
		t.Fatalf("alice's token: %v %v", p, ok)
	}
	if _, ok := toks.Principal(tokB); ok {
		t.Fatal("bob's token accepted before it was added")
	}
	if _, ok := toks.Principal(""); ok {
		t.Fatal("the empty token accepted")
	}
	// Bob is added and alice revoked, without a restart.
	clock := time.Now()
	toks.now = func() time.Time { return clock }
	if err := os.WriteFile(path, []byte(lineB+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(2 * reloadCheck)
	if _, ok := toks.Principal(tokA); ok {
		t.Fatal("alice's revoked token still accepted")
	}
	if p, ok := toks.Principal(tokB); !ok || p.Name != "User:bob" {
		t.Fatalf("bob's token: %v %v", p, ok)
	}
	// A broken file keeps the previous tokens.
	if err := os.WriteFile(path, []byte("garbage line here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(2 * reloadCheck)
	if _, ok := toks.Principal(tokB); !ok {
		t.Fatal("a broken tokens file locked bob out")
	}

	for _, bad := range []string{"User:a", "alice sha256:00", "User:a sha256:zz", "User:ANONYMOUS sha256:" + strings.Repeat("0", 64)} {
		if _, err := ParseTokens([]byte(bad)); err == nil {
			t.Errorf("ParseTokens(%q) accepted", bad)
		}
	}
}
