package rpc

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/security"
)

// tlsBroker is a broker of a cluster with TLS, served in process.
type tlsBroker struct {
	*broker.Broker
	addr  string
	certs string
}

// startTLSBrokers starts n brokers with TLS and authorization (superuser
// User:root) as one cluster, bootstrapped together: each gRPC server
// must answer the others' checks of its identity (broker.Peers
// VerifyBroker) while the metadata group forms.
func startTLSBrokers(t *testing.T, n int, certs string) []*tlsBroker {
	t.Helper()
	raw := make([]byte, 32)
	rand.Read(raw)
	key := config.Secret(base64.StdEncoding.EncodeToString(raw))
	cfgs := make([]config.Broker, n)
	var gossip []string
	for i := range cfgs {
		id := int32(i + 1)
		cfg := brokerConfig(t, id, filepath.Join(certs, "b"+strconv.Itoa(int(id))))
		cfg.Listen = freeport.Loopback(t)
		cfg.Gossip.SecretKey = key
		cfg.Gossip.BootstrapExpect = n
		base := filepath.Join(certs, "broker-"+strconv.Itoa(int(id)))
		cfg.Security.TLS = config.TLSFiles{CAFile: filepath.Join(certs, "ca.pem"), CertFile: base + ".pem", KeyFile: base + "-key.pem"}
		cfg.Security.Superusers = []string{"User:root"}
		gossip = append(gossip, cfg.Gossip.Listen)
		cfgs[i] = cfg
	}
	out := make([]*tlsBroker, n)
	errs := make(chan error, n)
	for i := range cfgs {
		cfg := cfgs[i]
		cfg.Gossip.Join = gossip
		m := mustMaterial(t, certs, "broker-"+strconv.Itoa(i+1))
		lis, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			t.Fatal(err)
		}
		// The server must serve while the broker starts: it answers the
		// others' identity checks through the broker, so it is built on
		// a broker that exists once Start returns; until then connections
		// wait in the listener's backlog.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			anyBroker := security.RequireBroker(-1, cfg.Security.ClusterName)
			b, err := broker.Start(ctx, cfg, quietLogger(), NewPeers(m, cfg.Security.ClusterName),
				broker.WithRaftTLS(&cluster.TransportTLS{Server: m.ServerConfig(true, anyBroker), Client: m.ClientConfig(anyBroker)}),
				broker.WithProducerIDKey(broker.ProducerIDKey([]byte(key))))
			if err != nil {
				lis.Close()
				errs <- err
				return
			}
			srv := NewServer(b, &Auth{Material: m, Cluster: cfg.Security.ClusterName, Superusers: cfg.Security.Superusers, ACLs: b.ACLsInForce, Log: quietLogger()})
			go srv.Serve(lis)
			out[i] = &tlsBroker{Broker: b, addr: cfg.Listen, certs: certs}
			t.Cleanup(func() {
				srv.Stop()
				b.Close()
			})
			errs <- nil
		}()
	}
	for range cfgs {
		if err := <-errs; err != nil {
			t.Fatalf("start a broker: %v", err)
		}
	}
	return out
}

// conn is a client connection to tb with the certificate of base
// (client-alice, broker-1, ...).
func (tb *tlsBroker) conn(t *testing.T, base string) *grpc.ClientConn {
	t.Helper()
	m := mustMaterial(t, tb.certs, base)
	c, err := grpc.NewClient(tb.addr, grpc.WithTransportCredentials(credentials.NewTLS(m.ClientConfig(nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestForwardingUnderTLS: with TLS, a call a broker passes on to the
// controller is made for the client it came from, and checked again there
// as that client: a superuser's ACL change through a non-controller
// broker is made; a producer id handed out through it is bound to the
// client (another principal cannot write with it); the controller, asked
// directly through the broker's controller client, refuses a principal
// without the ACL; a client cannot name another principal itself.
func TestForwardingUnderTLS(t *testing.T) {
	certs := t.TempDir()
	if err := security.WriteDevCerts(certs, security.DevCerts{Brokers: 2, Clients: []string{"alice", "root"}}); err != nil {
		t.Fatal(err)
	}
	bs := startTLSBrokers(t, 2, certs)
	b1, b2 := bs[0], bs[1]
	ctx := testCtx(t)
	testutil.WaitFor(t, 20*time.Second, "both brokers to be registered", func() bool {
		return len(b1.Cluster(nil).Brokers) == 2 && len(b2.Cluster(nil).Brokers) == 2
	})
	controller, other := b1, b2
	if b1.Cluster(nil).ControllerID == 2 {
		controller, other = b2, b1
	}

	// Through the broker that is not the controller: root creates a topic
	// and grants alice write on it; alice gets a producer id.
	root := stratav1.NewAdminServiceClient(other.conn(t, "client-root"))
	if _, err := root.CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "a", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatalf("root creates a through the non-controller: %v", err)
	}
	if _, err := root.CreateACLs(ctx, &stratav1.CreateACLsRequest{Acls: []*stratav1.ACL{{Principal: "User:alice", ResourceType: "topic", Name: "a", Operation: "write"}}}); err != nil {
		t.Fatalf("root grants alice through the non-controller: %v", err)
	}
	alice := stratav1.NewAdminServiceClient(other.conn(t, "client-alice"))
	_, err := alice.CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "b", Partitions: 1, ReplicationFactor: 1})
	if code, _, _ := errorInfo(err); code != codes.PermissionDenied {
		t.Fatalf("alice creates b: %v; want PERMISSION_DENIED", err)
	}
	init, err := stratav1.NewProduceServiceClient(other.conn(t, "client-alice")).InitProducer(ctx, &stratav1.InitProducerRequest{})
	if err != nil {
		t.Fatalf("alice's producer id through the non-controller: %v", err)
	}
	// The id is alice's: root, who may write anywhere, may not write with
	// it; alice may. The leader of a is whichever broker.
	leader := b1
	if md := b1.Cluster([]string{"a"}); md.Topics[0].Partitions[0].Leader == 2 {
		leader = b2
	}
	opts := record.DefaultBatchOptions()
	opts.ProducerID, opts.ProducerEpoch, opts.BaseSequence = init.ProducerId, int16(init.ProducerEpoch), 0
	batch, err := record.Encode(opts, record.Record{Value: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	produce := func(who string) error {
		_, err := stratav1.NewProduceServiceClient(leader.conn(t, who)).Produce(ctx, &stratav1.ProduceRequest{
			Topic: "a", Acks: stratav1.Acks_ACKS_ALL, Batch: batch})
		return err
	}
	if code, _, _ := errorInfo(produce("client-root")); code != codes.PermissionDenied {
		t.Fatalf("root writing with alice's producer id: %v; want PERMISSION_DENIED", produce("client-root"))
	}
	if err := produce("client-alice"); err != nil {
		t.Fatalf("alice writing with her producer id: %v", err)
	}

	// The controller checks the principal named: asked through the
	// non-controller's own controller client for alice, it refuses what
	// alice may not do.
	peers := NewPeers(mustMaterial(t, certs, "broker-"+strconv.Itoa(int(other.ID()))), "strata")
	defer peers.Close()
	cc, err := peers.Controller(broker.Peer{ID: controller.ID(), Addr: controller.addr})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cc.CreateTopic(security.WithPrincipal(ctx, security.Principal{Name: "User:alice"}), "c", 1, 1, nil)
	if broker.ReasonOf(err) != broker.ReasonPermissionDenied {
		t.Fatalf("the controller, asked for alice: %v; want PERMISSION_DENIED", err)
	}
	if _, err := controller.DescribeTopic("c"); err == nil {
		t.Fatal("the controller created c for alice")
	}

	// A client cannot name another principal: only a broker may.
	md := metadata.AppendToOutgoingContext(ctx, principalHeader, "User:root", forwardedHeader, "1")
	_, err = stratav1.NewAdminServiceClient(controller.conn(t, "client-alice")).CreateTopic(md, &stratav1.CreateTopicRequest{Name: "d", Partitions: 1})
	if code, _, _ := errorInfo(err); code != codes.Unauthenticated {
		t.Fatalf("alice naming root: %v; want UNAUTHENTICATED", err)
	}
}

func mustMaterial(t *testing.T, certs, base string) *security.Material {
	t.Helper()
	m, err := security.LoadMaterial(security.Files{CA: filepath.Join(certs, "ca.pem"), Cert: filepath.Join(certs, base+".pem"),
		Key: filepath.Join(certs, base+"-key.pem")}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	return m
}
