package security

// TLS material from PEM files, re-read when the files change, so that
// certificates and keys rotate without a restart. Connections verify peers
// against the CA as it is at the handshake: Go's static RootCAs/ClientCAs
// cannot change once a listener runs, so verification is done here, in
// VerifyConnection, with the current pool.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Files names the PEM files of a TLS identity and of the CA that vouches
// for peers.
type Files struct {
	CA   string // one or more CA certificates
	Cert string // this side's certificate chain
	Key  string // its private key
}

// reloadCheck is how often the files are checked for changes: at most once
// per second, on the next handshake.
const reloadCheck = time.Second

// Material is a TLS identity and trust pool that follow their files.
type Material struct {
	files Files
	log   *slog.Logger
	now   func() time.Time

	mu struct {
		sync.Mutex
		checked time.Time
		stamps  [3]fileStamp
		cert    *tls.Certificate
		pool    *x509.CertPool
	}
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// LoadMaterial reads the files; an error names the one that is wrong.
func LoadMaterial(f Files, log *slog.Logger) (*Material, error) {
	if f.CA == "" || f.Cert == "" || f.Key == "" {
		return nil, errors.New("security: TLS needs a CA file, a certificate file and a key file")
	}
	if log == nil {
		log = slog.Default()
	}
	m := &Material{files: f, log: log, now: time.Now}
	stamps, cert, pool, err := m.read()
	if err != nil {
		return nil, err
	}
	m.mu.stamps, m.mu.cert, m.mu.pool, m.mu.checked = stamps, cert, pool, m.now()
	return m, nil
}

// read loads all three files.
func (m *Material) read() ([3]fileStamp, *tls.Certificate, *x509.CertPool, error) {
	var stamps [3]fileStamp
	for i, name := range []string{m.files.CA, m.files.Cert, m.files.Key} {
		fi, err := os.Stat(name)
		if err != nil {
			return stamps, nil, nil, fmt.Errorf("security: %w", err)
		}
		stamps[i] = fileStamp{fi.ModTime(), fi.Size()}
	}
	caPEM, err := os.ReadFile(m.files.CA)
	if err != nil {
		return stamps, nil, nil, fmt.Errorf("security: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return stamps, nil, nil, fmt.Errorf("security: %s holds no PEM certificate", m.files.CA)
	}
	cert, err := tls.LoadX509KeyPair(m.files.Cert, m.files.Key)
	if err != nil {
		return stamps, nil, nil, fmt.Errorf("security: certificate %s with key %s: %w", m.files.Cert, m.files.Key, err)
	}
	return stamps, &cert, pool, nil
}

// current returns the certificate and pool, re-reading the files first
// when they changed. A change that does not load (a half-copied file, a key
// that does not match) keeps the old material and is logged: rotation must
// never take a running broker off the network.
func (m *Material) current() (*tls.Certificate, *x509.CertPool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now := m.now(); now.Sub(m.mu.checked) >= reloadCheck {
		m.mu.checked = now
		m.reloadLocked()
	}
	return m.mu.cert, m.mu.pool
}

func (m *Material) reloadLocked() {
	var stamps [3]fileStamp
	for i, name := range []string{m.files.CA, m.files.Cert, m.files.Key} {
		if fi, err := os.Stat(name); err == nil {
			stamps[i] = fileStamp{fi.ModTime(), fi.Size()}
		}
	}
	if stamps == m.mu.stamps {
		return
	}
	read, cert, pool, err := m.read()
	if err != nil {
		m.log.Warn("TLS files changed but do not load; keeping the previous certificate", "err", err)
		return
	}
	m.mu.stamps, m.mu.cert, m.mu.pool = read, cert, pool
	m.log.Info("TLS certificate reloaded", "cert", m.files.Cert, "ca", m.files.CA)
}

// Reload re-reads the files now if they changed, without waiting for the
// next check. For tests and for SIGHUP.
func (m *Material) Reload() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.checked = m.now()
	m.reloadLocked()
}

// Leaf is this side's current certificate.
func (m *Material) Leaf() *x509.Certificate {
	cert, _ := m.current()
	return cert.Leaf
}

// ServerConfig is the TLS configuration of a listener. With requireCert a
// client must show a certificate the CA signed; otherwise one is verified
// if shown (clients may authenticate with a token instead). check, if not
// nil, also vets the verified client certificate (a broker-only listener
// asks for a broker's).
func (m *Material) ServerConfig(requireCert bool, check func(*x509.Certificate) error) *tls.Config {
	auth := tls.RequestClientCert
	if requireCert {
		auth = tls.RequireAnyClientCert
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: auth,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			cert, _ := m.current()
			return cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				if requireCert {
					return errors.New("security: a client certificate is required")
				}
				return nil
			}
			_, pool := m.current()
			return verifyPeer(cs.PeerCertificates, pool, x509.ExtKeyUsageClientAuth, check)
		},
	}
}

// ClientConfig is the TLS configuration of a connection to a broker. check
// vets the verified server certificate: that it is the broker dialled, or
// any broker of the cluster.
func (m *Material) ClientConfig(check func(*x509.Certificate) error) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verification is not skipped: VerifyConnection does it against the
		// CA pool as it is now, and checks the broker's identity rather than
		// a host name (brokers are dialled by address).
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := m.current()
			return cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, pool := m.current()
			return verifyPeer(cs.PeerCertificates, pool, x509.ExtKeyUsageServerAuth, check)
		},
	}
}

// verifyPeer checks a peer's chain against pool, for usage, then check.
func verifyPeer(chain []*x509.Certificate, pool *x509.CertPool, usage x509.ExtKeyUsage, check func(*x509.Certificate) error) error {
	if len(chain) == 0 {
		return errors.New("security: the peer showed no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return fmt.Errorf("security: peer certificate %q: %w", chain[0].Subject.CommonName, err)
	}
	if check != nil {
		return check(chain[0])
	}
	return nil
}
