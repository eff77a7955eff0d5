package kafka

// Connection limits: at most MaxConnections Kafka connections open on the
// server at once, and at most MaxConnectionsPerIP from one client address
// (Kafka's max.connections and max.connections.per.ip). A connection over
// either is closed as soon as it is accepted, before anything is read, as
// Kafka closes one over max.connections.per.ip, and counted in the
// metrics (strata_kafka_connections_refused_total, by limit). A slot is
// freed when its connection's goroutine ends. 0 means no bound.

import (
	"net"
	"sync"
)

type connLimits struct {
	max, maxPerIP int
	mu            struct {
		sync.Mutex
		total int
		perIP map[string]int
	}
}

func newConnLimits(max, maxPerIP int) *connLimits {
	l := &connLimits{max: max, maxPerIP: maxPerIP}
	l.mu.perIP = map[string]int{}
	return l
}

// admit takes a slot for a connection from addr, or names the limit that
// refuses it ("broker" or "ip"); release gives the slot back.
func (l *connLimits) admit(addr net.Addr) (release func(), refused string) {
	ip := ipOf(addr)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.max > 0 && l.mu.total >= l.max:
		return nil, "broker"
	case l.maxPerIP > 0 && l.mu.perIP[ip] >= l.maxPerIP:
		return nil, "ip"
	}
	l.mu.total++
	l.mu.perIP[ip]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.mu.total--
			if l.mu.perIP[ip]--; l.mu.perIP[ip] <= 0 {
				delete(l.mu.perIP, ip)
			}
		})
	}, ""
}

// ipOf is the client address without its port.
func ipOf(addr net.Addr) string {
	if a, ok := addr.(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}
