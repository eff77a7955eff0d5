package cluster

// SCRAM credentials (RFC 5802, RFC 7677): per user and mechanism, what a
// broker needs to check a client's SASL/SCRAM proof and to prove itself
// back (salt, iteration count, stored key, server key), never the
// password or anything a client could log in with. They live in the Raft
// metadata so every broker verifies the same users and they survive
// restarts; the controller writes them (setSCRAM, deleteSCRAM commands)
// and snapshots carry them (field "scram", absent when there are none, so
// a snapshot without it restores with none).
//
// The table sits beside Metadata, like the group memberships, rather than
// in it: Metadata is rebuilt by many transitions that need not know of it.

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
)

// SCRAM mechanisms, by their SASL names.
const (
	SCRAMSHA256 = "SCRAM-SHA-256"
	SCRAMSHA512 = "SCRAM-SHA-512"
)

// SCRAM iteration bounds: RFC 7677's minimum, and Kafka's maximum.
const (
	MinSCRAMIterations = 4096
	MaxSCRAMIterations = 16384
)

// MaxSCRAMUserName bounds a user name's length.
const MaxSCRAMUserName = 255

// ErrInvalidSCRAM: a SCRAM credential breaks a rule (unknown mechanism,
// iterations out of bounds, keys of the wrong length, a bad user name);
// the error names it. ErrSCRAMNotFound: no credential of that user and
// mechanism is stored.
var (
	ErrInvalidSCRAM  = errors.New("cluster: invalid SCRAM credential")
	ErrSCRAMNotFound = errors.New("cluster: SCRAM credential not found")
)

// SCRAMCredential is one user's credential for one mechanism.
type SCRAMCredential struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"storedKey"`
	ServerKey  []byte `json:"serverKey"`
}

// SCRAMKeySize is the length of a mechanism's keys (its hash's size), 0
// for a mechanism that is not SCRAM.
func SCRAMKeySize(mechanism string) int {
	switch mechanism {
	case SCRAMSHA256:
		return sha256.Size
	case SCRAMSHA512:
		return sha512.Size
	}
	return 0
}

// ValidateSCRAMUser checks a user name: 1 to MaxSCRAMUserName bytes,
// without spaces, control characters or commas (SCRAM's separator), as a
// principal User:<name> must be.
func ValidateSCRAMUser(user string) error {
	if user == "" || len(user) > MaxSCRAMUserName || strings.ContainsFunc(user, func(r rune) bool { return r <= ' ' || r == 0x7f || r == ',' }) {
		return errorf(ErrInvalidSCRAM, "user name %q: want 1 to %d characters without spaces, control characters or commas", user, MaxSCRAMUserName)
	}
	return nil
}

func validateSCRAM(user, mechanism string, c SCRAMCredential) error {
	if err := ValidateSCRAMUser(user); err != nil {
		return err
	}
	n := SCRAMKeySize(mechanism)
	switch {
	case n == 0:
		return errorf(ErrInvalidSCRAM, "mechanism %q: want %s or %s", mechanism, SCRAMSHA256, SCRAMSHA512)
	case c.Iterations < MinSCRAMIterations || c.Iterations > MaxSCRAMIterations:
		return errorf(ErrInvalidSCRAM, "%d iterations: want %d to %d", c.Iterations, MinSCRAMIterations, MaxSCRAMIterations)
	case len(c.Salt) < 8 || len(c.Salt) > 128:
		return errorf(ErrInvalidSCRAM, "a salt of %d bytes: want 8 to 128", len(c.Salt))
	case len(c.StoredKey) != n || len(c.ServerKey) != n:
		return errorf(ErrInvalidSCRAM, "keys of %d and %d bytes: %s keys are %d bytes", len(c.StoredKey), len(c.ServerKey), mechanism, n)
	}
	return nil
}

// scramKey names one credential.
type scramKey struct{ user, mechanism string }

// scramTable holds the credentials: an immutable map swapped whole, so
// readers (every SCRAM login) take no lock. The FSM goroutine is its only
// writer.
type scramTable struct {
	m atomic.Pointer[map[scramKey]SCRAMCredential]
}

func (t *scramTable) load() map[scramKey]SCRAMCredential {
	if p := t.m.Load(); p != nil {
		return *p
	}
	return nil
}

// install applies one change (FSM goroutine only).
func (t *scramTable) install(c *scramChange) {
	if c == nil {
		return
	}
	next := maps.Clone(t.load())
	if next == nil {
		next = map[scramKey]SCRAMCredential{}
	}
	if c.cred == nil {
		delete(next, c.key)
	} else {
		next[c.key] = *c.cred
	}
	t.m.Store(&next)
}

// replace swaps in a whole table (snapshot restore).
func (t *scramTable) replace(m map[scramKey]SCRAMCredential) { t.m.Store(&m) }

// scramChange sets (cred not nil) or deletes one credential.
type scramChange struct {
	key  scramKey
	cred *SCRAMCredential
}

// setSCRAMCmd stores a user's credential for a mechanism, replacing one
// stored before.
type setSCRAMCmd struct {
	header
	User       string          `json:"user"`
	Mechanism  string          `json:"mechanism"`
	Credential SCRAMCredential `json:"credential"`
}

// deleteSCRAMCmd removes a user's credential for a mechanism; removing one
// that is not stored changes nothing, so a retried delete is harmless.
type deleteSCRAMCmd struct {
	header
	User      string `json:"user"`
	Mechanism string `json:"mechanism"`
}

func (*setSCRAMCmd) typ() string    { return cmdSetSCRAM }
func (*deleteSCRAMCmd) typ() string { return cmdDeleteSCRAM }

func applySetSCRAM(c *setSCRAMCmd) (change, error) {
	if err := validateSCRAM(c.User, c.Mechanism, c.Credential); err != nil {
		return change{}, err
	}
	cred := c.Credential
	return change{scram: &scramChange{key: scramKey{c.User, c.Mechanism}, cred: &cred}}, nil
}

func applyDeleteSCRAM(c *deleteSCRAMCmd) (change, error) {
	if err := ValidateSCRAMUser(c.User); err != nil {
		return change{}, err
	}
	if SCRAMKeySize(c.Mechanism) == 0 {
		return change{}, errorf(ErrInvalidSCRAM, "mechanism %q: want %s or %s", c.Mechanism, SCRAMSHA256, SCRAMSHA512)
	}
	return change{scram: &scramChange{key: scramKey{c.User, c.Mechanism}}}, nil
}

// SetSCRAMCredential stores user's credential for mechanism (controller
// only: elsewhere ErrNotController), replacing any stored before.
func (n *Node) SetSCRAMCredential(ctx context.Context, user, mechanism string, cred SCRAMCredential) error {
	if err := validateSCRAM(user, mechanism, cred); err != nil {
		return err
	}
	if err := n.syncLeader(ctx); err != nil {
		return err
	}
	_, err := n.propose(ctx, &setSCRAMCmd{User: user, Mechanism: mechanism, Credential: cred})
	return err
}

// DeleteSCRAMCredential removes user's credential for mechanism
// (controller only); ErrSCRAMNotFound when none is stored.
func (n *Node) DeleteSCRAMCredential(ctx context.Context, user, mechanism string) error {
	if err := ValidateSCRAMUser(user); err != nil {
		return err
	}
	if err := n.syncLeader(ctx); err != nil {
		return err
	}
	if _, ok := n.SCRAMCredential(user, mechanism); !ok {
		return errorf(ErrSCRAMNotFound, "user %q has no %s credential", user, mechanism)
	}
	_, err := n.propose(ctx, &deleteSCRAMCmd{User: user, Mechanism: mechanism})
	return err
}

// SCRAMCredential returns user's credential for mechanism, as this node
// has applied the metadata.
func (n *Node) SCRAMCredential(user, mechanism string) (SCRAMCredential, bool) {
	c, ok := n.fsm.scram.load()[scramKey{user, mechanism}]
	return c, ok
}

// SCRAMUsers returns every user with a credential and its mechanisms,
// sorted.
func (n *Node) SCRAMUsers() map[string][]string {
	out := map[string][]string{}
	for k := range n.fsm.scram.load() {
		out[k.user] = append(out[k.user], k.mechanism)
	}
	for _, m := range out {
		slices.Sort(m)
	}
	return out
}

// scramEntry is one credential in a snapshot.
type scramEntry struct {
	User       string          `json:"user"`
	Mechanism  string          `json:"mechanism"`
	Credential SCRAMCredential `json:"credential"`
}

// scramEntries lists the table for a snapshot, sorted so that the same
// state encodes to the same bytes; nil for none.
func scramEntries(m map[scramKey]SCRAMCredential) []scramEntry {
	var out []scramEntry
	for k, c := range m {
		out = append(out, scramEntry{User: k.user, Mechanism: k.mechanism, Credential: c})
	}
	slices.SortFunc(out, func(a, b scramEntry) int {
		return strings.Compare(a.User+"\x00"+a.Mechanism, b.User+"\x00"+b.Mechanism)
	})
	return out
}

// snapshotSCRAM checks a snapshot's credentials.
func snapshotSCRAM(entries []scramEntry) (map[scramKey]SCRAMCredential, error) {
	m := make(map[scramKey]SCRAMCredential, len(entries))
	for _, e := range entries {
		if err := validateSCRAM(e.User, e.Mechanism, e.Credential); err != nil {
			return nil, err
		}
		k := scramKey{e.User, e.Mechanism}
		if _, dup := m[k]; dup {
			return nil, errorf(ErrInvalidSCRAM, "user %q has two %s credentials", e.User, e.Mechanism)
		}
		m[k] = e.Credential
	}
	return m, nil
}
