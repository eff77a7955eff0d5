package security

// Bearer tokens for clients without a certificate. The broker keeps only
// their SHA-256 hashes, in a file of lines
//
//	User:<name> sha256:<64 hex digits>
//
// (blank lines and # comments allowed), re-read when it changes so tokens
// are added and revoked without a restart. `strata dev token NAME` makes a
// token and the line that admits it.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// Tokens maps presented tokens to principals, following its file.
type Tokens struct {
	path string
	log  *slog.Logger
	now  func() time.Time

	mu struct {
		sync.Mutex
		checked time.Time
		stamp   fileStamp
		byHash  map[[sha256.Size]byte]string
	}
}

// LoadTokens reads the tokens file; an error names the bad line.
func LoadTokens(path string, log *slog.Logger) (*Tokens, error) {
	if log == nil {
		log = slog.Default()
	}
	t := &Tokens{path: path, log: log, now: time.Now}
	stamp, byHash, err := t.read()
	if err != nil {
		return nil, err
	}
	t.mu.stamp, t.mu.byHash, t.mu.checked = stamp, byHash, t.now()
	return t, nil
}

func (t *Tokens) read() (fileStamp, map[[sha256.Size]byte]string, error) {
	fi, err := os.Stat(t.path)
	if err != nil {
		return fileStamp{}, nil, fmt.Errorf("security: tokens file: %w", err)
	}
	data, err := os.ReadFile(t.path)
	if err != nil {
		return fileStamp{}, nil, fmt.Errorf("security: tokens file: %w", err)
	}
	byHash, err := ParseTokens(data)
	if err != nil {
		return fileStamp{}, nil, fmt.Errorf("security: tokens file %s: %w", t.path, err)
	}
	return fileStamp{fi.ModTime(), fi.Size()}, byHash, nil
}

// ParseTokens reads the lines of a tokens file.
func ParseTokens(data []byte) (map[[sha256.Size]byte]string, error) {
	byHash := map[[sha256.Size]byte]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want \"User:<name> sha256:<hex>\"", n)
		}
		name, ok := strings.CutPrefix(fields[0], "User:")
		if !ok || name == "" || name == "ANONYMOUS" {
			return nil, fmt.Errorf("line %d: principal %q: want User:<name>", n, fields[0])
		}
		digest, ok := strings.CutPrefix(fields[1], "sha256:")
		raw, err := hex.DecodeString(digest)
		if !ok || err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("line %d: hash: want sha256: and 64 hex digits", n)
		}
		var h [sha256.Size]byte
		copy(h[:], raw)
		if prev, dup := byHash[h]; dup && prev != fields[0] {
			return nil, fmt.Errorf("line %d: the same token is given to %s and %s", n, prev, fields[0])
		}
		byHash[h] = fields[0]
	}
	return byHash, sc.Err()
}

// Principal returns the principal a token belongs to.
func (t *Tokens) Principal(token string) (Principal, bool) {
	h := sha256.Sum256([]byte(token))
	t.mu.Lock()
	defer t.mu.Unlock()
	if now := t.now(); now.Sub(t.mu.checked) >= reloadCheck {
		t.mu.checked = now
		t.reloadLocked()
	}
	name, ok := t.mu.byHash[h]
	if !ok {
		return Principal{}, false
	}
	return Principal{Name: name}, true
}

func (t *Tokens) reloadLocked() {
	fi, err := os.Stat(t.path)
	if err == nil && (fileStamp{fi.ModTime(), fi.Size()}) == t.mu.stamp {
		return
	}
	stamp, byHash, err := t.read()
	if err != nil {
		// Keep the previous tokens: a half-written file must not lock every
		// client out, and an operator who removes a line sees it take
		// effect once the file loads again.
		t.log.Warn("tokens file changed but does not load; keeping the previous tokens", "err", err)
		return
	}
	t.mu.stamp, t.mu.byHash = stamp, byHash
	t.log.Info("tokens reloaded", "file", t.path, "tokens", len(byHash))
}

// NewToken makes a random token for principal and the tokens file line
// that admits it.
func NewToken(principal string) (token, line string, err error) {
	if name, ok := strings.CutPrefix(principal, "User:"); !ok || name == "" || strings.ContainsAny(name, " \t\r\n") {
		return "", "", errors.New("security: a token's principal is User:<name>, without spaces")
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", "", err
	}
	token = base64.RawURLEncoding.EncodeToString(raw)
	h := sha256.Sum256([]byte(token))
	return token, principal + " sha256:" + hex.EncodeToString(h[:]), nil
}
