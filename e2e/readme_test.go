package e2e

import (
	"slices"
	"strings"
	"testing"
)

// TestReadmeQuickstart runs the README's first steps, as a new user types
// them after `make run`.
func TestReadmeQuickstart(t *testing.T) {
	b := newBroker(t, 1)
	b.start()

	// strata topic create demo --partitions 3
	out := b.run(nil, "topic", "create", "demo", "--partitions", "3")
	if !strings.HasPrefix(out, "Topic:") || !strings.Contains(out, "demo") || strings.Count(out, "\n2 ") != 1 {
		t.Fatalf("topic create demo --partitions 3 printed:\n%s", out)
	}

	// printf 'hello\nworld\n' | strata produce demo
	res := strata(t, b, "hello\nworld\n", "produce", "demo")
	if res.code != 0 || res.stdout != "" || res.stderr != "produced 2 records to demo\n" {
		t.Fatalf("produce: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}

	// strata consume demo --from earliest: both lines, in some order
	// across partitions.
	got := lines(b.run(nil, "consume", "demo", "--from", "earliest"))
	slices.Sort(got)
	if !slices.Equal(got, []string{"hello", "world"}) {
		t.Fatalf("consume printed %q, want hello and world", got)
	}

	// With one key, one partition, and the order holds.
	b.run(strings.NewReader("one\ntwo\nthree\n"), "produce", "demo", "--key", "greeting")
	got = lines(b.run(nil, "consume", "demo", "--format", "kv"))
	var greeting []string
	for _, l := range got {
		if k, v, ok := strings.Cut(l, "="); ok && k == "greeting" {
			greeting = append(greeting, v)
		}
	}
	if !slices.Equal(greeting, []string{"one", "two", "three"}) {
		t.Fatalf("records of key greeting: %q, want one, two, three in order", greeting)
	}
}
