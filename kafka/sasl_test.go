package kafka

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/security"
)

// TestSCRAMVector: the exchange of RFC 7677 §3 (SCRAM-SHA-256, user
// "user", password "pencil") verifies, and the server's signature is the
// RFC's; a proof one bit off fails.
func TestSCRAMVector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, err := security.SCRAMSaltedPassword("SCRAM-SHA-256", "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	stored, server, _ := security.SCRAMKeys("SCRAM-SHA-256", salted)
	cred := cluster.SCRAMCredential{Salt: salt, Iterations: 4096, StoredKey: stored, ServerKey: server}
	exchange := func() *scramExchange {
		e := newSCRAMExchange("SCRAM-SHA-256", func(user, mech string) (cluster.SCRAMCredential, bool) {
			return cred, user == "user" && mech == "SCRAM-SHA-256"
		})
		e.ourNonce = func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }
		return e
	}
	e := exchange()
	first, done, err := e.step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done || string(first) != "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096" {
		t.Fatalf("server-first %q %v %v", first, done, err)
	}
	const final = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
	last, done, err := e.step([]byte(final))
	if err != nil || !done || string(last) != "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Fatalf("server-final %q %v %v", last, done, err)
	}
	if c := e.credentials(); c.SCRAMUser != "user" {
		t.Fatalf("credentials %+v", c)
	}

	e = exchange()
	e.step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if _, _, err := e.step([]byte(strings.Replace(final, "dHzb", "dHzc", 1))); err == nil {
		t.Fatal("a wrong proof verified")
	}
	if c := e.credentials(); c.SCRAMUser != "" {
		t.Fatalf("a failed exchange proved %+v", c)
	}
	e = exchange()
	e.step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if _, _, err := e.step([]byte(strings.Replace(final, "k0,p=", "k1,p=", 1))); err == nil {
		t.Fatal("a nonce that is not the server's verified")
	}
}

// TestSCRAMClientFirst: what client-first messages are accepted and how
// names decode.
func TestSCRAMClientFirst(t *testing.T) {
	for msg, user := range map[string]string{
		"n,,n=alice,r=abc":                  "alice",
		"y,,n=alice,r=abc":                  "alice",
		"n,a=alice,n=alice,r=abc":           "alice",
		"n,,n=a=3Db,r=abc":                  "a=b",
		"n,,n=alice,r=abc,tokenauth=false":  "alice",
		"n,,n=alice,r=abc,unknownext=value": "alice",
	} {
		cf, err := parseSCRAMClientFirst(msg)
		if err != nil || cf.user != user || cf.nonce != "abc" {
			t.Errorf("%q: %+v %v, want user %q", msg, cf, err, user)
		}
	}
	for _, msg := range []string{
		"", "n", "n,,", "p=tls-unique,,n=alice,r=abc", "x,,n=alice,r=abc", "n,,r=abc,n=alice",
		"n,,n=,r=abc", "n,,n=a=2Cb,r=abc", "n,,n=a=b,r=abc", "n,,n=alice,r=", "n,,n=alice,r=a b",
		"n,a=bob,n=alice,r=abc", "n,x=1,n=alice,r=abc", "n,,n=alice,r=abc,tokenauth=true", "n,,m=ext,n=alice,r=abc",
	} {
		if cf, err := parseSCRAMClientFirst(msg); err == nil {
			t.Errorf("%q accepted: %+v", msg, cf)
		}
	}
}

// FuzzSASLTokens: the PLAIN and SCRAM parsers never panic, and what they
// accept holds their promises: a PLAIN password is never empty; a SCRAM
// user is a valid name and a nonce printable; a client-final's proof is
// what follows its last ",p=".
func FuzzSASLTokens(f *testing.F) {
	for _, s := range []string{
		"\x00alice\x00token", "alice\x00alice\x00token", "\x00\x00t", "\x00\x00",
		"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", "n,a=a=3Db,n=a=3Db,r=x,tokenauth=true", "p=tls-unique,,n=u,r=n",
		"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		"c=biws,r=x,p=", ",p=,p=AA==",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, user, pass, err := parsePlain(data); err == nil {
			if pass == "" || strings.Contains(user, "\x00") {
				t.Fatalf("PLAIN %q: user %q pass %q", data, user, pass)
			}
		}
		if cf, err := parseSCRAMClientFirst(string(data)); err == nil {
			if cluster.ValidateSCRAMUser(cf.user) != nil || !printableNonce(cf.nonce) || cf.gs2+cf.bare != string(data) {
				t.Fatalf("client-first %q: %+v", data, cf)
			}
		}
		if cf, err := parseSCRAMClientFinal(string(data)); err == nil {
			if len(cf.proof) == 0 || !strings.HasPrefix(string(data), cf.withoutProof+",p=") {
				t.Fatalf("client-final %q: %+v", data, cf)
			}
		}
	})
}
