package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// bridgeNet is a Linux bridge on this host with one network namespace per
// broker plugged into it by a veth pair: each broker is a host of its own on
// a private /24, the bridge holds the host's address on it, and MinIO (through
// a relay, see relay) and the test's client stay on this host. Cutting a
// broker off from its peers is then a routing matter inside namespaces
// (cutOff, heal), which leaves its path to the host, and so to MinIO and the
// client, untouched.
type bridgeNet struct {
	t      *testing.T
	bridge string
	hostIP string // the bridge's address: MinIO's relay and the client
	hosts  []*bridgeHost

	mu  sync.Mutex
	cut map[int]bool // hosts cut off from their peers
}

// bridgeHost is one namespace behind the bridge.
type bridgeHost struct {
	ns    string // namespace name
	veth  string // the bridge's side of the pair
	inner string // the namespace's side of the pair
	ip    string
}

// exec returns the command prefix that runs a program inside the namespace.
func (h *bridgeHost) exec() []string { return []string{"ip", "netns", "exec", h.ns} }

// newBridgeNet makes the bridge and n namespaces on a /24 that no interface
// of this host uses yet (10.232.X.0/24, X random), and removes them all when
// the test ends. Names carry a random tag, so runs of this test by other
// checkouts on the same machine do not collide. It returns an error when
// the machine does not allow it; what it made is removed either way.
func newBridgeNet(t *testing.T, n int) (*bridgeNet, error) {
	subnet, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	var tagb [3]byte
	rand.Read(tagb[:])
	tag := hex.EncodeToString(tagb[:])
	bn := &bridgeNet{t: t, bridge: "stcb" + tag, hostIP: subnet + ".1", cut: map[int]bool{}}
	// One cleanup removes everything, whatever was made: deleting a link
	// or namespace that does not exist is harmless. Deleting a namespace
	// also deletes its routes and its side of the veth pair; heal first
	// all the same, so routes in peers' namespaces go in any order.
	t.Cleanup(func() {
		for i := range bn.hosts {
			bn.heal(i)
		}
		for _, h := range bn.hosts {
			ip("link", "del", h.veth)
			ip("netns", "del", h.ns)
		}
		ip("link", "del", bn.bridge)
	})
	steps := [][]string{
		{"link", "add", bn.bridge, "type", "bridge"},
		{"addr", "add", bn.hostIP + "/24", "dev", bn.bridge},
		{"link", "set", bn.bridge, "up"},
	}
	for i := range n {
		h := &bridgeHost{
			ns:    fmt.Sprintf("strata-chaos-%s-%d", tag, i+1),
			veth:  fmt.Sprintf("stc%sh%d", tag, i+1),
			inner: fmt.Sprintf("stc%sn%d", tag, i+1),
			ip:    fmt.Sprintf("%s.%d", subnet, i+2),
		}
		bn.hosts = append(bn.hosts, h)
		steps = append(steps,
			[]string{"netns", "add", h.ns},
			[]string{"link", "add", h.veth, "type", "veth", "peer", "name", h.inner},
			[]string{"link", "set", h.inner, "netns", h.ns},
			[]string{"link", "set", h.veth, "master", bn.bridge},
			[]string{"link", "set", h.veth, "up"},
			[]string{"netns", "exec", h.ns, "ip", "addr", "add", h.ip + "/24", "dev", h.inner},
			[]string{"netns", "exec", h.ns, "ip", "link", "set", h.inner, "up"},
			// A broker dials its own address too (gossip, Raft); that
			// goes through the namespace's loopback device.
			[]string{"netns", "exec", h.ns, "ip", "link", "set", "lo", "up"},
		)
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return nil, err
		}
	}
	return bn, nil
}

// freeSubnet picks 10.232.X (X random) that no address of this host is in.
func freeSubnet() (string, error) {
	out, err := exec.Command("ip", "-o", "addr", "show").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ip -o addr show: %v: %s", err, out)
	}
	var b [1]byte
	for range 64 {
		rand.Read(b[:])
		subnet := fmt.Sprintf("10.232.%d", b[0])
		if !strings.Contains(string(out), " "+subnet+".") {
			return subnet, nil
		}
	}
	return "", errors.New("no free 10.232.X.0/24 subnet on this host")
}

// cutOff partitions host i from every other host: a blackhole route to each
// peer inside i's namespace, and one to i inside each peer's. Both
// directions, because with a route on one side only, TCP segments still
// arrive on the other and their data reaches the application until the
// unacknowledged window fills; a cut must carry nothing. The host's own
// address is not touched, so i still reaches MinIO and the client.
func (bn *bridgeNet) cutOff(i int) error {
	bn.mu.Lock()
	bn.cut[i] = true
	bn.mu.Unlock()
	for j, peer := range bn.hosts {
		if j == i {
			continue
		}
		if err := ip("netns", "exec", bn.hosts[i].ns, "ip", "route", "add", "blackhole", peer.ip+"/32"); err != nil {
			return err
		}
		if err := ip("netns", "exec", peer.ns, "ip", "route", "add", "blackhole", bn.hosts[i].ip+"/32"); err != nil {
			return err
		}
	}
	return nil
}

// heal removes the routes cutOff added for host i; it returns the first
// error of a route that was there to remove.
func (bn *bridgeNet) heal(i int) error {
	bn.mu.Lock()
	was := bn.cut[i]
	delete(bn.cut, i)
	bn.mu.Unlock()
	if !was {
		return nil
	}
	var first error
	for j, peer := range bn.hosts {
		if j == i {
			continue
		}
		for _, err := range []error{
			ip("netns", "exec", bn.hosts[i].ns, "ip", "route", "del", "blackhole", peer.ip+"/32"),
			ip("netns", "exec", peer.ns, "ip", "route", "del", "blackhole", bn.hosts[i].ip+"/32"),
		} {
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// relay listens on the bridge's address and copies every connection to and
// from target (a loopback address, such as MinIO's), so brokers in the
// namespaces reach a server that listens on this host's loopback only. It
// copies bytes and nothing else: S3 requests keep the Host header their
// sender signed. It stops, closing every connection, when the test ends.
func (bn *bridgeNet) relay(target string) (string, error) {
	lis, err := net.Listen("tcp", bn.hostIP+":0")
	if err != nil {
		return "", err
	}
	var (
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if conns == nil { // closed
			c.Close()
			return false
		}
		conns[c] = true
		return true
	}
	bn.t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		conns = nil
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			if !track(in) || !track(out) {
				in.Close()
				out.Close()
				continue
			}
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				io.Copy(dst, src)
				// Either side ending ends both: the other copy returns.
				dst.Close()
				src.Close()
			}
			go pipe(out, in)
			go pipe(in, out)
		}
	}()
	return lis.Addr().String(), nil
}

// startBridgeCluster starts one broker per host of bn, each in its own
// namespace on fixed ports of its own address, using MinIO through a relay
// on the bridge. The brokers find each other through gossip and bootstrap
// the metadata group once they see all of them.
//
// Gossip runs with the lan profile, not the local one the loopback tests
// use: these brokers are hosts of their own on a network that can
// partition, and the local profile stops gossiping to a member two seconds
// after declaring it dead, so a cut longer than that never heals (nothing
// re-joins dead members; both sides go on seeing each other dead).
func startBridgeCluster(t *testing.T, bn *bridgeNet, m *miniotest.Server, extra ...string) (*testCluster, error) {
	endpoint, err := bn.relay(m.Addr)
	if err != nil {
		return nil, err
	}
	tc := &testCluster{t: t, m: m}
	for _, h := range bn.hosts {
		tc.gossip = append(tc.gossip, h.ip+":7402")
	}
	for i, h := range bn.hosts {
		args := append([]string{
			"--gossip-join", strings.Join(tc.gossip, ","),
			"--gossip-bootstrap-expect", fmt.Sprint(len(bn.hosts)),
			"--gossip-profile", "lan",
			"--object-store-type", "s3",
			"--object-store-endpoint", "http://" + endpoint,
			"--object-store-bucket", m.Bucket,
			"--object-store-access-key", m.AccessKey,
			"--object-store-secret-key", m.SecretKey,
			"--object-store-path-style",
			// Plaintext beyond loopback: the namespaces exist only on this
			// host, for this test.
			"--security-allow-plaintext",
		}, extra...)
		addrs := brokerAddrs{grpc: h.ip + ":7400", raft: h.ip + ":7401", gossip: h.ip + ":7402"}
		tc.brokers = append(tc.brokers, newBrokerAt(t, i+1, addrs, h.exec(), args...))
	}
	for _, b := range tc.brokers {
		b.launch()
	}
	for _, b := range tc.brokers {
		b.waitServing()
	}
	return tc, nil
}
