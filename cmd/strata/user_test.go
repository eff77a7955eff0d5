package main

import (
	"strings"
	"testing"
)

// TestUserCommandBadFlags: a mistake in strata user's flags is explained
// before any broker is contacted (the one named does not exist), and no
// password is taken from the command line.
func TestUserCommandBadFlags(t *testing.T) {
	nowhere := "127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "alice"}, "--password-file is required"},
		{[]string{"create", "alice", "--password-file", "-", "--mechanism", "SCRAM-SHA-1"}, `--mechanism "SCRAM-SHA-1": want SCRAM-SHA-256 or SCRAM-SHA-512`},
		{[]string{"create", "alice", "--password-file", "-", "--iterations", "1000"}, "--iterations 1000: want 4096 to 16384"},
		{[]string{"create", "a,b", "--password-file", "-"}, "user name"},
		{[]string{"create", "alice", "--password", "x"}, "unknown flag: --password"},
		{[]string{"create"}, "missing NAME"},
		{[]string{"delete", "alice", "--mechanism", "PLAIN"}, `--mechanism "PLAIN"`},
		{[]string{"list", "extra"}, `unexpected argument "extra"`},
	} {
		out, err := strataCmd(t, append(append([]string{"user"}, tc.args...), "--broker", nowhere)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("user %s: error %v, want one saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
		if out != "" {
			t.Errorf("user %s printed %q", strings.Join(tc.args, " "), out)
		}
	}
}
