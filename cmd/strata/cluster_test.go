package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/rpc"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// adminBroker is a plaintext broker in this process with a cold tier in a
// local directory, serving gRPC and the admin endpoint on loopback.
type adminBroker struct {
	b     *broker.Broker
	srv   *rpc.Server
	addr  string // gRPC
	admin string // http://host:port of the admin endpoint
	conn  *grpc.ClientConn
}

func startAdminBroker(t *testing.T) *adminBroker {
	t.Helper()
	return startAdminBrokerWith(t, func(*config.Broker) {})
}

// startAdminBrokerWith is startAdminBroker with settings edit changes.
func startAdminBrokerWith(t *testing.T, edit func(*config.Broker)) *adminBroker {
	t.Helper()
	cfg := testBrokerConfig(t)
	cfg.Admin.Listen = freeport.Loopback(t)
	cfg.ObjectStore.Type = config.ObjectStoreFS
	edit(&cfg)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, srv := startInProcess(t, cfg)
	ab := &adminBroker{b: b, srv: srv, addr: cfg.Listen, admin: "http://" + cfg.Admin.Listen}
	adminLis, err := listenAdmin(cfg.Admin)
	if err != nil {
		ab.stop(t)
		t.Fatal(err)
	}
	admin := serveAdmin(cfg.Admin, adminLis, b, nil, logger)
	if ab.conn, err = grpc.NewClient(ab.addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ab.conn.Close()
		admin.Close()
		ab.stop(t)
	})
	return ab
}

// stop stops serving and closes the broker; twice is harmless.
func (ab *adminBroker) stop(t *testing.T) {
	if ab.srv == nil {
		return
	}
	ab.srv.GracefulStop()
	if err := ab.b.Close(); err != nil {
		t.Errorf("close broker: %v", err)
	}
	ab.srv = nil
}

// get fetches a path of the admin endpoint: status and body.
func (ab *adminBroker) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(ab.admin + path)
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

// traffic creates topic orders and produces to it, fetches it back,
// commits a group's offset, and makes one produce and one fetch fail.
func (ab *adminBroker) traffic(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := stratav1.NewAdminServiceClient(ab.conn).CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "orders", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	produce := stratav1.NewProduceServiceClient(ab.conn)
	for i := range 10 {
		if _, err := produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "orders", Partition: int32(i % 2), Records: []*stratav1.Record{{Value: []byte(fmt.Sprint(i))}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "missing", Records: []*stratav1.Record{{Value: []byte("x")}}}); err == nil {
		t.Fatal("produce to a missing topic succeeded")
	}
	fetch := stratav1.NewFetchServiceClient(ab.conn)
	for _, offset := range []int64{0, 100} {
		stream, err := fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: "orders", Offset: offset, StopAtEnd: true})
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := stream.Recv(); err != nil {
				if (err == io.EOF) != (offset == 0) {
					t.Fatalf("fetch from %d ended with %v", offset, err)
				}
				break
			}
		}
	}
	if _, err := stratav1.NewOffsetServiceClient(ab.conn).CommitOffsets(ctx, &stratav1.CommitOffsetsRequest{Group: "billing",
		Offsets: []*stratav1.CommittedOffset{{Topic: "orders", Partition: 0, Offset: 1}}}); err != nil {
		t.Fatal(err)
	}
}

// TestReadyz: /readyz says ready, beside /healthz, while the broker
// serves, and 503 with the reason in one line once it is shutting down.
func TestReadyz(t *testing.T) {
	ab := startAdminBroker(t)
	if code, body := ab.get(t, "/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Fatalf("/readyz of a serving broker: %d %q", code, body)
	}
	if code, body := ab.get(t, "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	ab.stop(t)
	code, body := ab.get(t, "/readyz")
	if code != http.StatusServiceUnavailable || body != "not ready: the broker is shutting down\n" {
		t.Fatalf("/readyz of a stopped broker: %d %q", code, body)
	}
}

// TestClusterStatusCommand runs strata cluster status against a real
// broker.
func TestClusterStatusCommand(t *testing.T) {
	ab := startAdminBroker(t)
	ab.traffic(t)
	out := mustStrataCmd(t, "cluster", "status", "--broker", ab.addr)
	rows := tableRows(out)
	want := []string{
		"BROKER ADDRESS RACK VERSION ALIVE CONTROLLER UPLOAD-LAG CACHE-HITS",
		"1 " + ab.addr + " - " + version + " yes yes 0 B -",
		"Under-replicated partitions: 0",
		"Offline partitions: 0",
		"Upload lag: 0 B in 0 partitions",
		"Cold tier: fs " + ab.b.DataDir() + "/objects",
	}
	for _, w := range want {
		if !slices.Contains(rows, w) {
			t.Errorf("no row %q in:\n%s", w, out)
		}
	}
	if !strings.Contains(out, "Cold chunk cache: ") || !strings.Contains(out, "over 1 broker") {
		t.Errorf("no cold cache line in:\n%s", out)
	}

	// The same as JSON, decoded into the documented names.
	var doc struct {
		BrokerID     int32    `json:"broker_id"`
		ControllerID int32    `json:"controller_id"`
		ReadReplica  bool     `json:"read_replica"`
		Topics       int      `json:"topics"`
		Partitions   int      `json:"partitions"`
		ColdTier     bool     `json:"cold_tier"`
		ObjectStores []string `json:"object_stores"`
		Brokers      []struct {
			ID          int32  `json:"id"`
			Address     string `json:"address"`
			Version     string `json:"version"`
			Alive       bool   `json:"alive"`
			Controller  bool   `json:"controller"`
			Answered    bool   `json:"answered"`
			ObjectStore string `json:"object_store"`
		} `json:"brokers"`
		UnderReplicated []json.RawMessage `json:"under_replicated"`
		UploadLag       []json.RawMessage `json:"upload_lag"`
		Cache           struct {
			Brokers int `json:"brokers"`
		} `json:"cache"`
	}
	js := mustStrataCmd(t, "cluster", "status", "--broker", ab.addr, "--format", "json")
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatalf("--format json: %v in:\n%s", err, js)
	}
	fsStore := "fs " + ab.b.DataDir() + "/objects"
	if doc.BrokerID != 1 || doc.ControllerID != 1 || doc.ReadReplica || doc.Topics != 1 || doc.Partitions != 2 || !doc.ColdTier ||
		!slices.Equal(doc.ObjectStores, []string{fsStore}) || doc.Cache.Brokers != 1 ||
		len(doc.Brokers) != 1 || doc.Brokers[0].Address != ab.addr || doc.Brokers[0].Version != version || !doc.Brokers[0].Alive || !doc.Brokers[0].Controller ||
		!doc.Brokers[0].Answered || doc.Brokers[0].ObjectStore != fsStore ||
		doc.UnderReplicated == nil || doc.UploadLag == nil {
		t.Errorf("--format json: %+v from:\n%s", doc, js)
	}
	if _, err := strataCmd(t, "cluster", "status", "--broker", ab.addr, "--format", "yaml"); err == nil || !strings.Contains(err.Error(), `--format "yaml": want text or json`) {
		t.Errorf("--format yaml: %v", err)
	}
	if !regexp.MustCompile(`^Cluster: 1 broker \(1 alive\), controller 1, 1 topic, 2 partitions; metadata version \d+, as broker 1 sees it$`).MatchString(rows[0]) {
		t.Errorf("first line %q", rows[0])
	}
	if _, err := strataCmd(t, "cluster", "status", "--broker", ab.addr, "--limit", "0"); err == nil || !strings.Contains(err.Error(), "--limit 0") {
		t.Errorf("--limit 0: %v", err)
	}
}

// TestPrintClusterStatus: what the lists look like with something in
// them, from answers of three brokers, one of which did not answer.
func TestPrintClusterStatus(t *testing.T) {
	pm := func(p, leader int32, replicas, isr []int32) *stratav1.PartitionMetadata {
		return &stratav1.PartitionMetadata{Partition: p, Leader: leader, Replicas: replicas, Isr: isr}
	}
	first := &stratav1.ClusterStatusResponse{
		BrokerId: 1, ControllerId: 1, MetadataVersion: 42, Topics: 2, Partitions: 9,
		Brokers: []*stratav1.BrokerStatus{
			{Id: 1, Address: "10.0.0.1:7400", Rack: "a", Alive: true, Registered: true, Version: "v1.2.0"},
			{Id: 2, Address: "10.0.0.2:7400", Rack: "b", Alive: true, Registered: true, Version: "v1.1.0"},
			{Id: 3, Address: "10.0.0.3:7400", Rack: "c", Registered: true},
			{Id: 4, Address: "10.0.0.4:7400", Alive: true},
		},
		UnderReplicated: []*stratav1.PartitionStatus{
			{Topic: "orders", Partition: pm(0, 1, []int32{1, 2, 3}, []int32{1, 2})},
			{Topic: "orders", Partition: pm(1, 2, []int32{2, 3, 1}, []int32{2, 1})},
		},
		UnderReplicatedCount: 5,
		Offline:              []*stratav1.PartitionStatus{{Topic: "audit", Partition: pm(2, -1, []int32{3}, []int32{3})}},
		OfflineCount:         1,
		UploadLag:            []*stratav1.PartitionUploadLag{{Topic: "orders", Partition: 0, Bytes: 3 << 20, Segments: 3}},
		UploadLagBytes:       3 << 20, UploadLagPartitions: 1,
		ColdTier: true, CacheHits: 90, CacheMisses: 10, ColdGets: 12, ObjectStore: "s3://strata/prod at http://10.0.0.9:9000",
	}
	second := &stratav1.ClusterStatusResponse{
		BrokerId:  2,
		UploadLag: []*stratav1.PartitionUploadLag{{Topic: "orders", Partition: 1, Bytes: 5 << 20, Segments: 5}, {Topic: "logs", Partition: 0, Bytes: 1 << 20, Segments: 1}},
		// The third partition is in a topic the caller may not see.
		UploadLagBytes: 7 << 20, UploadLagPartitions: 3,
		ColdTier: true, CacheHits: 10, CacheMisses: 90, ColdGets: 95, ObjectStore: "s3://strata/prod at http://10.0.0.9:9000",
	}
	st := &clusterStatus{ClusterStatusResponse: first,
		byBroker: map[int32]*stratav1.ClusterStatusResponse{1: first, 2: second},
		failed:   map[int32]error{4: fmt.Errorf("connection refused")}}
	var buf bytes.Buffer
	if err := printStatus(&buf, st, 2); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Cluster: 4 brokers (3 alive), controller 1, 2 topics, 9 partitions; metadata version 42, as broker 1 sees it",
		"BROKER ADDRESS RACK VERSION ALIVE CONTROLLER UPLOAD-LAG CACHE-HITS",
		"1 10.0.0.1:7400 a v1.2.0 yes yes 3.0 MiB 90.0%",
		"2 10.0.0.2:7400 b v1.1.0 yes - 7.0 MiB 10.0%",
		"3 10.0.0.3:7400 c - no - - -",
		"4 10.0.0.4:7400 - - yes (not registered yet) - ? ?",
		"broker 4 did not answer: connection refused",
		"Under-replicated partitions: 5",
		"TOPIC PARTITION LEADER REPLICAS ISR",
		"orders 0 1 1,2,3 1,2",
		"orders 1 2 2,3,1 2,1",
		"... and 3 more not listed",
		"Offline partitions: 1",
		"TOPIC PARTITION LEADER REPLICAS ISR",
		"audit 2 - 3 3",
		"Cold tier: s3://strata/prod at http://10.0.0.9:9000",
		"Upload lag: 10.0 MiB in 4 partitions",
		"TOPIC PARTITION LEADER LAG SEGMENTS",
		"orders 1 2 5.0 MiB 5",
		"orders 0 1 3.0 MiB 3",
		"... and 2 more not listed",
		"Cold chunk cache: 50.0% hits (100 of 200 chunk reads), 107 GETs sent, over 2 brokers",
	}
	var got []string
	for _, r := range tableRows(buf.String()) {
		if r != "" {
			got = append(got, r)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant rows:\n%s", buf.String(), strings.Join(want, "\n"))
	}
}
