package e2e

// Gossip is not a proof of identity. Under TLS, the gossip key lets a member
// into gossip, but only a broker's certificate proves which broker it is:
// these tests join gossip from inside the test process with the cluster's
// key and no broker certificate, claim a real broker's id, and check that
// the claim steers nothing. A member claiming a partition leader's id does
// not keep it alive after the leader is killed, and a member that routes a
// broker's addresses through a TCP relay (which passes any TLS handshake to
// the real broker) does not get them registered.

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/gossip"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// gossipAddrs returns the brokers' gossip addresses.
func (sc *secureCluster) gossipAddrs() []string {
	var out []string
	for _, b := range sc.brokers {
		out = append(out, b.args[slices.Index(b.args, "--gossip-listen")+1])
	}
	return out
}

// joinRogue joins the cluster's gossip with its key, claiming meta, under
// node name name. It has no broker certificate.
func joinRogue(t *testing.T, sc *secureCluster, name string, meta gossip.Meta) *gossip.Gossip {
	t.Helper()
	key, err := os.ReadFile(sc.file("gossip.key"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := gossip.Config{
		NodeName: name,
		Bind:     "127.0.0.1:0",
		Join:     sc.gossipAddrs(),
		Timing:   gossip.FastFailureDetection(),
		Meta:     meta,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if cfg.SecretKey, err = base64.StdEncoding.DecodeString(strings.TrimSpace(string(key))); err != nil {
		t.Fatal(err)
	}
	g, err := gossip.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// metadataFrom asks broker i for the cluster metadata as admin.
func metadataFrom(ctx context.Context, t *testing.T, sc *secureCluster, i int) (*stratav1.GetMetadataResponse, error) {
	cc := sc.conn(t, i, sc.clientTLS(t, "admin"))
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return stratav1.NewMetadataServiceClient(cc).GetMetadata(ctx, &stratav1.GetMetadataRequest{})
}

// waitRefused waits until some broker's log says it refused a claim of id
// at gRPC address addr.
func waitRefused(t *testing.T, sc *secureCluster, id int, addr string, within time.Duration) {
	t.Helper()
	testutil.WaitFor(t, within, fmt.Sprintf("a broker to refuse the rogue's claim of broker %d", id), func() bool {
		for _, b := range sc.brokers {
			for _, line := range lines(b.log()) {
				if strings.Contains(line, "does not prove the broker id it claims") && strings.Contains(line, fmt.Sprintf("claimed_id=%d ", id)) && strings.Contains(line, "addr="+addr+" ") {
					t.Logf("broker %d: %s", b.id, line)
					return true
				}
			}
		}
		return false
	})
}

func TestGossipClaimDoesNotBlockFailover(t *testing.T) {
	sc := startSecureCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := sc.client(t, client.WithTLS(sc.clientTLS(t, "admin")))
	if _, err := admin.CreateTopic(ctx, "t", 6, 3, nil); err != nil {
		t.Fatal(err)
	}
	// The victim: a broker that leads partitions and is not the controller
	// (so the failover does not wait for a new controller as well).
	var md *stratav1.GetMetadataResponse
	victim := -1
	testutil.WaitFor(t, time.Minute, "partitions led by a broker that is not the controller", func() bool {
		var err error
		if md, err = admin.Metadata(ctx, "t"); err != nil || len(md.Topics) != 1 {
			return false
		}
		for _, p := range md.Topics[0].Partitions {
			if p.Leader >= 0 && p.Leader != md.ControllerId && len(p.Isr) == 3 {
				victim = int(p.Leader)
				return true
			}
		}
		return false
	})
	var led []int32
	for _, p := range md.Topics[0].Partitions {
		if int(p.Leader) == victim {
			led = append(led, p.Partition)
		}
	}
	t.Logf("broker %d leads partitions %v; controller is %d", victim, led, md.ControllerId)

	// The rogue claims the victim's id at addresses of its own.
	rogueAddr := freeport.Loopback(t)
	rogue := joinRogue(t, sc, fmt.Sprintf("rogue-%d", victim), gossip.Meta{
		BrokerID: int32(victim), GRPCAddr: rogueAddr, RaftAddr: freeport.Loopback(t), Version: "rogue",
	})
	testutil.WaitFor(t, 30*time.Second, "the rogue to see every broker", func() bool { return len(rogue.Members()) == 4 })
	waitRefused(t, sc, victim, rogueAddr, 30*time.Second)

	sc.brokers[victim-1].kill9()
	killed := time.Now()
	survivor := 0
	if victim == 1 {
		survivor = 1
	}
	// Failure detection takes a few seconds with the local profile; the
	// rogue blocked the failover for as long as it stayed (20 s and more).
	testutil.WaitFor(t, 12*time.Second, fmt.Sprintf("partitions %v to get a new live leader", led), func() bool {
		md, err := metadataFrom(ctx, t, sc, survivor)
		if err != nil || len(md.Topics) != 1 {
			return false
		}
		for _, p := range md.Topics[0].Partitions {
			if p.Leader < 0 || int(p.Leader) == victim {
				return false
			}
		}
		return true
	})
	t.Logf("every partition has a live leader %v after the SIGKILL", time.Since(killed).Round(time.Millisecond))
	// The rogue was in gossip all along, and still is.
	testutil.WaitFor(t, 10*time.Second, "the rogue to see the survivors and itself only", func() bool { return len(rogue.Members()) == 3 })
	for _, b := range sc.brokers {
		if b.id != victim && strings.Contains(b.log(), "member=rogue-") && strings.Contains(b.log(), "msg=\"member leave\" component=gossip node=broker-"+fmt.Sprint(b.id)+" member=rogue-") {
			t.Errorf("broker %d saw the rogue leave gossip", b.id)
		}
	}
}

func TestGossipClaimThroughRelayIsNotRegistered(t *testing.T) {
	sc := startSecureCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const victim = 2
	realAddr := sc.brokers[victim-1].addr
	realRaft := sc.raft[victim-1]
	grpcRelay := startRelay(t, realAddr)
	raftRelay := startRelay(t, realRaft)

	joinRogue(t, sc, "rogue-relay", gossip.Meta{
		BrokerID: victim, GRPCAddr: grpcRelay.addr, RaftAddr: raftRelay.addr, Version: "rogue",
	})
	// Poll the metadata through many controller rounds (one each 250 ms):
	// the relay's address must never be registered for the victim.
	deadline := time.Now().Add(8 * time.Second)
	polls := 0
	for time.Now().Before(deadline) {
		md, err := metadataFrom(ctx, t, sc, 0)
		if err != nil {
			continue
		}
		polls++
		for _, b := range md.Brokers {
			if b.Id == victim && b.Address != realAddr {
				t.Fatalf("broker %d registered at %s (the relay is %s, the broker %s)", victim, b.Address, grpcRelay.addr, realAddr)
			}
		}
		<-time.After(50 * time.Millisecond)
	}
	if polls == 0 {
		t.Fatal("no metadata read succeeded")
	}
	waitRefused(t, sc, victim, grpcRelay.addr, 30*time.Second)
	// Broker 1's metrics say so too: the rogue is an unproven member, and
	// its claim was refused.
	testutil.WaitFor(t, 30*time.Second, "broker 1's metrics to show an unproven member and a refused claim", func() bool {
		m := adminMetrics(t, sc)
		return strings.Contains(m, `strata_gossip_members{state="alive"} 3`+"\n") &&
			strings.Contains(m, `strata_gossip_members{state="unproven"} 1`+"\n") &&
			!strings.Contains(m, "strata_gossip_claims_refused_total 0\n")
	})
	if grpcRelay.conns.Load() == 0 {
		t.Error("no broker dialled the relay: the claim was not checked at its address")
	}
	// The real broker still counts: it is registered at its own address
	// and alive in the cluster status.
	md, err := metadataFrom(ctx, t, sc, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range md.Brokers {
		found = found || (b.Id == victim && b.Address == realAddr)
	}
	if !found {
		t.Errorf("broker %d is not registered at its own address %s: %v", victim, realAddr, md.Brokers)
	}
}

// relay is a TCP relay on a loopback port: it copies bytes both ways to
// target and never looks at them, as a hostile router would.
type relay struct {
	addr  string
	conns atomic.Int64
}

func startRelay(t *testing.T, target string) *relay {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{addr: lis.Addr().String()}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		open []net.Conn
	)
	track := func(c net.Conn) { mu.Lock(); open = append(open, c); mu.Unlock() }
	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			r.conns.Add(1)
			track(in)
			wg.Go(func() {
				defer in.Close()
				out, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				track(out)
				defer out.Close()
				done := make(chan struct{}, 2)
				wg.Go(func() { io.Copy(out, in); done <- struct{}{} })
				wg.Go(func() { io.Copy(in, out); done <- struct{}{} })
				<-done
			})
		}
	})
	return r
}

// adminMetrics reads broker 1's metrics as admin.
func adminMetrics(t *testing.T, sc *secureCluster) string {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: sc.clientTLS(t, "admin")}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("https://" + sc.admin + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}
