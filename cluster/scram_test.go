package cluster

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func scramCred(n int, b byte) SCRAMCredential {
	return SCRAMCredential{Salt: bytes.Repeat([]byte{b}, 16), Iterations: 4096,
		StoredKey: bytes.Repeat([]byte{b + 1}, n), ServerKey: bytes.Repeat([]byte{b + 2}, n)}
}

// TestFSMSCRAM: credentials are set, replaced and deleted by commands,
// invalid ones are refused and change nothing, and a snapshot carries them
// to a restored state (and a snapshot without them restores with none).
func TestFSMSCRAM(t *testing.T) {
	h := newFSMHarness(t)
	h.ok(&setSCRAMCmd{User: "alice", Mechanism: SCRAMSHA256, Credential: scramCred(32, 1)})
	h.ok(&setSCRAMCmd{User: "alice", Mechanism: SCRAMSHA512, Credential: scramCred(64, 2)})
	h.ok(&setSCRAMCmd{User: "bob", Mechanism: SCRAMSHA512, Credential: scramCred(64, 3)})
	h.ok(&setSCRAMCmd{User: "bob", Mechanism: SCRAMSHA512, Credential: scramCred(64, 4)}) // replaces
	for _, bad := range []*setSCRAMCmd{
		{User: "", Mechanism: SCRAMSHA256, Credential: scramCred(32, 1)},
		{User: "a b", Mechanism: SCRAMSHA256, Credential: scramCred(32, 1)},
		{User: "a,b", Mechanism: SCRAMSHA256, Credential: scramCred(32, 1)},
		{User: "carol", Mechanism: "SCRAM-SHA-1", Credential: scramCred(20, 1)},
		{User: "carol", Mechanism: SCRAMSHA256, Credential: scramCred(64, 1)},
		{User: "carol", Mechanism: SCRAMSHA256, Credential: SCRAMCredential{Salt: []byte("12345678"), Iterations: 4095, StoredKey: make([]byte, 32), ServerKey: make([]byte, 32)}},
		{User: "carol", Mechanism: SCRAMSHA256, Credential: SCRAMCredential{Salt: nil, Iterations: 4096, StoredKey: make([]byte, 32), ServerKey: make([]byte, 32)}},
	} {
		h.refused(bad, ErrInvalidSCRAM)
	}
	h.ok(&deleteSCRAMCmd{User: "alice", Mechanism: SCRAMSHA256})
	h.ok(&deleteSCRAMCmd{User: "alice", Mechanism: SCRAMSHA256}) // again: harmless
	h.refused(&deleteSCRAMCmd{User: "alice", Mechanism: "PLAIN"}, ErrInvalidSCRAM)

	got := h.f.scram.load()
	if len(got) != 2 {
		t.Fatalf("credentials %v, want alice's SHA-512 and bob's", got)
	}
	if c := got[scramKey{"bob", SCRAMSHA512}]; !bytes.Equal(c.StoredKey, scramCred(64, 4).StoredKey) {
		t.Fatalf("bob's credential was not replaced: %+v", c)
	}

	data := snapshotBytes(t, h.f)
	if !strings.Contains(string(data), `"scram":[{"user":"alice","mechanism":"SCRAM-SHA-512"`) || strings.Contains(string(data), "password") {
		t.Fatalf("snapshot without the credentials in order: %s", data)
	}
	dst := newFSMHarness(t)
	dst.ok(&setSCRAMCmd{User: "stale", Mechanism: SCRAMSHA256, Credential: scramCred(32, 9)})
	if err := dst.f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "restored credentials", dst.f.scram.load(), got)
	if again := snapshotBytes(t, dst.f); !bytes.Equal(again, data) {
		t.Fatalf("snapshot of the restored state differs:\n%s\n%s", data, again)
	}

	// A snapshot written before credentials existed restores with none.
	empty := snapshotBytes(t, richState(t).f)
	if strings.Contains(string(empty), "scram") {
		t.Fatalf("snapshot without credentials mentions them: %s", empty)
	}
	if err := dst.f.Restore(io.NopCloser(bytes.NewReader(empty))); err != nil {
		t.Fatal(err)
	}
	if n := len(dst.f.scram.load()); n != 0 {
		t.Fatalf("%d credentials after restoring a snapshot without any", n)
	}

	// A snapshot with an invalid credential fails the restore.
	bad := strings.Replace(string(data), `"iterations":4096`, `"iterations":1`, 1)
	if err := dst.f.Restore(io.NopCloser(strings.NewReader(bad))); err == nil {
		t.Fatal("a snapshot with 1 iteration restored")
	}
}
