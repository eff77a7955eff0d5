package security

// SCRAM's keys (RFC 5802 §3, RFC 7677): from a password, a salt and an
// iteration count, SaltedPassword = PBKDF2(password, salt, i);
// ClientKey = HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey),
// ServerKey = HMAC(SaltedPassword, "Server Key"). A server keeps StoredKey
// and ServerKey: enough to check a client's proof and to prove itself, not
// to log in as the client. The exchange itself is the Kafka front end's
// (kafka/sasl_scram.go); the credentials live in the cluster metadata.

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"hash"
)

// SCRAMHash is the hash of a SCRAM mechanism ("SCRAM-SHA-256",
// "SCRAM-SHA-512"), nil for any other.
func SCRAMHash(mechanism string) func() hash.Hash {
	switch mechanism {
	case "SCRAM-SHA-256":
		return sha256.New
	case "SCRAM-SHA-512":
		return sha512.New
	}
	return nil
}

// SCRAMSaltedPassword is PBKDF2 of password with salt and iterations, as
// the mechanism's hash makes it.
func SCRAMSaltedPassword(mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	h := SCRAMHash(mechanism)
	if h == nil {
		return nil, fmt.Errorf("security: %q is not a SCRAM mechanism", mechanism)
	}
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// SCRAMKeys are the stored key and server key of a salted password.
func SCRAMKeys(mechanism string, saltedPassword []byte) (storedKey, serverKey []byte, err error) {
	h := SCRAMHash(mechanism)
	if h == nil {
		return nil, nil, fmt.Errorf("security: %q is not a SCRAM mechanism", mechanism)
	}
	clientKey := SCRAMHMAC(h, saltedPassword, []byte("Client Key"))
	d := h()
	d.Write(clientKey)
	return d.Sum(nil), SCRAMHMAC(h, saltedPassword, []byte("Server Key")), nil
}

// SCRAMHMAC is HMAC with the mechanism's hash.
func SCRAMHMAC(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// NewSCRAMSalt is a random salt of 32 bytes.
func NewSCRAMSalt() []byte {
	salt := make([]byte, 32)
	rand.Read(salt) // never fails (crypto/rand)
	return salt
}
