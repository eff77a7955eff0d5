package kafka

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/testutil"
)

// dialFrom connects to addr from the loopback address local (127.0.0.x:
// every one is this host on Linux), so one test plays several clients.
func dialFrom(t *testing.T, local, addr string) *rawConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// served reports whether the server answers an ApiVersions request on c
// (false: it closed the connection).
func (c *rawConn) served() bool {
	c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(frameOf(kmsg.NewPtrApiVersionsRequest(), 3, 1)); err != nil {
		return false
	}
	var size [4]byte
	_, err := io.ReadFull(c.br, size[:])
	if err != nil {
		return false
	}
	body := make([]byte, int(size[0])<<24|int(size[1])<<16|int(size[2])<<8|int(size[3]))
	_, err = io.ReadFull(c.br, body)
	return err == nil
}

// TestConnectionLimits: connections up to kafka.max_connections_per_ip
// from one address are served and the next is closed at once, while
// another address is still served; closing one frees its slot. Over
// kafka.max_connections, any address's next connection is closed. Both
// refusals are counted in the metrics.
func TestConnectionLimits(t *testing.T) {
	t.Run("per ip", func(t *testing.T) {
		tb := startBroker(t, func(c *Config) { c.MaxConnectionsPerIP = 2 })
		a, b := dialFrom(t, "127.0.0.1", tb.addr), dialFrom(t, "127.0.0.1", tb.addr)
		if !a.served() || !b.served() {
			t.Fatal("connections within the limit were not served")
		}
		over := dialFrom(t, "127.0.0.1", tb.addr)
		over.closed(5 * time.Second)
		if other := dialFrom(t, "127.0.0.2", tb.addr); !other.served() {
			t.Fatal("another address's connection was refused")
		}
		m := tb.scrape(t)
		if n := m[`strata_kafka_connections_refused_total{limit="ip"}`]; n != 1 {
			t.Errorf("refused for the per-ip limit: %v, want 1", n)
		}
		if n := m[`strata_kafka_connections`]; n != 3 {
			t.Errorf("open connections: %v, want 3", n)
		}
		// One closes: its slot comes free once the server has seen it go.
		a.nc.Close()
		testutil.WaitFor(t, 10*time.Second, "a connection served after one of the two closed", func() bool {
			return dialFrom(t, "127.0.0.1", tb.addr).served()
		})
	})
	t.Run("broker", func(t *testing.T) {
		tb := startBroker(t, func(c *Config) { c.MaxConnections = 2 })
		a, b := dialFrom(t, "127.0.0.1", tb.addr), dialFrom(t, "127.0.0.2", tb.addr)
		if !a.served() || !b.served() {
			t.Fatal("connections within the limit were not served")
		}
		dialFrom(t, "127.0.0.3", tb.addr).closed(5 * time.Second)
		if n := tb.scrape(t)[`strata_kafka_connections_refused_total{limit="broker"}`]; n != 1 {
			t.Errorf("refused for the broker's limit: %v, want 1", n)
		}
		b.nc.Close()
		testutil.WaitFor(t, 10*time.Second, "a connection served after one of the two closed", func() bool {
			return dialFrom(t, "127.0.0.3", tb.addr).served()
		})
	})
}
