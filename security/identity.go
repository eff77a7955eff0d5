package security

// A broker's identity is in its certificate: a DNS name
// broker-<id>.<cluster> among its subject alternative names, so a broker
// proves the id it claims with its key, and a certificate for one cluster
// is no use in another that shares the CA.

import (
	"crypto/x509"
	"fmt"
	"strconv"
	"strings"
)

// DefaultCluster is the cluster name brokers' certificates carry unless
// configured otherwise.
const DefaultCluster = "strata"

// BrokerName is the DNS name that identifies broker id of cluster in a
// certificate: broker-<id>.<cluster>.
func BrokerName(id int32, cluster string) string {
	return "broker-" + strconv.FormatInt(int64(id), 10) + "." + cluster
}

// BrokerIDOf returns the broker id cert names for cluster, if it names one.
// A certificate naming two different ids names none: it is refused rather
// than guessed at.
func BrokerIDOf(cert *x509.Certificate, cluster string) (int32, bool) {
	found, id := false, int32(0)
	for _, name := range cert.DNSNames {
		rest, ok := strings.CutPrefix(name, "broker-")
		if !ok {
			continue
		}
		num, ok := strings.CutSuffix(rest, "."+cluster)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(num, 10, 32)
		if err != nil || n < 0 || strconv.FormatInt(n, 10) != num {
			continue
		}
		if found && int32(n) != id {
			return 0, false
		}
		found, id = true, int32(n)
	}
	return id, found
}

// PrincipalOf is who a verified certificate proves its holder to be: broker
// <id> when it names one of cluster, else User:<common name>.
func PrincipalOf(cert *x509.Certificate, cluster string) (Principal, error) {
	if id, ok := BrokerIDOf(cert, cluster); ok {
		return BrokerPrincipal(id), nil
	}
	cn := cert.Subject.CommonName
	if cn == "" || strings.ContainsAny(cn, " \t\r\n") {
		return Principal{}, fmt.Errorf("security: client certificate common name %q: want a name without spaces", cn)
	}
	return UserPrincipal(cn), nil
}

// RequireBroker returns a check that accepts only a certificate of broker
// id (any broker of cluster when id < 0).
func RequireBroker(id int32, cluster string) func(*x509.Certificate) error {
	return func(cert *x509.Certificate) error {
		got, ok := BrokerIDOf(cert, cluster)
		switch {
		case !ok:
			want := "broker-<id>." + cluster
			if id >= 0 {
				want = BrokerName(id, cluster)
			}
			return fmt.Errorf("security: certificate %q names no broker of cluster %q (want the DNS name %s)", cert.Subject.CommonName, cluster, want)
		case id >= 0 && got != id:
			return fmt.Errorf("security: certificate names broker %d, want broker %d", got, id)
		}
		return nil
	}
}
