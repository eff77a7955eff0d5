package e2e

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/freeport"
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

// TestReadmeKafka runs the kcat lines of the README's "Kafka clients"
// section, as written there (the broker's Kafka address put in for
// 127.0.0.1:9092, and -e added to the group member so it stops at the end),
// after the `strata topic create demo --partitions 3` it asks for.
func TestReadmeKafka(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat not found (apt-get install -y kcat; make tools does it): %v", err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "## Kafka clients")
	end := strings.Index(section, "In Go with franz-go")
	if start < 0 || end < start {
		t.Fatal(`README has no "Kafka clients" section with kcat lines before "In Go with franz-go"`)
	}
	var commands []string
	for _, l := range strings.Split(section[start:end], "\n") {
		if !strings.HasPrefix(l, "    ") {
			continue
		}
		cmd, _, _ := strings.Cut(strings.TrimSpace(l), "  #") // the comment
		commands = append(commands, strings.TrimSpace(cmd))
	}
	if len(commands) != 5 {
		t.Fatalf("README's Kafka section has %d commands, the test knows 5: %q", len(commands), commands)
	}

	kafkaAddr := freeport.Loopback(t)
	b := newBroker(t, 1, "--kafka-listen", kafkaAddr)
	b.start()
	b.run(nil, "topic", "create", "demo", "--partitions", "3")

	run := func(i int) string {
		t.Helper()
		c := strings.ReplaceAll(commands[i], "127.0.0.1:9092", kafkaAddr)
		c = strings.Replace(c, "kcat ", kcat+" ", 1)
		if strings.Contains(c, " -G ") {
			c = strings.Replace(c, " -G ", " -e -G ", 1)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "sh", "-c", c).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", c, err, out)
		}
		return string(out)
	}
	if out := run(0); !strings.Contains(out, "broker 1 at "+kafkaAddr) || !strings.Contains(out, `topic "demo" with 3 partitions`) {
		t.Errorf("kcat -L printed:\n%s", out)
	}
	run(1)
	for i, want := range [][]string{2: {"user-1=hello at ", "user-2=world at "}, 3: {"hello", "world"}, 4: {"hello", "world"}} {
		if want == nil {
			continue
		}
		out := run(i)
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s printed %q, want %q in it", commands[i], out, w)
			}
		}
	}
}
