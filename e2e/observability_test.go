package e2e

import (
	"context"
	"io"
	"net/http"
	osexec "os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// TestClusterStatusAndHealthOfACluster: three broker processes, each with
// its admin endpoint. strata cluster status asks one broker for the
// cluster and every other live one for itself; /readyz says ready; once a
// broker is killed, the status, the survivors' /metrics and the dead
// broker's missing answer all tell of its partitions.
func TestClusterStatusAndHealthOfACluster(t *testing.T) {
	tc := &testCluster{t: t}
	admins := map[int32]string{}
	for range 3 {
		tc.gossip = append(tc.gossip, freeport.Loopback(t))
	}
	for i := range 3 {
		admin := freeport.Loopback(t)
		admins[int32(i+1)] = admin
		// A short lag_time_max: a leader takes a follower that just died
		// back into the ISR for that long (it was caught up and heard from
		// recently), and the controller takes it out again.
		tc.brokers = append(tc.brokers, tc.newMember(i+1, tc.gossip[i], "--admin-listen", admin, "--replica-lag-time-max", "1s"))
	}
	tc.start()
	b1 := tc.brokers[0]
	b1.run(nil, "topic", "create", "t", "--partitions", "3", "--replication-factor", "3")

	for id, admin := range admins {
		if code, body := httpGet(t, admin, "/readyz"); code != http.StatusOK || body != "ready\n" {
			t.Fatalf("broker %d /readyz: %d %q", id, code, body)
		}
	}
	rows := rowsOf(b1.run(nil, "cluster", "status"))
	for id := int32(1); id <= 3; id++ {
		// Every broker answered for itself: its upload lag and cache show.
		row := rowStarting(rows, tc.byID(id).id, tc.byID(id).addr)
		if !strings.Contains(row, " yes ") || !strings.HasSuffix(row, " 0 B no cold tier") {
			t.Errorf("broker %d's row %q:\n%s", id, row, strings.Join(rows, "\n"))
		}
	}
	if !slices.Contains(rows, "Under-replicated partitions: 0") || !slices.Contains(rows, "Offline partitions: 0") {
		t.Errorf("a healthy cluster:\n%s", strings.Join(rows, "\n"))
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	controller := tc.agreedController(ctx)
	victim := tc.byID(controller%3 + 1)
	victim.kill9()
	testutil.WaitFor(t, 30*time.Second, "the survivors to report three under-replicated partitions", func() bool {
		var urp float64
		for id, admin := range admins {
			if id != int32(victim.id) {
				urp += scrape(t, admin)["strata_under_replicated_partitions"]
			}
		}
		return urp == 3
	})
	testutil.WaitFor(t, 30*time.Second, "cluster status to show the dead broker and the under-replicated partitions", func() bool {
		rows = rowsOf(b1.run(nil, "cluster", "status"))
		dead := rowStarting(rows, victim.id, victim.addr)
		return strings.Contains(dead, " no ") && slices.Contains(rows, "Under-replicated partitions: 3")
	})
	if m := scrape(t, admins[controller]); m["strata_controller_active"] != 1 || m["strata_leader_elections_total"] < 1 {
		t.Errorf("the controller's metrics: active %v, elections %v", m["strata_controller_active"], m["strata_leader_elections_total"])
	}
}

// rowStarting returns the squeezed table row of a broker.
func rowStarting(rows []string, id int, addr string) string {
	prefix := strconv.Itoa(id) + " " + addr + " "
	for _, r := range rows {
		if strings.HasPrefix(r, prefix) {
			return r
		}
	}
	return ""
}

func httpGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestOperatorViewWithTLS: with authentication on, a refused request is
// counted by principal and as an error of its topic, /readyz stays open
// like /healthz while /metrics asks for an admin, and any authenticated
// principal may run strata cluster status, which reaches every broker.
func TestOperatorViewWithTLS(t *testing.T) {
	sc := startSecureCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := sc.client(t, client.WithTLS(sc.clientTLS(t, "admin")))
	if _, err := admin.CreateTopic(ctx, "x", 1, 3, nil); err != nil {
		t.Fatal(err)
	}
	// alice may do nothing with x; broker 1 refuses her before anything
	// else, wherever x leads.
	produce := stratav1.NewProduceServiceClient(sc.conn(t, 0, sc.clientTLS(t, "alice")))
	_, err := produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "x", Records: []*stratav1.Record{{Value: []byte("v")}}})
	wantCode(t, "alice's produce", err, codes.PermissionDenied)

	get := func(who, path string) (int, string) {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: sc.clientTLS(t, who)}, Timeout: 10 * time.Second}
		resp, err := hc.Get("https://" + sc.admin + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("", "/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Errorf("/readyz without credentials: %d %q", code, body)
	}
	if code, _ := get("", "/metrics"); code != http.StatusUnauthorized {
		t.Errorf("/metrics without credentials: %d", code)
	}
	code, metrics := get("admin", "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics as admin: %d", code)
	}
	for _, want := range []string{`strata_auth_denials_total{principal="User:alice"} 1`, `strata_produce_errors_total{topic="x",reason="PERMISSION_DENIED"} 1`} {
		if !strings.Contains(metrics, "\n"+want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	out, err := osexec.Command(strataBin(t), "cluster", "status", "--broker", sc.brokers[0].addr,
		"--tls-ca", sc.file("ca.pem"), "--tls-cert", sc.file("client-alice.pem"), "--tls-key", sc.file("client-alice-key.pem")).CombinedOutput()
	if err != nil {
		t.Fatalf("strata cluster status as alice: %v\n%s", err, out)
	}
	rows := rowsOf(string(out))
	for _, b := range sc.brokers {
		if row := rowStarting(rows, b.id, b.addr); !strings.Contains(row, " yes ") || !strings.HasSuffix(row, " 0 B no cold tier") {
			t.Errorf("broker %d's row %q:\n%s", b.id, row, out)
		}
	}
}
