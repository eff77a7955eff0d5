package kafka

import (
	"errors"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group APIs' handlers on requests that decode but make little sense:
// the fuzz seeds of each group API, with bytes changed at random (seeded,
// so a failure replays), sent to a live broker. Each is answered (or the
// connection closed) and the broker goes on serving: no handler panics
// or wedges on what a client can send.
func TestGroupHandlersOddRequests(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic(t, "orders", 2)
	seeds, err := filepath.Glob("testdata/fuzz/FuzzRequest/*")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(848))
	sent := 0
	for _, path := range seeds {
		name := filepath.Base(path)
		if !strings.Contains(name, "Group") && !strings.Contains(name, "Offset") || strings.HasPrefix(name, "ListOffsets") {
			continue
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(raw), "\n")
		lit := strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")")
		s, err := strconv.Unquote(lit)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		seed := []byte(s)
		for range 150 {
			frame := append([]byte(nil), seed...)
			for range 1 + rng.Intn(3) {
				i := 4 + 10 + rng.Intn(len(frame)-14) // past the size and header's fixed part
				frame[i] = byte(rng.Intn(256))
			}
			rq, err := parseRequest(frame[4:])
			if err != nil {
				continue
			}
			c := dialRaw(t, tb.addr)
			c.send(frame)
			// An answer, or a closed connection: either way no panic, and
			// the next check finds the broker serving.
			c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			var ne net.Error
			if _, err := c.br.Read(make([]byte, 4)); errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("%s (%s v%d): no answer and the connection still open", name, kmsg.NameForKey(rq.key), rq.version)
			}
			c.nc.Close()
			sent++
		}
	}
	t.Logf("%d odd requests sent", sent)
	if sent < 100 {
		t.Fatalf("only %d odd requests decoded", sent)
	}
	req := kmsg.NewPtrApiVersionsRequest()
	if _, err := req.RequestWith(testCtx(t), tb.client(t)); err != nil {
		t.Fatalf("the broker stopped serving: %v", err)
	}
}
