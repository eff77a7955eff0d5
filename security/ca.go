package security

// A small certificate authority for development and tests: `strata dev
// certs` (make certs) and the tests that need brokers and clients with real
// certificates. Production deployments bring their own PKI; these are the
// same kinds of certificates it must issue.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// CA issues certificates.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA makes a self-signed CA valid for validFor from now.
func NewCA(name string, validFor time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"Strata"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validFor),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// LoadCA reads a CA certificate and its key, to issue more certificates.
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("security: %s or %s is not PEM", certFile, keyFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("security: %s: %w", certFile, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("security: %s: %w", keyFile, err)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// CertPEM is the CA certificate in PEM.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// KeyPEM is the CA key in PEM.
func (ca *CA) KeyPEM() ([]byte, error) { return keyPEM(ca.Key) }

// CertRequest says what certificate to issue.
type CertRequest struct {
	CommonName string
	DNSNames   []string
	IPs        []net.IP
	// NotBefore and NotAfter bound its validity; zero means from an hour ago
	// for a year.
	NotBefore, NotAfter time.Time
	// Server makes it good for a listener as well as for a client.
	Server bool
}

// Issue signs a new key's certificate; it returns both in PEM.
func (ca *CA) Issue(req CertRequest) (certPEM, keyPEMBytes []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if req.NotBefore.IsZero() {
		req.NotBefore = time.Now().Add(-time.Hour)
	}
	if req.NotAfter.IsZero() {
		req.NotAfter = req.NotBefore.Add(365 * 24 * time.Hour)
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if req.Server {
		usage = append(usage, x509.ExtKeyUsageServerAuth)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: req.CommonName, Organization: []string{"Strata"}},
		DNSNames:     req.DNSNames,
		IPAddresses:  req.IPs,
		NotBefore:    req.NotBefore,
		NotAfter:     req.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), kp, nil
}

// IssueBroker issues broker id's certificate for cluster: its identity name
// plus the host names and addresses it is reached at.
func (ca *CA) IssueBroker(id int32, cluster string, hosts []string) (certPEM, keyPEM []byte, err error) {
	req := CertRequest{CommonName: BrokerName(id, cluster), DNSNames: []string{BrokerName(id, cluster)}, Server: true}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			req.IPs = append(req.IPs, ip)
		} else {
			req.DNSNames = append(req.DNSNames, h)
		}
	}
	return ca.Issue(req)
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

// DevCerts says what WriteDevCerts makes.
type DevCerts struct {
	Cluster string   // cluster name in broker identities; empty means DefaultCluster
	Brokers int      // brokers 1..Brokers get a certificate
	Clients []string // client certificates by common name (their principal is User:<name>)
	Hosts   []string // extra names and addresses on every broker certificate
}

// WriteDevCerts makes a CA and certificates in dir: ca.pem and ca-key.pem,
// broker-<id>.pem and broker-<id>-key.pem, client-<name>.pem and
// client-<name>-key.pem. Keys are written 0600. An existing CA in dir is
// reused, so brokers added later trust the same root; existing
// certificates are replaced.
func WriteDevCerts(dir string, d DevCerts) error {
	if d.Cluster == "" {
		d.Cluster = DefaultCluster
	}
	if d.Brokers < 0 {
		return errors.New("security: broker count is negative")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	caFile, caKeyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	ca, err := LoadCA(caFile, caKeyFile)
	if errors.Is(err, os.ErrNotExist) {
		if ca, err = NewCA("Strata development CA", 10*365*24*time.Hour); err != nil {
			return err
		}
		kp, err := ca.KeyPEM()
		if err != nil {
			return err
		}
		if err := writeFiles(dir, "ca", ca.CertPEM(), kp); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	hosts := append([]string{"localhost", "127.0.0.1", "::1"}, d.Hosts...)
	for id := 1; id <= d.Brokers; id++ {
		c, k, err := ca.IssueBroker(int32(id), d.Cluster, hosts)
		if err != nil {
			return err
		}
		if err := writeFiles(dir, "broker-"+strconv.Itoa(id), c, k); err != nil {
			return err
		}
	}
	for _, name := range d.Clients {
		if name == "" || filepath.Base(name) != name {
			return fmt.Errorf("security: client name %q: want a plain name", name)
		}
		c, k, err := ca.Issue(CertRequest{CommonName: name})
		if err != nil {
			return err
		}
		if err := writeFiles(dir, "client-"+name, c, k); err != nil {
			return err
		}
	}
	return nil
}

// writeFiles writes <base>.pem and <base>-key.pem, each through a temporary
// file and a rename, so a broker that reloads them never reads half a file.
func writeFiles(dir, base string, certPEM, keyPEM []byte) error {
	if err := writeAtomic(filepath.Join(dir, base+".pem"), certPEM, 0o644); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, base+"-key.pem"), keyPEM, 0o600)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
