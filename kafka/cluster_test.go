package kafka

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/internal/testutil/inproc"
	"github.com/strata-log/strata/rpc"
)

// startClusterBroker starts broker id of a cluster in process: gRPC (which
// brokers speak to each other) and Kafka listeners on loopback, joining the
// cluster of join (nil for the first broker). It returns once the
// controller has registered it.
func startClusterBroker(t *testing.T, id int32, dir string, join *testBroker) *testBroker {
	t.Helper()
	cfg := inproc.Config(t, id, filepath.Join(dir, "b"+string(rune('0'+id))))
	cfg.ObjectStore.Type = config.ObjectStoreNone
	if join != nil {
		cfg.Gossip.Join = []string{join.gossip}
	}
	glis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := broker.Start(testCtx(t), cfg, logger, rpc.NewPeers(nil, ""))
	if err != nil {
		glis.Close()
		t.Fatal(err)
	}
	gsrv := rpc.NewServer(b, nil)
	go gsrv.Serve(glis)
	klis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(b, Config{Advertise: klis.Addr().String(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(klis)
	tb := &testBroker{Broker: b, srv: srv, addr: klis.Addr().String(), gossip: cfg.Gossip.Listen}
	t.Cleanup(func() {
		srv.Close()
		gsrv.Stop()
		if err := b.Close(); err != nil {
			t.Errorf("close broker %d: %v", id, err)
		}
	})
	if join != nil {
		testutil.WaitFor(t, 20*time.Second, "the controller to register the new broker", func() bool {
			return slices.ContainsFunc(join.Cluster(nil).Brokers, func(v broker.BrokerView) bool { return v.ID == id })
		})
	}
	return tb
}

// threeBrokers starts a cluster of three, and returns the controller
// first (the metadata group may elect any of them).
func threeBrokers(t *testing.T) []*testBroker {
	dir := t.TempDir()
	b1 := startClusterBroker(t, 1, dir, nil)
	b2 := startClusterBroker(t, 2, dir, b1)
	b3 := startClusterBroker(t, 3, dir, b1)
	bs := []*testBroker{b1, b2, b3}
	c := b1.Cluster(nil).ControllerID
	i := slices.IndexFunc(bs, func(b *testBroker) bool { return b.ID() == c })
	if i < 0 {
		t.Fatalf("the controller is broker %d", c)
	}
	bs[0], bs[i] = bs[i], bs[0]
	return bs
}

// ledBy returns a partition of topic that broker id leads, as b sees it.
func ledBy(t *testing.T, b *testBroker, topic string, id int32) int32 {
	t.Helper()
	for _, tv := range b.Cluster([]string{topic}).Topics {
		for _, p := range tv.Partitions {
			if p.Leader == id {
				return p.Partition
			}
		}
	}
	t.Fatalf("broker %d leads no partition of %s", id, topic)
	return -1
}

// TestAdminOnAnyBroker: a broker that is not the controller passes
// controller work on to it (broker/controller.go): kadm creates a topic
// through a non-controller broker, which has it when the answer comes; it hands out
// producer ids too, so an idempotent producer works against any broker:
// ids from brokers 2 and 3 are fresh, and an idempotent kgo producer
// connected to a non-controller broker alone writes to the partition a non-controller broker leads.
func TestAdminOnAnyBroker(t *testing.T) {
	bs := threeBrokers(t)
	ctx := testCtx(t)
	adm := kadm.NewClient(bs[1].client(t))
	res, err := adm.CreateTopics(ctx, 3, 1, map[string]*string{"retention.ms": strp("172800000")}, "fwd")
	if err != nil || res["fwd"].Err != nil {
		t.Fatalf("create through a non-controller broker: %v %+v", err, res)
	}
	d, err := bs[1].DescribeTopic("fwd")
	if err != nil || kadm.TopicID(topicID(d.ID)) != res["fwd"].ID || d.Overrides["retention.ms"] != "172800000" {
		t.Fatalf("a non-controller broker has %+v, %v; created %+v", d, err, res["fwd"])
	}
	if _, err := bs[0].DescribeTopic("fwd"); err != nil {
		t.Fatalf("the controller: %v", err)
	}
	// The controller's refusals come back as they are.
	again, err := adm.CreateTopics(ctx, 1, 1, nil, "fwd")
	if err != nil || !errors.Is(again["fwd"].Err, kerr.TopicAlreadyExists) || !strings.Contains(again["fwd"].ErrMessage, "fwd") {
		t.Fatalf("create fwd again through a non-controller broker: %v %+v", err, again)
	}

	// Settings change through it too, in force on it when the answer
	// comes; ACLs likewise.
	alters, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.ms", Value: strp("60000")}}, "fwd")
	if err != nil || alters[0].Err != nil {
		t.Fatalf("alter through a non-controller broker: %v %+v", err, alters)
	}
	if d, _ := bs[1].DescribeTopic("fwd"); d.Overrides["segment.ms"] != "60000" {
		t.Fatalf("after the alter the broker asked has %v", d.Overrides)
	}
	acls, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("fwd").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || acls[0].Err != nil || len(bs[1].ACLs("User:alice")) != 1 || len(bs[0].ACLs("User:alice")) != 1 {
		t.Fatalf("create ACLs through a non-controller broker: %v %+v", err, acls)
	}

	seen := map[int64]bool{}
	for _, b := range bs {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionTimeoutMillis = 60000
		resp, err := req.RequestWith(ctx, b.client(t))
		if err != nil || resp.ErrorCode != 0 || resp.ProducerID < 0 || seen[resp.ProducerID] {
			t.Fatalf("InitProducerId on broker %d: %+v, %v", b.ID(), resp, err)
		}
		seen[resp.ProducerID] = true
	}

	p := ledBy(t, bs[1], "fwd", bs[1].ID())
	cl := bs[1].client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	for i := range 3 {
		r := &kgo.Record{Topic: "fwd", Partition: p, Value: []byte{byte(i)}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil || r.Offset != int64(i) || r.ProducerID < 0 {
			t.Fatalf("idempotent produce through a non-controller broker: offset %d, producer %d, %v", r.Offset, r.ProducerID, err)
		}
	}

	// And deletion: gone from the broker asked when the answer comes.
	dres, err := adm.DeleteTopics(ctx, "fwd")
	if err != nil || dres["fwd"].Err != nil {
		t.Fatalf("delete through a non-controller broker: %v %+v", err, dres)
	}
	if _, err := bs[1].DescribeTopic("fwd"); err == nil {
		t.Fatal("the broker asked still has the deleted topic")
	}
}
