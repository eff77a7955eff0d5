package e2e

// The trust boundary, tried from outside as an attacker on loopback would:
// three brokers with TLS (certificates from `strata dev certs`, a token from
// `strata dev token`), then calls without credentials, with a client's
// certificate where a broker's is needed, with a broker's certificate
// claiming another broker's id, with certificates from another CA or
// expired, a gossip member that cannot prove its id, and the rotation of
// certificates and tokens while the brokers run.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/security"
)

// secureCluster is three brokers with TLS and the files they run from.
type secureCluster struct {
	t       *testing.T
	certs   string // strata dev certs output
	tokens  string // the brokers' tokens file
	brokers []*brokerProc
	raft    []string
	admin   string // broker 1's admin endpoint
}

func startSecureCluster(t *testing.T) *secureCluster {
	dir := t.TempDir()
	sc := &secureCluster{t: t, certs: filepath.Join(dir, "certs"), tokens: filepath.Join(dir, "tokens")}
	runStrata(t, "dev", "certs", "--dir", sc.certs, "--brokers", "3", "--client", "admin", "--client", "alice")
	if err := os.WriteFile(sc.tokens, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(sc.certs, "gossip.key"))
	if err != nil {
		t.Fatal(err)
	}
	var gossip []string
	for range 3 {
		gossip = append(gossip, freeport.Loopback(t))
	}
	sc.admin = freeport.Loopback(t)
	for i := range 3 {
		id := i + 1
		addrs := brokerAddrs{grpc: freeport.Loopback(t), raft: freeport.Loopback(t), gossip: gossip[i]}
		sc.raft = append(sc.raft, addrs.raft)
		b := newBrokerAt(t, id, addrs, nil,
			"--gossip-join", strings.Join(gossip, ","), "--gossip-bootstrap-expect", "3", "--gossip-profile", "local",
			"--gossip-secret-key", strings.TrimSpace(string(key)),
			"--security-tls-ca-file", sc.file("ca.pem"),
			"--security-tls-cert-file", sc.file(fmt.Sprintf("broker-%d.pem", id)),
			"--security-tls-key-file", sc.file(fmt.Sprintf("broker-%d-key.pem", id)),
			"--security-tokens-file", sc.tokens,
			"--security-superusers", "User:admin")
		if id == 1 {
			b.args = append(b.args, "--admin-listen", sc.admin)
		}
		b.creds = credentials.NewTLS(sc.clientTLS(t, "admin"))
		sc.brokers = append(sc.brokers, b)
	}
	for _, b := range sc.brokers {
		b.launch()
	}
	for _, b := range sc.brokers {
		b.waitServing()
	}
	// Every broker registered (the controller proves each before it does).
	admin := sc.client(t, client.WithTLS(sc.clientTLS(t, "admin")))
	testutil.WaitFor(t, 2*time.Minute, "every broker registered", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		md, err := admin.Metadata(ctx)
		return err == nil && len(md.Brokers) == 3
	})
	return sc
}

func (sc *secureCluster) file(name string) string { return filepath.Join(sc.certs, name) }

// clientTLS trusts the cluster's CA and shows client-<name>'s certificate
// ("" for none).
func (sc *secureCluster) clientTLS(t *testing.T, name string) *tls.Config {
	t.Helper()
	var cert, key string
	if name != "" {
		cert, key = sc.file("client-"+name+".pem"), sc.file("client-"+name+"-key.pem")
	}
	cfg, err := client.TLSConfig(sc.file("ca.pem"), cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// client connects to the cluster with opts.
func (sc *secureCluster) client(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var addrs []string
	for _, b := range sc.brokers {
		addrs = append(addrs, b.addr)
	}
	c, err := client.New(ctx, addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// conn is a raw gRPC connection to broker i with cfg.
func (sc *secureCluster) conn(t *testing.T, i int, cfg *tls.Config) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(sc.brokers[i].addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// brokerTLS shows broker id's certificate, as a broker would.
func (sc *secureCluster) brokerTLS(t *testing.T, id int) *tls.Config {
	t.Helper()
	cfg, err := client.TLSConfig(sc.file("ca.pem"), sc.file(fmt.Sprintf("broker-%d.pem", id)), sc.file(fmt.Sprintf("broker-%d-key.pem", id)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func runStrata(t *testing.T, args ...string) string {
	t.Helper()
	out, err := osexec.Command(strataBin(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("strata %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: got %v, want %v", what, err, code)
	}
}

func TestSecurity(t *testing.T) {
	sc := startSecureCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	admin := sc.client(t, client.WithTLS(sc.clientTLS(t, "admin")))
	for _, topic := range []string{"a", "b"} {
		if _, err := admin.CreateTopic(ctx, topic, 1, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
			t.Fatal(err)
		}
	}
	appToken := addToken(t, sc, "User:app")
	if err := admin.CreateACLs(ctx,
		&stratav1.ACL{Principal: "User:app", ResourceType: "topic", Name: "a", Operation: "write"},
		&stratav1.ACL{Principal: "User:app", ResourceType: "topic", Name: "a", Operation: "read"},
	); err != nil {
		t.Fatal(err)
	}

	t.Run("a token reads and writes only what its ACLs grant", func(t *testing.T) {
		app := sc.client(t, client.WithTLS(sc.clientTLS(t, "")), client.WithToken(appToken))
		p := app.NewProducer(client.WithAcks(stratav1.Acks_ACKS_ALL))
		for i := range 10 {
			if err := p.ProduceSync(ctx, &client.Record{Topic: "a", Value: []byte(fmt.Sprint(i))}); err != nil {
				t.Fatalf("produce to a: %v", err)
			}
		}
		p.Close()
		if got := consumeAll(ctx, t, app, "a"); len(got) != 10 {
			t.Fatalf("read back %d records of a, want 10", len(got))
		}
		if _, err := app.ListOffsets(ctx, "b", 0, client.Latest()); !errors.Is(err, client.ErrPermissionDenied) {
			t.Errorf("list offsets of b: %v, want PERMISSION_DENIED", err)
		}
		k := app.NewConsumer(client.WithStopAtEnd(true))
		defer k.Close()
		if err := k.Assign("b", 0, client.Earliest()); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Poll(ctx); !errors.Is(err, client.ErrPermissionDenied) {
			t.Errorf("fetch from b: %v, want PERMISSION_DENIED", err)
		}
		p = app.NewProducer(client.WithAcks(stratav1.Acks_ACKS_ALL))
		defer p.Close()
		if err := p.ProduceSync(ctx, &client.Record{Topic: "b", Value: []byte("x")}); !errors.Is(err, client.ErrPermissionDenied) {
			t.Errorf("produce to b: %v, want PERMISSION_DENIED", err)
		}
		if err := app.DeleteTopic(ctx, "a"); !errors.Is(err, client.ErrPermissionDenied) {
			t.Errorf("delete a: %v, want PERMISSION_DENIED", err)
		}
		topics, err := app.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(topics) != 1 || topics[0].Name != "a" {
			t.Errorf("app lists %v, want only a", topics)
		}
	})

	t.Run("a producer id serves only the principal that initialised it", func(t *testing.T) {
		malloryToken := addToken(t, sc, "User:mallory")
		if err := admin.CreateACLs(ctx, &stratav1.ACL{Principal: "User:mallory", ResourceType: "topic", Name: "a", Operation: "write"}); err != nil {
			t.Fatal(err)
		}
		md, err := admin.Metadata(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		leader := int(md.Topics[0].Partitions[0].Leader) - 1
		cc := sc.conn(t, leader, sc.clientTLS(t, ""))
		as := func(token string) context.Context {
			return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		var init *stratav1.InitProducerResponse
		testutil.WaitFor(t, 30*time.Second, "mallory's token to be accepted and app's producer id", func() bool {
			init, err = stratav1.NewProduceServiceClient(cc).InitProducer(as(appToken), &stratav1.InitProducerRequest{})
			return err == nil && listTopicsWith(ctx, sc, malloryToken) == nil
		})
		if init.ProducerId < 1<<32 {
			t.Fatalf("producer id %d carries no binding to its principal", init.ProducerId)
		}
		opts := record.DefaultBatchOptions()
		opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = init.ProducerId, int16(init.ProducerEpoch), 0
		batch, err := record.Encode(opts, record.Record{Value: []byte("app's first")})
		if err != nil {
			t.Fatal(err)
		}
		produce := func(token string) error {
			_, err := stratav1.NewProduceServiceClient(cc).Produce(as(token), &stratav1.ProduceRequest{
				Topic: "a", Partition: 0, Acks: stratav1.Acks_ACKS_ALL, Batch: batch})
			return err
		}
		// Mallory may write to a, but not as app's producer: app's next
		// batch must not be taken for a duplicate of hers.
		wantCode(t, "mallory producing with app's producer id", produce(malloryToken), codes.PermissionDenied)
		if err := produce(appToken); err != nil {
			t.Fatalf("app producing with its own producer id: %v", err)
		}
	})

	t.Run("an anonymous caller gets nothing", func(t *testing.T) {
		cc := sc.conn(t, 0, sc.clientTLS(t, ""))
		_, err := stratav1.NewMetadataServiceClient(cc).GetMetadata(ctx, &stratav1.GetMetadataRequest{})
		wantCode(t, "anonymous GetMetadata", err, codes.Unauthenticated)
		_, err = stratav1.NewAdminServiceClient(cc).DeleteTopic(ctx, &stratav1.DeleteTopicRequest{Name: "a"})
		wantCode(t, "anonymous DeleteTopic", err, codes.Unauthenticated)
		_, err = stratav1.NewReplicationServiceClient(cc).AlterISR(ctx, &stratav1.AlterISRRequest{Topic: "a", LeaderId: 1, Isr: []int32{1}})
		wantCode(t, "anonymous AlterISR", err, codes.Unauthenticated)
		wantCode(t, "anonymous Replicate", replicate(ctx, cc, 2), codes.Unauthenticated)
		// A plaintext client cannot even talk to the broker.
		if out, err := osexec.Command(strataBin(t), "topic", "list", "--broker", sc.brokers[0].addr, "--timeout", "5s").CombinedOutput(); err == nil {
			t.Errorf("a plaintext client listed topics:\n%s", out)
		} else if !strings.Contains(string(out), "TLS") {
			t.Errorf("a plaintext client's error does not point at TLS:\n%s", out)
		}
		if false {
			t.Error("a plaintext client listed topics")
		}
	})

	t.Run("the replication plane answers only brokers, each as itself", func(t *testing.T) {
		alice := sc.conn(t, 0, sc.clientTLS(t, "alice"))
		wantCode(t, "a client's Replicate", replicate(ctx, alice, 2), codes.PermissionDenied)
		_, err := stratav1.NewReplicationServiceClient(alice).AlterISR(ctx, &stratav1.AlterISRRequest{Topic: "a", LeaderId: 1, Isr: []int32{1}})
		wantCode(t, "a client's AlterISR", err, codes.PermissionDenied)
		// Broker 2's certificate speaking as broker 3.
		b2 := sc.conn(t, 0, sc.brokerTLS(t, 2))
		wantCode(t, "broker 2 replicating as 3", replicate(ctx, b2, 3), codes.PermissionDenied)
		_, err = stratav1.NewReplicationServiceClient(b2).AlterISR(ctx, &stratav1.AlterISRRequest{Topic: "a", LeaderId: 3, Isr: []int32{3}})
		wantCode(t, "broker 2 altering the ISR as leader 3", err, codes.PermissionDenied)
		md, err := admin.Metadata(ctx, "a")
		if err != nil || len(md.Topics) != 1 {
			t.Fatalf("metadata of a: %v %v", md, err)
		}
		if isr := md.Topics[0].Partitions[0].Isr; len(isr) != 3 {
			t.Errorf("the ISR of a is %v after the refused calls, want all three", isr)
		}
	})

	t.Run("listeners refuse certificates from another CA, expired ones, and clients on Raft", func(t *testing.T) {
		ca, err := security.LoadCA(sc.file("ca.pem"), sc.file("ca-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		expired := issued(t, ca, security.CertRequest{CommonName: "old", DNSNames: []string{security.BrokerName(2, "strata")}, Server: true,
			NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
		other, err := security.NewCA("another CA", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		foreign := issued(t, other, security.CertRequest{CommonName: "broker-2", DNSNames: []string{security.BrokerName(2, "strata")}, Server: true})
		alice, err := tls.LoadX509KeyPair(sc.file("client-alice.pem"), sc.file("client-alice-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []struct{ name, addr string }{{"gRPC", sc.brokers[0].addr}, {"Raft", sc.raft[0]}, {"admin", sc.admin}} {
			if err := handshakeRefused(l.addr, &expired); err == nil {
				t.Errorf("%s accepted an expired certificate", l.name)
			}
			if err := handshakeRefused(l.addr, &foreign); err == nil {
				t.Errorf("%s accepted a certificate from another CA", l.name)
			}
		}
		if err := handshakeRefused(sc.raft[0], &alice); err == nil {
			t.Error("Raft accepted a client's certificate")
		}
		if err := handshakeRefused(sc.raft[0], nil); err == nil {
			t.Error("Raft accepted a caller without a certificate")
		}
	})

	t.Run("the admin endpoint serves metrics to admins only and no profiler", func(t *testing.T) {
		get := func(cfg *tls.Config, path string) int {
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
			resp, err := hc.Get("https://" + sc.admin + path)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode
		}
		for _, c := range []struct {
			who, path string
			want      int
		}{
			{"", "/healthz", 200}, {"", "/metrics", 401}, {"alice", "/metrics", 403},
			{"admin", "/metrics", 200}, {"admin", "/debug/pprof/", 404},
		} {
			if got := get(sc.clientTLS(t, c.who), c.path); got != c.want {
				t.Errorf("GET %s as %q: %d, want %d", c.path, c.who, got, c.want)
			}
		}
	})

	t.Run("a gossip member that cannot prove its id, or lacks the key, is not registered", func(t *testing.T) {
		key, _ := os.ReadFile(sc.file("gossip.key"))
		// A holder of the gossip key and of broker 3's certificate claims to
		// be broker 66 at its own addresses.
		rogue := newBroker(t, 66, "--gossip-join", sc.brokers[0].args[slices.Index(sc.brokers[0].args, "--gossip-listen")+1],
			"--gossip-secret-key", strings.TrimSpace(string(key)),
			"--security-tls-ca-file", sc.file("ca.pem"),
			"--security-tls-cert-file", sc.file("broker-3.pem"), "--security-tls-key-file", sc.file("broker-3-key.pem"))
		rogue.launch()
		testutil.WaitFor(t, time.Minute, "the controller to refuse broker 66's claim", func() bool {
			for _, b := range sc.brokers {
				if strings.Contains(b.log(), "does not prove the broker id it claims") && strings.Contains(b.log(), "claimed_id=66") {
					return true
				}
			}
			return false
		})
		md, err := admin.Metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, br := range md.Brokers {
			if br.Id == 66 {
				t.Errorf("the rogue was registered: %v", br)
			}
		}
		for _, b := range sc.brokers {
			for _, line := range lines(b.log()) {
				if strings.Contains(line, "joined the metadata group") && strings.Contains(line, "broker=66") {
					t.Errorf("broker %d's log shows broker 66 joining the metadata group: %s", b.id, line)
				}
			}
		}
		rogue.kill()

		// Without the gossip key a member cannot even join: memberlist drops
		// what it cannot decrypt.
		keyless := newBroker(t, 67, "--gossip-join", sc.brokers[0].args[slices.Index(sc.brokers[0].args, "--gossip-listen")+1])
		keyless.launch()
		testutil.WaitFor(t, time.Minute, "the keyless member's join to fail", func() bool {
			return strings.Contains(keyless.log(), "join failed")
		})
		md, err = admin.Metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, br := range md.Brokers {
			if br.Id == 67 {
				t.Errorf("a member without the gossip key was registered: %v", br)
			}
		}
		keyless.kill()
	})

	t.Run("certificates and tokens rotate without a restart", func(t *testing.T) {
		before := serverSerial(t, sc.brokers[0].addr, sc.clientTLS(t, "admin"))
		runStrata(t, "dev", "certs", "--dir", sc.certs, "--brokers", "3", "--client", "admin")
		testutil.WaitFor(t, 30*time.Second, "broker 1 to show its new certificate", func() bool {
			return serverSerial(t, sc.brokers[0].addr, sc.clientTLS(t, "admin")).Cmp(before) != 0
		})
		// The brokers still reach each other and the clients with the new
		// certificates: an acks=all write needs the followers.
		fresh := sc.client(t, client.WithTLS(sc.clientTLS(t, "admin")))
		p := fresh.NewProducer(client.WithAcks(stratav1.Acks_ACKS_ALL))
		if err := p.ProduceSync(ctx, &client.Record{Topic: "a", Value: []byte("after rotation")}); err != nil {
			t.Fatalf("produce after the rotation: %v", err)
		}
		p.Close()

		newToken := addToken(t, sc, "User:app")
		testutil.WaitFor(t, 30*time.Second, "the new token to be accepted", func() bool {
			return listTopicsWith(ctx, sc, newToken) == nil
		})
		// Revoke the first token: only the new line stays.
		lines := strings.Split(strings.TrimSpace(readFile(t, sc.tokens)), "\n")
		if err := os.WriteFile(sc.tokens, []byte(lines[len(lines)-1]+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 30*time.Second, "the revoked token to be refused", func() bool {
			return status.Code(listTopicsWith(ctx, sc, appToken)) == codes.Unauthenticated
		})
		if err := listTopicsWith(ctx, sc, newToken); err != nil {
			t.Errorf("the new token after revoking the old one: %v", err)
		}
	})
}

// addToken makes a token for principal and appends its line to the tokens
// file; it returns the token.
func addToken(t *testing.T, sc *secureCluster, principal string) string {
	t.Helper()
	out := strings.Split(strings.TrimSpace(runStrata(t, "dev", "token", principal)), "\n")
	if len(out) != 2 {
		t.Fatalf("strata dev token printed %q", out)
	}
	f, err := os.OpenFile(sc.tokens, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(out[1] + "\n"); err != nil {
		t.Fatal(err)
	}
	return out[0]
}

// listTopicsWith lists topics on broker 1 with token over a fresh
// connection.
func listTopicsWith(ctx context.Context, sc *secureCluster, token string) error {
	cfg, err := client.TLSConfig(sc.file("ca.pem"), "", "")
	if err != nil {
		return err
	}
	cc, err := grpc.NewClient(sc.brokers[0].addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		return err
	}
	defer cc.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cctx = metadata.AppendToOutgoingContext(cctx, "authorization", "Bearer "+token)
	_, err = stratav1.NewAdminServiceClient(cc).ListTopics(cctx, &stratav1.ListTopicsRequest{})
	return err
}

// replicate opens a Replicate stream as follower id and returns what the
// broker answers to its first message.
func replicate(ctx context.Context, cc *grpc.ClientConn, id int32) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := stratav1.NewReplicationServiceClient(cc).Replicate(cctx)
	if err != nil {
		return err
	}
	if err := s.Send(&stratav1.ReplicateRequest{FollowerId: id, Positions: []*stratav1.ReplicaPosition{{Topic: "a", Partition: 0}}}); err != nil {
		_, err = s.Recv()
		return err
	}
	_, err = s.Recv()
	return err
}

// issued makes a certificate of ca as a tls.Certificate.
func issued(t *testing.T, ca *security.CA, req security.CertRequest) tls.Certificate {
	t.Helper()
	c, k, err := ca.Issue(req)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// handshakeRefused shows cert (nil: none) to addr, trusting any server, and
// returns nil if the server accepted it. With TLS 1.3 the server's verdict
// on a client certificate arrives after the client's handshake is done, so
// it waits for the server's first word: an alert, or nothing until the
// deadline (accepted).
func handshakeRefused(addr string, cert *tls.Certificate) error {
	cfg := &tls.Config{InsecureSkipVerify: true}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err = c.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return nil // the server waits for the request: accepted
	}
	return err
}

// serverSerial is the serial number of the certificate addr shows.
func serverSerial(t *testing.T, addr string, cfg *tls.Config) *big.Int {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// consumeAll reads partition 0 of topic from the start to its end.
func consumeAll(ctx context.Context, t *testing.T, c *client.Client, topic string) []*client.Record {
	t.Helper()
	k := c.NewConsumer(client.WithStopAtEnd(true))
	defer k.Close()
	if err := k.Assign(topic, 0, client.Earliest()); err != nil {
		t.Fatal(err)
	}
	var out []*client.Record
	for {
		recs, err := k.Poll(ctx)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("consume %s: %v", topic, err)
		}
		out = append(out, recs...)
	}
}
