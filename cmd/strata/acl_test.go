package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil/inproc"
	"github.com/strata-log/strata/rpc"
)

// startACLBroker runs a single plaintext broker in this process, serving
// gRPC on loopback, and returns its address.
func startACLBroker(t testing.TB) string {
	t.Helper()
	cfg := testBrokerConfig(t)
	cfg.ObjectStore.Type = config.ObjectStoreNone
	b, srv := startInProcess(t, cfg)
	t.Cleanup(func() {
		srv.GracefulStop()
		if err := b.Close(); err != nil {
			t.Errorf("close broker: %v", err)
		}
	})
	return cfg.Listen
}

// testBrokerConfig is a one-broker configuration on free loopback ports
// with its data in a temporary directory and no admin endpoint.
func testBrokerConfig(t testing.TB) config.Broker {
	t.Helper()
	return inproc.Config(t, 1, t.TempDir())
}

// startInProcess starts a plaintext broker of cfg in this process and
// serves gRPC on cfg.Listen; the caller stops both.
func startInProcess(t testing.TB, cfg config.Broker) (*broker.Broker, *rpc.Server) {
	t.Helper()
	return inproc.Start(t, cfg, broker.WithVersion(version))
}

// strataCmd runs the strata command line in this process and returns what
// it printed and its error (which main would print after "strata: ").
func strataCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

func mustStrataCmd(t *testing.T, args ...string) string {
	t.Helper()
	out, err := strataCmd(t, args...)
	if err != nil {
		t.Fatalf("strata %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// tableRows returns a table's lines with the alignment squeezed out.
func tableRows(s string) []string {
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		rows = append(rows, strings.Join(strings.Fields(line), " "))
	}
	return rows
}

func mustRows(t *testing.T, what, out string, want ...string) {
	t.Helper()
	got := tableRows(out)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\n%s\nwant rows:\n%s", what, out, strings.Join(want, "\n"))
	}
}

// TestACLCommands runs strata acl add, list and remove against a real
// broker.
func TestACLCommands(t *testing.T) {
	addr := startACLBroker(t)
	acl := func(args ...string) string {
		t.Helper()
		return mustStrataCmd(t, append([]string{"acl", "--broker", addr}, args...)...)
	}
	const header = "PRINCIPAL OPERATION RESOURCE NAME PATTERN"
	mustRows(t, "list of a new cluster", acl("list"), header)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "--principal", "User:alice", "--topic", "orders", "--operation", "read"}, "added ACL User:alice read topic:orders\n"},
		{[]string{"add", "--principal", "User:bob", "--topic", "logs.", "--prefix", "-o", "write"}, "added ACL User:bob write topic:logs.*\n"},
		{[]string{"add", "--principal", "*", "--group", "", "--prefix", "-o", "read"}, "added ACL * read group:*\n"},
		{[]string{"add", "--principal", "User:ops", "--cluster", "-o", "ADMIN"}, "added ACL User:ops admin cluster\n"},
		// Adding a stored one again is harmless.
		{[]string{"add", "--principal", "User:alice", "--topic", "orders", "-o", "read"}, "added ACL User:alice read topic:orders\n"},
	} {
		if out := acl(tc.args...); out != tc.want {
			t.Fatalf("acl %s: %q, want %q", strings.Join(tc.args, " "), out, tc.want)
		}
	}
	mustRows(t, "list", acl("list"), header,
		"User:alice read topic orders literal",
		"User:bob write topic logs. prefix",
		"* read group (any) prefix",
		"User:ops admin cluster - -")
	mustRows(t, "list --principal User:bob", acl("list", "--principal", "User:bob"), header,
		"User:bob write topic logs. prefix")

	if out := acl("remove", "--principal", "User:bob", "--topic", "logs.", "--prefix", "-o", "write"); out != "removed ACL User:bob write topic:logs.*\n" {
		t.Fatalf("remove: %q", out)
	}
	if out := acl("remove", "--principal", "User:bob", "--topic", "logs.", "--prefix", "-o", "write"); out != "no stored ACL matched User:bob write topic:logs.*; nothing removed\n" {
		t.Fatalf("remove again: %q", out)
	}
	mustRows(t, "list after remove", acl("list"), header,
		"User:alice read topic orders literal",
		"* read group (any) prefix",
		"User:ops admin cluster - -")
}

// TestACLCommandBadFlags: a flag mistake is explained in terms of the
// flags, before any broker is contacted (the one named here does not
// exist).
func TestACLCommandBadFlags(t *testing.T) {
	nowhere := "127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "--principal", "User:a", "--topic", "t", "--cluster", "-o", "read"}, "give only one of --topic, --group and --cluster, not --topic and --cluster"},
		{[]string{"remove", "--principal", "User:a", "--topic", "t", "--group", "g", "-o", "read"}, "not --topic and --group"},
		{[]string{"add", "--principal", "User:a", "-o", "read"}, "name the resource: give one of --topic NAME, --group NAME or --cluster"},
		{[]string{"add", "--topic", "t", "-o", "read"}, "--principal is required"},
		{[]string{"add", "--principal", "User:a", "--topic", "t"}, "--operation (-o) is required: read, write or admin"},
		{[]string{"add", "--principal", "User:a", "--cluster", "--prefix", "-o", "admin"}, "--prefix applies to --topic and --group"},
		{[]string{"add", "--principal", "User:a", "--topic", "", "-o", "read"}, `--topic needs a name; for every one, give --prefix with an empty name`},
		{[]string{"add", "--principal", "alice", "--topic", "t", "-o", "read"}, `invalid ACL: ACL principal "alice": want User:<name> or *`},
		{[]string{"add", "--principal", "User:a", "--group", "g", "-o", "write"}, `invalid ACL: ACL operation "write" on a group: want one of [read admin]`},
		{[]string{"add", "--principal", "User:a", "--topic", "t", "-o", "delete"}, `invalid ACL: ACL operation "delete" on a topic`},
		{[]string{"add", "--principal", "User:a", "--cluster", "-o", "read"}, `invalid ACL: ACL operation "read" on the cluster: want admin`},
		{[]string{"add", "extra", "--principal", "User:a", "--cluster", "-o", "admin"}, `unexpected argument "extra"`},
		{[]string{"list", "extra"}, `unexpected argument "extra"`},
		{[]string{"grant"}, `unknown command "grant" for "strata acl"`},
	} {
		out, err := strataCmd(t, append(append([]string{"acl"}, tc.args...), "--broker", nowhere)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("acl %s: error %v, want one saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
		if out != "" {
			t.Errorf("acl %s printed %q", strings.Join(tc.args, " "), out)
		}
	}
}
